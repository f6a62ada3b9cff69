"""A full disk (or quota) in one line: how its error is recognised wherever it was raised, and Beam's
reports of it kept quiet.

Beam-free. A write that finds no room fails its bundle; Beam logs the bundle's traceback (in-process,
or in a worker and once more as the runner relays the worker's log), a worker prints it on its stderr
too, and the runner raises it again, as text when it came from a worker. The command that holds the
output folder says it in one line instead (``pipelines.guards``), so these reports are dropped: by a
filter on Beam's loggers in the command's process, and in a local worker (``runners.warm_workers``)
by the worker falling silent, as it does on Ctrl-C, since Beam prints that traceback whatever the
logging setup.
"""

from __future__ import annotations

import errno
import logging
import os
from contextlib import contextmanager
from typing import Iterator

# A full disk, and a full quota: no room to write.
NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# How such an error reads once it reaches the runner as text ("OSError: [Errno 28] No space left on device").
NO_SPACE_TEXTS = tuple(f"[Errno {number}] {os.strerror(number)}" for number in NO_SPACE_ERRNOS)
# Beam's loggers that report a failed bundle with its traceback: where it failed (in-process or in a
# worker), the worker's instruction, and a worker's log as the runner relays it.
BUNDLE_FAILURE_LOGGERS = ("apache_beam.runners.common", "apache_beam.runners.worker.sdk_worker",
                          "apache_beam.runners.portability.local_job_service")


def no_space_left(error: BaseException | None) -> tuple[bool, str | None]:
    """(does ``error`` come from a full disk or quota, the path it names if any): the error itself, what
    it was raised from or while handling, or a worker's error that reached the runner as text."""
    seen: set[int] = set()
    found = False
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in NO_SPACE_ERRNOS:
            return True, error.filename if isinstance(error.filename, str) else None
        found = found or any(text in str(error) for text in NO_SPACE_TEXTS)
        error = error.__cause__ or error.__context__
    return found, None


def about_no_space(record: logging.LogRecord) -> bool:
    """Does a log record report a full disk (its exception, or its text)?"""
    if record.exc_info and no_space_left(record.exc_info[1])[0]:
        return True
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - arguments that do not fit the format: the handler reports that, not a filter
        message = str(record.msg)
    return any(text in message for text in NO_SPACE_TEXTS)


def _not_about_no_space(record: logging.LogRecord) -> bool:
    return not about_no_space(record)


@contextmanager
def bundle_failures_unlogged_when_out_of_space() -> Iterator[None]:
    """While active, Beam's reports of a bundle that failed for want of room are not logged in this process."""
    for name in BUNDLE_FAILURE_LOGGERS:
        logging.getLogger(name).addFilter(_not_about_no_space)
    try:
        yield
    finally:
        for name in BUNDLE_FAILURE_LOGGERS:
            logging.getLogger(name).removeFilter(_not_about_no_space)


def fall_silent_when_out_of_space() -> None:
    """In a local worker: at the first report of a full disk, the worker stops writing to stdout and stderr
    (the runner reports the failure in one line); every other record passes."""

    def silent_at_no_space(record: logging.LogRecord) -> bool:
        if not about_no_space(record):
            return True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.close(devnull)
        return False

    for name in BUNDLE_FAILURE_LOGGERS:
        logging.getLogger(name).addFilter(silent_at_no_space)
