#!/usr/bin/env python3
"""Put Beam's Flink job server jar into Beam's own jar cache, using Maven.

Beam's Python FlinkRunner, when given no ``--flink_job_server_jar``, looks for
``~/.apache_beam/cache/jars/beam-runners-flink-<F>-job-server-<beam>.jar`` and
otherwise downloads it itself with urllib at run time. We fetch it ahead of
time with Maven instead (Maven honours the machine's repository settings, and a
run-time download inside a test is slow and flaky), into exactly the file Beam
looks for, so a pipeline finds it with or without ``--flink_job_server_jar``.

Pure standard library on purpose: it must run before (and without) anything
else being importable. Run it with the interpreter that has apache-beam
installed (the project venv), since the jar version must equal Beam's version.

    python scripts/flink/fetch_job_server.py [--flink-version 1.20] [--check]

Prints the jar path on stdout. Exit codes: 0 ok, 2 Beam missing or unusable
version, 3 Java or Maven missing, 4 Maven could not fetch the jar.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BEAM_GROUP_ID = "org.apache.beam"
# Same default as apache_beam.utils.subprocess_server.JavaJarServer.JAR_CACHE.
DEFAULT_JAR_CACHE = Path(os.path.expanduser("~/.apache_beam/cache/jars"))
# Lets the whole project (session cluster, tests, Makefile) agree on one Flink
# line without editing code; unset means "whatever Beam's FlinkRunner defaults to".
FLINK_VERSION_ENV = "NOTARIUS_FLINK_VERSION"

EXIT_BEAM = 2
EXIT_TOOLS = 3
EXIT_FETCH = 4


class FetchError(RuntimeError):
    """A failure with a user-facing message and a process exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def beam_version() -> str:
    """Version of the installed apache-beam distribution (no heavy import)."""
    try:
        return importlib.metadata.version("apache-beam")
    except importlib.metadata.PackageNotFoundError as e:
        raise FetchError(
            f"apache-beam is not installed for {sys.executable}; run this script "
            "with the project's virtualenv python",
            EXIT_BEAM,
        ) from e


def published_flink_versions() -> list[str]:
    """FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS, read from Beam's source.

    Parsed with ``ast`` instead of imported: importing apache_beam takes seconds
    and pulls in grpc/protobuf, which this bootstrap script should not need.
    The last entry is the FlinkRunner's ``--flink_version`` default.
    """
    spec = importlib.util.find_spec("apache_beam")
    if spec is None or not spec.submodule_search_locations:
        raise FetchError(
            f"apache_beam is not importable from {sys.executable}; run this "
            "script with the project's virtualenv python",
            EXIT_BEAM,
        )
    src = Path(list(spec.submodule_search_locations)[0]) / "options" / "pipeline_options.py"
    tree = ast.parse(src.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "FlinkRunnerOptions":
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "PUBLISHED_FLINK_VERSIONS"
                    for t in stmt.targets
                ):
                    versions = ast.literal_eval(stmt.value)
                    if isinstance(versions, list) and versions:
                        return [str(v) for v in versions]
    raise FetchError(f"PUBLISHED_FLINK_VERSIONS not found in {src}", EXIT_BEAM)


def resolve_flink_version(requested: str | None = None) -> str:
    """Flink minor line (e.g. '1.20') for both the job server and any cluster.

    Order: explicit argument, $NOTARIUS_FLINK_VERSION, Beam's default.
    """
    published = published_flink_versions()
    version = requested or os.environ.get(FLINK_VERSION_ENV) or published[-1]
    if version not in published:
        raise FetchError(
            f"Flink {version} has no Beam job server; Beam {beam_version()} "
            f"publishes {', '.join(published)}",
            EXIT_BEAM,
        )
    return version


def maven_version(version: str) -> str:
    """Release version to ask Maven for, mirroring JavaJarServer.path_to_beam_jar."""
    if ".dev" in version:
        raise FetchError(
            f"apache-beam {version} is a dev build; no job server jar is published "
            "for it (build it from the Beam source tree)",
            EXIT_BEAM,
        )
    # Release candidates are published as the final version number.
    return version.split("rc")[0] if "rc" in version else version


def artifact_id(flink_version: str) -> str:
    return f"beam-runners-flink-{flink_version}-job-server"


def jar_path(flink_version: str, version: str | None = None, cache_dir: Path | None = None) -> Path:
    """The exact file Beam's FlinkRunner looks for in its jar cache.

    JavaJarServer.local_jar() uses ``os.path.basename(url)`` of the Maven URL,
    i.e. ``<artifactId>-<version>.jar`` (JavaJarServer.jar_name without
    classifier/appendix), inside the cache dir (Beam's ``--jar_cache_dir``).
    """
    version = maven_version(version or beam_version())
    cache = cache_dir or DEFAULT_JAR_CACHE
    return cache / f"{artifact_id(flink_version)}-{version}.jar"


def find_java() -> str | None:
    """Java the same way Beam finds it: $JAVA_HOME/bin/java, else PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("java")


def _maven_failure_reason(output: str) -> str:
    """The one informative phrase of a failed Maven run."""
    output = re.sub(r"\x1b\[[0-9;]*m", "", output)  # ANSI colours, just in case
    for marker in (
        "Could not find artifact",
        "Could not transfer artifact",
        "was not found in",
        "Couldn't download artifact",
    ):
        for line in output.splitlines():
            if marker in line:
                return line[line.index(marker) :].strip()
    errors = [ln for ln in output.splitlines() if ln.startswith("[ERROR]")]
    return (errors[0] if errors else output.strip()[-500:]).replace("[ERROR]", "").strip()


def fetch(flink_version: str, cache_dir: Path | None = None, timeout_s: float = 1200) -> Path:
    """Return the cached jar path, fetching it with Maven if it is not there yet."""
    target = jar_path(flink_version, cache_dir=cache_dir)
    if target.is_file() and target.stat().st_size > 0:
        return target  # Already cached: nothing to do.

    if find_java() is None:
        raise FetchError(
            "Java not found (neither $JAVA_HOME/bin/java nor java on PATH); "
            "the Flink job server is a Java program (install a JDK 11+, e.g. "
            "apt-get install openjdk-17-jdk-headless)",
            EXIT_TOOLS,
        )
    mvn = shutil.which("mvn")
    if mvn is None:
        raise FetchError(
            "Maven (mvn) not found on PATH; it is used to fetch the job server "
            "jar (apt-get install maven)",
            EXIT_TOOLS,
        )

    coords = f"{BEAM_GROUP_ID}:{artifact_id(flink_version)}:{maven_version(beam_version())}:jar"
    target.parent.mkdir(parents=True, exist_ok=True)
    # Download next to the target and rename, so a concurrent reader (Beam or a
    # second fetch) never sees a half-written jar.
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        cmd = [
            mvn,
            "-B",
            "-U",
            "-q",
            "-Dstyle.color=never",
            "dependency:copy",
            f"-Dartifact={coords}",
            f"-DoutputDirectory={tmp}",
            "-Dmdep.overWriteReleases=true",
        ]
        print(f"fetching {coords} with Maven ...", file=sys.stderr)
        try:
            # cwd=tmp: never pick up a pom.xml from the caller's directory.
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            raise FetchError(
                f"Maven timed out after {timeout_s:.0f}s fetching {coords}", EXIT_FETCH
            ) from e
        downloaded = Path(tmp) / target.name
        if proc.returncode != 0 or not downloaded.is_file():
            reason = _maven_failure_reason(proc.stdout + proc.stderr)
            raise FetchError(f"Maven could not fetch {coords}: {reason}", EXIT_FETCH)
        os.replace(downloaded, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--flink-version",
        help=f"Flink minor line (default: ${FLINK_VERSION_ENV} or Beam's default)",
    )
    parser.add_argument(
        "--jar-cache-dir",
        type=Path,
        help="Beam's --jar_cache_dir (default: ~/.apache_beam/cache/jars)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="only print the expected path; exit 1 if it is not cached",
    )
    args = parser.parse_args(argv)
    try:
        flink_version = resolve_flink_version(args.flink_version)
        if args.check:
            path = jar_path(flink_version, cache_dir=args.jar_cache_dir)
            print(path)
            return 0 if path.is_file() else 1
        print(fetch(flink_version, cache_dir=args.jar_cache_dir))
        return 0
    except FetchError as e:
        print(f"fetch_job_server: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
