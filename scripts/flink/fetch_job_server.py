#!/usr/bin/env python3
"""Obtain Beam's Flink job server jar: from a cache, from Maven, or built from source.

Beam's Python FlinkRunner starts a Java "job server" jar
(``beam-runners-flink-<F>-job-server``). This script finds or makes it, in
this order, and says on stderr which route it took:

1. the jar given with ``--flink-job-server-jar`` (or
   ``$NOTARIUS_FLINK_JOB_SERVER_JAR``);
2. Beam's own jar cache (``~/.apache_beam/cache/jars/``), where Beam's
   FlinkRunner looks for the released jar of the installed Beam version;
3. a jar this script built earlier from the vendored sources (cached under
   ``~/.cache/notarius/flink/job-server/``);
4. the released jar from Maven (``mvn dependency:copy`` into Beam's cache),
   after a quick HTTP HEAD on the repository: where it is not served (the
   Maven Central mirror of this project's machines serves none), Maven is not
   started at all, so the miss costs a fraction of a second, not minutes;
5. otherwise it builds the jar with Maven from the vendored Beam sources
   (``../shared/vendor/beam-flink-job-server``, found next to the repository
   or one of its parents, or ``$NOTARIUS_FLINK_VENDOR_DIR``). The build
   directory is a temporary folder in the cache, never the vendored folder
   (it may be read-only). About 2 minutes and ~250 MB into ``~/.m2`` the first
   time.

A second call finds the jar of the first and does nothing else.

The Flink line is the project's, 1.20, for the job server and the session
cluster alike (``--flink-version`` or ``$NOTARIUS_FLINK_VERSION`` choose
another). 1.20 is the newest line the vendored sources build and the one whose
standalone session cluster runs this job (docs/running.md).

Pure standard library on purpose: it must run before (and without) anything
else being importable. Run it with the interpreter that has apache-beam
installed (the project venv), since the released jar's version must equal Beam's.

    python scripts/flink/fetch_job_server.py [--flink-version 1.20] [--check]

Prints the jar path on stdout. Exit codes: 0 ok, 2 Beam missing or unusable
version, 3 Java or Maven missing, 4 Maven could not fetch or build the jar,
5 no route left (no released jar served and no vendored sources).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fcntl
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

BEAM_GROUP_ID = "org.apache.beam"
# Same default as apache_beam.utils.subprocess_server.JavaJarServer.JAR_CACHE.
DEFAULT_JAR_CACHE = Path(os.path.expanduser("~/.apache_beam/cache/jars"))
# The project's one Flink line, for the job server and the session cluster.
# Not Beam's default (2.2 in Beam 2.77): the vendored sources build 1.19 and
# 1.20 only, and 1.20 is the line proven on a standalone session cluster.
PROJECT_FLINK_LINE = "1.20"
# Lets the whole project (session cluster, tests, Makefile) agree on another
# line without editing code.
FLINK_VERSION_ENV = "NOTARIUS_FLINK_VERSION"
# A prebuilt job server jar, used as it is (route 1).
JOB_SERVER_JAR_ENV = "NOTARIUS_FLINK_JOB_SERVER_JAR"
# Where the vendored Beam Flink runner sources are, if not ../shared/vendor/...
VENDOR_DIR_ENV = "NOTARIUS_FLINK_VENDOR_DIR"
VENDOR_RELATIVE = Path("shared") / "vendor" / "beam-flink-job-server"
# Flink lines the vendored pom.xml builds (its default and its 1.20 profile).
VENDOR_FLINK_LINES = ("1.19", "1.20")
# Same cache root as session_cluster.py.
CACHE_ROOT = Path(os.environ.get("NOTARIUS_FLINK_CACHE", "~/.cache/notarius/flink")).expanduser()
REPO_ROOT = Path(__file__).resolve().parent.parent.parent
# Maven repository for the release lookup: $NOTARIUS_MAVEN_REPO, else a mirror
# of central in ~/.m2/settings.xml, else Maven Central (as Beam itself uses).
MAVEN_REPO_ENV = "NOTARIUS_MAVEN_REPO"
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"

EXIT_BEAM = 2
EXIT_TOOLS = 3
EXIT_FETCH = 4
EXIT_UNAVAILABLE = 5


class FetchError(RuntimeError):
    """A failure with a user-facing message and a process exit code.

    ``unavailable`` marks the machine lacking what Flink needs at all (no
    Java, or neither a served release nor the vendored sources), as opposed to
    something that should have worked and broke.
    """

    def __init__(self, message: str, exit_code: int, *, unavailable: bool = False) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.unavailable = unavailable


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

    Order: explicit argument, $NOTARIUS_FLINK_VERSION, the project's line (1.20).
    """
    published = published_flink_versions()
    version = requested or os.environ.get(FLINK_VERSION_ENV) or PROJECT_FLINK_LINE
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


def _require_java() -> None:
    if find_java() is None:
        raise FetchError(
            "Java not found (neither $JAVA_HOME/bin/java nor java on PATH); "
            "the Flink job server is a Java program (install a JDK 11+, e.g. "
            "apt-get install openjdk-17-jdk-headless)",
            EXIT_TOOLS,
            unavailable=True,
        )


def _require_maven(purpose: str) -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise FetchError(f"Maven (mvn) not found on PATH; it is used to {purpose} (apt-get install maven)", EXIT_TOOLS)
    return mvn


# ---------------------------------------------------------- release (Maven) --


def maven_repository() -> str:
    """Base URL of the repository Maven would fetch Beam's release from."""
    override = os.environ.get(MAVEN_REPO_ENV)
    if override:
        return override.rstrip("/")
    settings = Path(os.path.expanduser("~/.m2/settings.xml"))
    if settings.is_file():
        try:
            root = ET.parse(settings).getroot()
        except ET.ParseError:
            return MAVEN_CENTRAL
        ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
        for mirror in root.iter(f"{ns}mirror"):
            of = (mirror.findtext(f"{ns}mirrorOf") or "").split(",")
            url = mirror.findtext(f"{ns}url")
            if url and ("*" in of or "central" in of):
                return url.strip().rstrip("/")
    return MAVEN_CENTRAL


def release_url(flink_version: str, version: str | None = None) -> str:
    version = maven_version(version or beam_version())
    group = BEAM_GROUP_ID.replace(".", "/")
    artifact = artifact_id(flink_version)
    return f"{maven_repository()}/{group}/{artifact}/{version}/{artifact}-{version}.jar"


def release_served(flink_version: str, timeout_s: float = 10.0) -> bool | None:
    """Does the repository serve the released jar? None when it cannot tell.

    One HEAD request instead of starting Maven (10+ s warm, longer on an empty
    ~/.m2) just to hear "Could not find artifact".
    """
    request = urllib.request.Request(release_url(flink_version), method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            return 200 <= resp.status < 300
    except urllib.error.HTTPError as e:
        return False if e.code in (403, 404, 410) else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def fetch(flink_version: str, cache_dir: Path | None = None, timeout_s: float = 1200) -> Path:
    """The released jar in Beam's cache, fetching it with Maven if it is not there yet."""
    target = jar_path(flink_version, cache_dir=cache_dir)
    if target.is_file() and target.stat().st_size > 0:
        return target  # Already cached: nothing to do.
    _require_java()
    mvn = _require_maven("fetch the job server jar")

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


# ------------------------------------------------------ vendored build (mvn) --


def repository_roots() -> list[Path]:
    """This checkout, then, for a clone of a local checkout, the checkout its ``origin`` names
    (a fresh clone in a temporary folder still finds the workplace's ``shared/`` that way)."""
    roots = [REPO_ROOT]
    try:
        url = subprocess.run(["git", "-C", str(REPO_ROOT), "remote", "get-url", "origin"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        url = ""
    url = url.removeprefix("file://")
    if url and "://" not in url and not re.match(r"^[^/]+:", url):  # a local path, not host:path
        origin = Path(url).expanduser()
        origin = origin if origin.is_absolute() else (REPO_ROOT / origin)
        if origin.is_dir() and origin.resolve() != REPO_ROOT:
            roots.append(origin.resolve())
    return roots


def find_beside_repository(relative: Path) -> Path | None:
    """``relative`` (e.g. ``shared/vendor/...``) beside a repository root or beside one of its
    parents (a git worktree may sit deeper than the main checkout)."""
    for root in repository_roots():
        for parent in root.parents:
            if (parent / relative).exists():
                return parent / relative
    return None


def vendor_dir() -> Path | None:
    """The vendored job server sources: $NOTARIUS_FLINK_VENDOR_DIR, else
    ``shared/vendor/beam-flink-job-server`` found by :func:`find_beside_repository`."""
    override = os.environ.get(VENDOR_DIR_ENV)
    if override:
        path = Path(override).expanduser()
        return path if (path / "pom.xml").is_file() else None
    candidate = find_beside_repository(VENDOR_RELATIVE / "pom.xml")
    return candidate.parent if candidate is not None else None


def vendor_beam_version(vendor: Path) -> str:
    """``<beam.version>`` of the vendored pom.xml: the version of the built jar."""
    root = ET.parse(vendor / "pom.xml").getroot()
    ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    version = root.findtext(f"{ns}properties/{ns}beam.version")
    if not version:
        raise FetchError(f"no <beam.version> property in {vendor / 'pom.xml'}", EXIT_FETCH)
    return version.strip()


def built_jar_path(flink_version: str, vendor: Path, cache_root: Path | None = None) -> Path:
    """Where a jar built from the vendored sources is kept (named as the pom names it)."""
    root = cache_root or CACHE_ROOT
    return root / "job-server" / f"{artifact_id(flink_version)}-{vendor_beam_version(vendor)}.jar"


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive lock across processes (two test sessions, make and pytest)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(flink_version: str, vendor: Path, cache_root: Path | None = None, timeout_s: float = 1800) -> Path:
    """Build the job server jar from the vendored sources (cached; atomic)."""
    if flink_version not in VENDOR_FLINK_LINES:
        raise FetchError(
            f"the vendored job server sources build Flink {', '.join(VENDOR_FLINK_LINES)} only, "
            f"not {flink_version} (set {FLINK_VERSION_ENV}=1.20)",
            EXIT_FETCH,
        )
    target = built_jar_path(flink_version, vendor, cache_root)
    if target.is_file() and target.stat().st_size > 0:
        return target
    _require_java()
    mvn = _require_maven("build the job server jar from the vendored sources")
    with _lock(target.parent / ".build.lock"):
        if target.is_file() and target.stat().st_size > 0:
            return target  # Another process built it while we waited.
        build_dir = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".build-{flink_version}-"))
        try:
            cmd = [
                mvn,
                "-B",
                "-q",
                "-Dstyle.color=never",
                "-f",
                str(vendor / "pom.xml"),
                f"-DbuildDir={build_dir}",
                f"-Dflink.line={flink_version}",
                "package",
            ]
            print(
                f"building {target.name} with Maven from {vendor} (measured: 1 min 57 s the first time, "
                "bringing ~250 MB of dependencies into ~/.m2; 47 s with a warm ~/.m2) ...",
                file=sys.stderr,
                flush=True,
            )
            try:
                proc = subprocess.run(cmd, cwd=build_dir, capture_output=True, text=True, timeout=timeout_s)
            except subprocess.TimeoutExpired as e:
                raise FetchError(f"Maven build timed out after {timeout_s:.0f}s: {' '.join(cmd)}", EXIT_FETCH) from e
            built = build_dir / target.name
            if proc.returncode != 0 or not built.is_file():
                output = (proc.stdout + proc.stderr).strip().splitlines()
                raise FetchError(
                    f"Maven could not build {target.name} ({' '.join(cmd)}):\n" + "\n".join(output[-30:]),
                    EXIT_FETCH,
                )
            os.replace(built, target)
        finally:
            shutil.rmtree(build_dir, ignore_errors=True)
    return target


# ------------------------------------------------------------------- routes --


def obtain(
    flink_version: str,
    *,
    given: str | None = None,
    cache_dir: Path | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[Path, str]:
    """(jar, route): the first route that yields a job server jar (module docstring)."""
    given = given or os.environ.get(JOB_SERVER_JAR_ENV)
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise FetchError(f"the given job server jar {path} does not exist", EXIT_FETCH)
        return path, "given (--flink-job-server-jar / $" + JOB_SERVER_JAR_ENV + ")"
    released = jar_path(flink_version, cache_dir=cache_dir)
    if released.is_file() and released.stat().st_size > 0:
        return released, "released jar, already in Beam's jar cache"
    vendor = vendor_dir()
    if vendor is not None and flink_version in VENDOR_FLINK_LINES:
        built = built_jar_path(flink_version, vendor)
        if built.is_file() and built.stat().st_size > 0:
            return built, f"built earlier from the vendored sources ({vendor}), cached"
    _require_java()
    served = release_served(flink_version)
    if served is not False:
        try:
            return fetch(flink_version, cache_dir=cache_dir), "released jar, fetched with Maven"
        except FetchError as e:
            if vendor is None:
                raise
            if log:
                log(f"fetch_job_server: {e}; building from the vendored sources instead")
    elif log:
        log(f"fetch_job_server: release not served ({release_url(flink_version)} answers 'not found'); "
            + ("building from the vendored sources" if vendor else "no vendored sources either"))
    if vendor is None:
        raise FetchError(
            f"no route to a Flink {flink_version} job server jar: the release "
            f"{artifact_id(flink_version)}:{maven_version(beam_version())} is not served by "
            f"{maven_repository()}, and no vendored sources were found (looked for "
            f"{VENDOR_RELATIVE} beside {REPO_ROOT} and its parents; set ${VENDOR_DIR_ENV})",
            EXIT_UNAVAILABLE,
            unavailable=True,
        )
    return build(flink_version, vendor), f"built from the vendored sources ({vendor}) with Maven"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--flink-version",
        help=f"Flink minor line (default: ${FLINK_VERSION_ENV} or {PROJECT_FLINK_LINE})",
    )
    parser.add_argument(
        "--flink-job-server-jar",
        help=f"use this jar as it is (default: ${JOB_SERVER_JAR_ENV})",
    )
    parser.add_argument(
        "--jar-cache-dir",
        type=Path,
        help="Beam's --jar_cache_dir (default: ~/.apache_beam/cache/jars)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="only print the expected released-jar path; exit 1 if it is not cached",
    )
    args = parser.parse_args(argv)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    try:
        flink_version = resolve_flink_version(args.flink_version)
        if args.check:
            path = jar_path(flink_version, cache_dir=args.jar_cache_dir)
            print(path)
            return 0 if path.is_file() else 1
        path, route = obtain(
            flink_version, given=args.flink_job_server_jar, cache_dir=args.jar_cache_dir, log=log
        )
        log(f"fetch_job_server: Flink {flink_version} job server jar: {route}")
        print(path)
        return 0
    except FetchError as e:
        print(f"fetch_job_server: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
