#!/usr/bin/env python3
"""Before the tests: obtain the Flink job server jar and the Flink runtime jars.

``make test`` runs this first, so a fresh machine builds (or finds) everything
the Beam-on-Flink tests need outside pytest's timeouts, and the log says which
route was taken. Exit codes: 0 ready, or Flink unavailable on this machine
(no Java, or neither a served release nor the vendored sources: the tests
then SKIP with the same reason); 1 something that should work failed (the
tests then fail with the same message).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _load(name: str):
    module_name = f"_notarius_flink_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    cluster = _load("session_cluster")
    fjs = cluster._fjs
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    try:
        version = fjs.resolve_flink_version()
        jar, route = fjs.obtain(version, log=log)
    except fjs.FetchError as e:
        if e.unavailable:
            log(f"flink: Beam-on-Flink tests will be SKIPPED: {e}")
            return 0
        log(f"flink: cannot obtain the job server jar: {e}")
        return 1
    log(f"flink: Flink {version} job server jar ({route}): {jar}")
    try:
        home = cluster.flink_home(version)
    except cluster.ClusterError as e:
        log(f"flink: cannot obtain the Flink {version} runtime jars: {e}")
        return 1
    log(f"flink: Flink {cluster.patch_release(version)} runtime jars for the session cluster: {home}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
