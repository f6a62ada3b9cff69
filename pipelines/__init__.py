"""Entry points and their options.

Importing Beam without Google's optional ``apitools`` logs a warning on the root
logger ("apitools not found, and bigquery client libraries are not available")
that says nothing about this job: it would be the first lines an operator reads
above any error of ours. That one message is dropped; every other log record passes.
"""

import logging


def _not_the_apitools_notice(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("apitools not found")


logging.getLogger().addFilter(_not_the_apitools_notice)
