"""The garbage collector's policy for the job's work, without importing Beam.

Three measures, all about the cyclic collector (reference counting frees
almost everything this job allocates; cycles are rare):

- ``import_frozen``: a command's modules imported with the collector paused,
  then frozen: they live as long as the process.

- ``collector_paused``: no automatic collection inside one key's call, which
  allocates many small objects that reference counting frees; the
  collector's passes over them cost ~9% of the call (docs/benchmarks.md).
- ``tune_collector``: once per process, before its first bundle, every object
  alive then (modules, Beam's runner and pipeline state, the DoFns) is moved
  to the permanent generation (``gc.freeze``), so full collections walk only
  what the work allocates afterwards; and the youngest generation is
  collected every 50,000 net allocations instead of 700. On the 100k bench
  archive the in-process job's collections went from 0.73 s to 0.25 s.

The bench loop applies the same policy, so the comparison stays like for like.
"""

from __future__ import annotations

import contextlib
import gc

# Net allocations of tracked objects between two collections of the youngest generation (CPython's is 700).
YOUNG_THRESHOLD = 50_000

_tuned = False


def tune_collector() -> None:
    """Freeze what is alive now and collect the young generation less often; once per process."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)


@contextlib.contextmanager
def collector_paused():
    """No automatic garbage collection inside; cycles wait for the next pass."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def import_frozen(name: str):
    """The module ``name``, imported with the collector paused; then every object alive is frozen.

    For a command's process, first thing: importing a command (Beam, the domain) makes some 190,000
    tracked objects that live as long as the process. The collector's passes over them as they are
    made, and every later full pass until the first bundle freezes them (``tune_collector``), free
    next to nothing: 0.16 G of the in-process job's 6.37 G instructions on 5k candidates (issue 43,
    callgrind). What it costs: the import's few thousand objects in reference cycles are never
    collected.
    """
    import importlib

    with collector_paused():
        module = importlib.import_module(name)
        gc.freeze()
    return module


def freeze_for_exit(status: int) -> int:
    """``status``, unchanged, once every object alive now is in the permanent generation.

    For a process about to end: ``sys.exit(freeze_for_exit(main()))``. The interpreter's
    collections at shutdown then skip whatever the run left alive. A launcher whose work ran
    on multi-processing workers had never frozen anything, and those collections walked all
    of Beam's state: 0.3-0.4 s at the end of every run (docs/benchmarks.md). What it costs:
    the finalizers of objects in reference cycles do not run at exit. Nothing depends on them
    here: outputs and the manifest are closed before ``main`` returns, and logging, Beam's
    services and temporary folders are closed by ``atexit`` hooks, which still run.
    """
    gc.freeze()
    return status
