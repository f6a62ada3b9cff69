"""Worker entries for tests/test_warm_workers.py: what a zygote's forked worker runs instead of Beam's."""

import json
import os
import signal


PREPARED: list[str] = []


def prepare() -> None:
    """A step the zygote takes before its next import (a preload named "warm_entry:prepare")."""
    PREPARED.append("colorsys" not in __import__("sys").modules)  # called before the import after it


def record() -> int:
    """Writes what the worker saw to $WARM_OUT; exits with $WARM_STATUS."""
    with open(os.environ["WARM_OUT"], "w") as handle:
        json.dump({"pid": os.getpid(), "ppid": os.getppid(), "marker": os.environ.get("WARM_MARKER"),
                   "preloaded": "colorsys" in __import__("sys").modules,
                   "on_sigint": getattr(signal.getsignal(signal.SIGINT), "__name__", None),
                   "prepared": PREPARED}, handle)
    return int(os.environ.get("WARM_STATUS", "0"))


def fail() -> int:
    raise RuntimeError("the worker broke")


def exit_with() -> int:
    raise SystemExit(int(os.environ["WARM_STATUS"]))


def killed() -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return 0
