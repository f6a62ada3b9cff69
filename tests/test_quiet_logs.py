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
