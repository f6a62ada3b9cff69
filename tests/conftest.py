import os
import signal
import sys
from pathlib import Path

import pytest

# The Ctrl-C tests need SIGINT to arrive. A shell without job control starts a background command
# (`make test &`) with SIGINT ignored, and every process under it inherits that: take it back here,
# in each pytest process, so the commands the tests start get Python's own handler.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Test helpers (fixture_archive, output_reader, flink_support) import by plain name.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_configure(config):
    config.addinivalue_line("markers", "reliability: too long for make test; make reliability runs it "
                                       "(NOTARIUS_RELIABILITY=1)")
    config.addinivalue_line("markers", "flink_e2e: runs the job on Apache Flink (needs Java and the job server jar)")


def pytest_terminal_summary(terminalreporter):
    """Name the Flink end-to-end tests' outcomes, so CI's quiet log shows they ran."""
    lines = []
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            if "flink_e2e" in getattr(report, "keywords", {}) and report.when in ("call", "setup"):
                if outcome == "passed" and report.when != "call":
                    continue
                lines.append(f"{outcome.upper()} {report.nodeid}")
    if lines:
        terminalreporter.write_sep("-", "Beam on Flink")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(config, items):
    """Reliability tests (minutes each) run only under ``make reliability``: otherwise they are deselected,
    not skipped, so the suite's count never includes a test that did not run."""
    if os.environ.get("NOTARIUS_RELIABILITY") == "1":
        return
    kept = [item for item in items if "reliability" not in item.keywords]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if "reliability" in item.keywords])
        items[:] = kept


@pytest.fixture(scope="session")
def flink_jar() -> str:
    """Beam's Flink job server jar. Only a machine that cannot have it at all (flink_support.job_server_jar)
    skips a Flink test; any other failure to obtain it fails the test."""
    from flink_support import job_server_jar

    path, route, unavailable = job_server_jar()
    if path is None:
        if unavailable:
            pytest.skip(f"Flink unavailable on this machine: {route}")
        pytest.fail(f"could not obtain the Flink job server jar: {route}")
    return path
