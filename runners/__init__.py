"""The processes a run lives in, apart from what it computes.

- ``warm_workers``: the DirectRunner's multi-processing workers, forked from a zygote;
- ``collector``: the garbage collector's policy per process (the DoFns' first bundle, the bench loop,
  every entry point's exit);
- ``errors``: runner failures a user fixes with a runner setting, in the job's words;
- ``workarounds``: defects of the runners the job launches, worked around before a pipeline runs;
- ``flink_jobs``: a Flink job left running on a cluster by a command that stopped, cancelled first;
- ``no_space``: a full disk recognised wherever it was raised, and Beam's tracebacks of it kept quiet.

Nothing here knows the job, its transforms or its domain (``tests/test_layers.py``); ``warm_workers``
and ``collector`` import only the standard library at their top, since they run before Beam is
imported (the zygote is started first thing; the warm-worker client runs without site packages).
"""
