"""Read a job's output folder back (Avro or JSON Lines), for tests and tools.

The reading lives in ``pipelines.outputs``; this name stays for the tests.
"""

from __future__ import annotations

from pipelines.outputs import canonical, read_outputs, read_rows

__all__ = ["canonical", "read_outputs", "read_rows"]
