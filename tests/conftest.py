import os
import sys
from pathlib import Path

import pytest

# Test helpers (fixture_archive, output_reader, flink_support) import by plain name.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_configure(config):
    config.addinivalue_line("markers", "flink_e2e: runs the job on Apache Flink (needs Java and the job server jar)")
    if os.environ.get("NOTARIUS_EXPECT_COMPILED") == "1" and not _domain_compiled():
        # `python -m bench.compiled pytest` sets it: a run meant for the compiled domain
        # must not pass on the pure one.
        raise pytest.UsageError(f"NOTARIUS_EXPECT_COMPILED=1, but {_domain_file()} is not compiled")


def _domain_file() -> str:  # as bench.compiled.PROBE_MODULE (not imported: conftest must not need bench)
    import domain.evidence  # one of the modules setup.py compiles with NOTARIUS_COMPILE=1

    return domain.evidence.__file__


def _domain_compiled() -> bool:
    return _domain_file().endswith((".so", ".pyd"))


def pytest_report_header(config):
    return f"domain: {'compiled' if _domain_compiled() else 'pure Python'} ({Path(_domain_file()).parent})"


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
