"""Runner failures a user fixes with a runner setting: name the setting.

A Flink job that runs out of network memory fails deep inside a Java stack
trace that Beam's Python SDK relays as one long message. The fix is a
cluster setting, not the job, so the job says which setting in its own words.
"""

from __future__ import annotations

import re

FLINK_NETWORK_BUFFERS = re.compile(
    r"Insufficient number of network buffers: required (\d+)(?:, but only (\d+) available)?")


def explain(error: BaseException) -> str | None:
    """A user-facing explanation with the setting to change, or None if not a known case."""
    match = FLINK_NETWORK_BUFFERS.search(str(error))
    if match is None:
        return None
    required, available = match.group(1), match.group(2)
    got = f", {available} available" if available is not None else ""
    return (
        f"Flink ran out of network memory (a task asked for {required} network buffers{got}). "
        "Give the TaskManagers more network memory with taskmanager.memory.network.min and "
        "taskmanager.memory.network.max (e.g. 512mb), or lower the sort shuffle's demand per result "
        "partition with taskmanager.network.sort-shuffle.min-buffers (e.g. 64), in the Flink "
        "cluster's configuration. scripts/flink/session_cluster.py sets both; see docs/running.md."
    )
