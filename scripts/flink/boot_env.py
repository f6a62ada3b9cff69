#!/usr/bin/env python3
"""Prepare what a PROCESS environment running Beam's Python boot program needs (docs/running.md).

Beam's SDK containers start their workers with a Go "boot program" (the
``container`` binary of ``github.com/apache/beam/sdks/v2/python/container``):
it fetches the job's staged files, makes a venv with ``python -m venv
--system-site-packages`` from the first ``python`` it finds, installs the
staged files (``--setup_file``'s sdist) into it with pip, and starts Beam's SDK
harness. Outside a container (``--environment_type=PROCESS``, the command
``scripts/flink/process_worker.sh``) that needs two things, both cached under
the Flink cache root (``~/.cache/notarius/flink/beam-boot/<beam version>/``,
``$NOTARIUS_FLINK_CACHE``):

1. the boot program, built with ``go install
   github.com/apache/beam/sdks/v2/python/container@v<beam version>`` (the Beam
   version of the interpreter running this script) with ``GOBIN`` in the cache;
   about a minute the first time, an 18 MB binary;
2. a Python *installation* that has that Beam: a venv cannot serve (a venv
   made from a venv sees the base installation's packages, not the first
   venv's). This script uses the base installation of the interpreter running
   it (``sys.base_prefix``) unchanged and installs ``apache-beam==<version>``
   with ``pip install --user`` into a cache folder given as
   ``PYTHONUSERBASE``: a venv made with ``--system-site-packages`` keeps the
   user site (Python's site.py), so the boot program's venv sees Beam, pip
   there counts it as installed, and nothing else (not this project) is
   importable before the staged sdist is installed. It checks exactly that
   in a venv made the boot program's way.

Pure standard library; importable (``prepare()``) and runnable:

    python scripts/flink/boot_env.py [--json | --environment-config]

prints what it prepared (``--json``: the paths and the PROCESS environment's
``env``; ``--environment-config``: only the ``--environment_config`` value,
for a shell). A second call finds the first one's work and only re-checks it.
Exit codes: 0 ready, 3 Go missing, 4 the build, the install or the check failed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

BOOT_MODULE = "github.com/apache/beam/sdks/v2/python/container"
GO_ENV = "NOTARIUS_GO"  # a go binary to use instead of the one on PATH or in /usr/local/go
GO_FALLBACKS = ("/usr/local/go/bin/go",)
WORKER_COMMAND = Path(__file__).resolve().with_name("process_worker.sh")
EXIT_TOOLS = 3
EXIT_FAILED = 4


class BootEnvError(RuntimeError):
    def __init__(self, message: str, exit_code: int = EXIT_FAILED):
        super().__init__(message)
        self.exit_code = exit_code


def _load_sibling(name: str):
    module_name = f"_notarius_flink_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, Path(__file__).with_name(f"{name}.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


_fjs = _load_sibling("fetch_job_server")  # the cache root and its lock: one cache for all Flink things


@dataclass(frozen=True)
class BootEnv:
    beam_version: str
    boot: Path  # Beam's Python boot program (the `container` binary)
    python: Path  # the base installation's interpreter the boot program makes its venv from
    user_base: Path  # PYTHONUSERBASE: apache-beam==beam_version installed there with pip --user
    worker_command: Path = WORKER_COMMAND

    @property
    def path(self) -> str:
        """The workers' PATH: the installation's bin first (the boot program makes its venv with the
        first `python`, else `python3`, on PATH, then puts the venv's bin first)."""
        return os.pathsep.join([str(self.python.parent), "/usr/bin", "/bin"])

    def env(self) -> dict[str, str]:
        """The PROCESS environment's "env" (what process_worker.sh and the boot program read).

        Not PYTHON_PATH, which the boot program would also take for its venv's interpreter: it runs its
        pip installs with that interpreter too, which installs the staged sdist and its dependencies into
        the installation, not the venv. PYTHONPATH is emptied so nothing of the TaskManager's environment
        makes the project importable."""
        return {"NOTARIUS_BEAM_BOOT": str(self.boot), "PATH": self.path,
                "PYTHONUSERBASE": str(self.user_base), "PYTHONPATH": ""}

    def environment_config(self) -> str:
        """--environment_config of --environment_type=PROCESS."""
        return json.dumps({"command": str(self.worker_command), "env": self.env()})

    def run(self, *args: str, cwd: str | os.PathLike | None = None, **kwargs) -> subprocess.CompletedProcess:
        """The installation's python as the workers see it (their env, not this checkout's)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env.update(self.env())
        del env["PYTHONPATH"]
        return subprocess.run([str(self.python), *args], env=env, cwd=cwd or tempfile.gettempdir(),
                              capture_output=True, text=True, **kwargs)


def installed_beam_version() -> str:
    try:
        return importlib.metadata.version("apache-beam")
    except importlib.metadata.PackageNotFoundError:
        raise BootEnvError(f"apache-beam is not installed for {sys.executable}: run this with the "
                           "project's .venv/bin/python (make install)") from None


def base_python() -> Path:
    """The interpreter of the installation this one runs over (itself when not in a venv)."""
    candidate = Path(getattr(sys, "_base_executable", "") or sys.executable)
    if not candidate.is_file():
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        candidate = Path(sys.base_prefix, "bin", version)
    return candidate


def find_go() -> str:
    for found in (os.environ.get(GO_ENV), shutil.which("go"), *GO_FALLBACKS):
        if found and os.access(found, os.X_OK):
            return found
    raise BootEnvError(
        f"Go not found (not on PATH, not in {', '.join(GO_FALLBACKS)}; or set {GO_ENV}): Beam's Python boot "
        f"program is built with `go install {BOOT_MODULE}@v<beam version>`. Install Go (https://go.dev/dl/).",
        EXIT_TOOLS)


def cache_dir(beam_version: str, cache_root: Path | None = None) -> Path:
    return (cache_root or _fjs.CACHE_ROOT) / "beam-boot" / beam_version


def _log(message: str) -> None:
    print(f"boot env: {message}", file=sys.stderr, flush=True)


def build_boot(beam_version: str, folder: Path, log=_log) -> Path:
    """Beam's Python boot program for beam_version, built once into folder (GOBIN)."""
    target = folder / "container"
    if target.is_file() and os.access(target, os.X_OK):
        return target
    go = find_go()
    log(f"building Beam's Python boot program: go install {BOOT_MODULE}@v{beam_version} (about a minute)")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".gobin-") as gobin:
        env = dict(os.environ, GOBIN=gobin, CGO_ENABLED="0")
        done = subprocess.run([go, "install", f"{BOOT_MODULE}@v{beam_version}"], env=env, cwd=gobin,
                              capture_output=True, text=True)
        built = Path(gobin, "container")
        if done.returncode != 0 or not built.is_file():
            raise BootEnvError(f"go install {BOOT_MODULE}@v{beam_version} failed ({done.returncode}):\n"
                               f"{done.stderr[-3000:]}")
        os.replace(built, target)
    return target


def _python_key(python: Path) -> str:
    """One user base per installation (its prefix and version) and Beam version."""
    probe = subprocess.run([str(python), "-c", "import sys; print(sys.prefix, sys.version)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    tag = subprocess.run([str(python), "-c", "import sys; print(f'py{sys.version_info[0]}.{sys.version_info[1]}')"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return f"{tag}-{hashlib.sha256(probe.encode()).hexdigest()[:10]}"


def install_beam(env: BootEnv, log=_log) -> None:
    """apache-beam==version into env.user_base with the installation's pip (--user)."""
    log(f"installing apache-beam=={env.beam_version} for {env.python} into {env.user_base} (pip --user)")
    done = env.run("-m", "pip", "install", "--user", "--quiet", "--disable-pip-version-check",
                   "--no-warn-script-location", f"apache-beam=={env.beam_version}")
    if done.returncode != 0:
        raise BootEnvError(f"pip install --user apache-beam=={env.beam_version} with {env.python} failed "
                           f"({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-3000:]}")


CHECK = """
import importlib.metadata, importlib.util, json, sys
print(json.dumps({"beam": importlib.metadata.version("apache-beam"),
                  "pipelines": importlib.util.find_spec("pipelines") is not None,
                  "prefix": sys.prefix, "base_prefix": sys.base_prefix}))
"""


def check(env: BootEnv, venv: bool = True) -> dict:
    """What the boot program's venv sees: Beam at env.beam_version, pip counting it as installed (the
    boot program's `pip show apache-beam`), and not this project. venv=False checks the installation
    itself (cheaper: no venv made). Raises BootEnvError otherwise."""
    with tempfile.TemporaryDirectory(prefix="beam-boot-check-") as tmp:
        python = env.python
        if venv:
            made = env.run("-m", "venv", "--system-site-packages", f"{tmp}/venv", cwd=tmp)
            if made.returncode != 0:
                raise BootEnvError(f"{env.python} -m venv --system-site-packages failed:\n{made.stderr[-2000:]}")
            python = Path(tmp, "venv", "bin", "python")
        seen = BootEnv(env.beam_version, env.boot, python, env.user_base).run("-c", CHECK, cwd=tmp)
        if seen.returncode != 0:
            raise BootEnvError(f"{python} cannot read its packages:\n{seen.stderr[-2000:]}")
        found = json.loads(seen.stdout)
        if found["beam"] != env.beam_version:
            raise BootEnvError(f"{python} sees apache-beam {found['beam']}, not {env.beam_version}")
        if found["pipelines"]:
            raise BootEnvError(f"{python} can import this project's `pipelines` before anything is staged: "
                               "the workers' environment is not clean")
        if venv:
            shown = BootEnv(env.beam_version, env.boot, python, env.user_base).run(
                "-m", "pip", "show", "apache-beam", cwd=tmp)
            if shown.returncode != 0:
                raise BootEnvError(f"pip in a venv of {env.python} does not count apache-beam as installed "
                                   f"(the boot program would refuse to start):\n{shown.stderr[-2000:]}")
        return found


def check_path(env: BootEnv) -> None:
    """The `python` (else `python3`) the boot program finds on the workers' PATH is env.python."""
    found = shutil.which("python", path=env.path) or shutil.which("python3", path=env.path)
    if not found or os.path.realpath(found) != os.path.realpath(env.python):
        raise BootEnvError(f"the first python on the workers' PATH ({env.path}) is {found}, not {env.python}")


def prepare(beam_version: str | None = None, cache_root: Path | None = None, log=_log) -> BootEnv:
    """The boot program and a Python installation with Beam for its workers (cached; idempotent)."""
    beam_version = beam_version or installed_beam_version()
    folder = cache_dir(beam_version, cache_root)
    python = base_python()
    folder.mkdir(parents=True, exist_ok=True)
    with _fjs._lock(folder / ".lock"):
        boot = build_boot(beam_version, folder, log=log)
        user_base = folder / _python_key(python)
        env = BootEnv(beam_version, boot, python, user_base)
        check_path(env)
        stamp = user_base / ".ready"
        if not stamp.is_file():
            if user_base.exists():
                shutil.rmtree(user_base)  # an install that did not finish
            install_beam(env, log=log)
            check(env, venv=True)
            stamp.write_text(json.dumps({"python": str(python), "beam": beam_version}) + "\n")
        else:
            check(env, venv=False)
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print the paths and the environment's env as JSON")
    shown.add_argument("--environment-config", action="store_true",
                       help="print only the --environment_config of --environment_type=PROCESS")
    args = parser.parse_args(argv)
    try:
        env = prepare()
    except BootEnvError as e:
        print(f"boot env: {e}", file=sys.stderr)
        return e.exit_code
    if args.environment_config:
        print(env.environment_config())
    elif args.json:
        print(json.dumps({"beam_version": env.beam_version, "boot": str(env.boot), "python": str(env.python),
                          "user_base": str(env.user_base), "environment_config": json.loads(env.environment_config())},
                         indent=2))
    else:
        print(f"Beam {env.beam_version} boot program: {env.boot}\n"
              f"workers' Python: {env.python} (apache-beam {env.beam_version} in PYTHONUSERBASE={env.user_base}; "
              f"this project not importable)\n"
              f"--environment_type=PROCESS --environment_config='{env.environment_config()}'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
