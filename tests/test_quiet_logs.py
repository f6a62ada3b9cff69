"""Beam's routine log lines that would bury ours are dropped; everything else passes (pipelines/__init__.py)."""

import logging

import pipelines  # noqa: F401 - installs the filters


def test_routine_service_lines_are_dropped_and_others_pass(caplog):
    logger = logging.getLogger("apache_beam.utils.subprocess_server")
    with caplog.at_level(logging.DEBUG, logger="apache_beam.utils.subprocess_server"):
        logger.warning("Really starting service at %s with cmd: %s", "localhost:1", ["java"])
        logger.warning("Really destroying service at %s with cmd: %s", "localhost:1", ["java"])
        logger.error("Could not close the gRPC channel started with cmd %s", ["java"])
    assert [r.getMessage() for r in caplog.records] == ["Could not close the gRPC channel started with cmd ['java']"]


def test_a_workers_relayed_log_shows_its_failures_only(caplog):
    """The runner logs each entry a local worker sends (Beam's logging service): errors pass, the rest not."""
    logger = logging.getLogger("apache_beam.runners.portability.local_job_service")
    with caplog.at_level(logging.DEBUG, logger="apache_beam.runners.portability.local_job_service"):
        for level, entry in ((logging.INFO, "severity: INFO message: \"Logging handler created.\""),
                             (logging.WARNING, "severity: WARN message: \"No semi_persistent_directory found\""),
                             (logging.ERROR, "severity: ERROR message: \"Error processing instruction 3\""),
                             (logging.CRITICAL, "severity: CRITICAL message: \"Python sdk harness failed\"")):
            logger.log(level, "Worker: %s", entry)
        logger.warning("Job state changed to %s", "FAILED")  # the runner's own lines pass
    assert [r.getMessage() for r in caplog.records] == [
        "Worker: severity: ERROR message: \"Error processing instruction 3\"",
        "Worker: severity: CRITICAL message: \"Python sdk harness failed\"", "Job state changed to FAILED"]
