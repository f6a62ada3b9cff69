"""Entry points and their options.

Two of Beam's log records say nothing an operator needs, and would be the first
lines they read around any error of ours, so they are dropped (every other record
passes):

- importing Beam without Google's optional ``apitools`` logs a warning on the root
  logger ("apitools not found, and bigquery client libraries are not available");
- every job-server run (Flink, the portable runner) logs "Really starting service"
  and, at exit, "Really destroying service" at WARNING: routine start and stop, not
  a problem. A service that fails says so through the runner's error.
"""

import logging


def _not_the_apitools_notice(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("apitools not found")


def _not_a_routine_service_line(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(("Really starting service", "Really destroying service"))


logging.getLogger().addFilter(_not_the_apitools_notice)
logging.getLogger("apache_beam.utils.subprocess_server").addFilter(_not_a_routine_service_line)
