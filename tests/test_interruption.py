"""A signal is never lost: one that lands where Python ignores exceptions still ends the command."""

from __future__ import annotations

import gc
import signal
import time
import weakref

import pytest

from pipelines.interruption import Interruption, Terminated


class _Held:
    pass


@pytest.mark.parametrize("signum, raised", [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated)])
def test_a_signal_inside_an_ignored_callback_is_raised_again_outside_it(signum, raised):
    """The guards' startup race (a Ctrl-C while an import's module-lock weakref callback runs): the
    handler's exception is swallowed there by CPython ("Exception ignored in ..."), so the interruption
    is sent again and raised in the command's own code."""
    inside_callback: list[bool] = []

    def callback(_ref) -> None:
        signal.raise_signal(signum)  # the handler runs here, inside the callback, and its raise is ignored
        inside_callback.append(True)

    held = _Held()
    ref = weakref.ref(held, callback)
    caught = None
    with Interruption() as interruption:
        try:
            del held
            gc.collect()
            for _ in range(1000):  # the re-sent signal is raised at the next point that can raise
                time.sleep(0.01)
        except BaseException as error:  # noqa: BLE001 - the test reads which one came
            caught = error
    assert ref() is None and not inside_callback  # the callback was cut by the first raise
    assert isinstance(caught, raised) and interruption.seen


def test_other_ignored_exceptions_still_reach_the_previous_hook(monkeypatch):
    seen = []
    monkeypatch.setattr("sys.unraisablehook", lambda unraisable: seen.append(type(unraisable.exc_value)))

    def callback(_ref) -> None:
        raise ValueError("a library's own failure in a callback")

    held = _Held()
    ref = weakref.ref(held, callback)
    with Interruption():
        del held
        gc.collect()
    assert ref() is None and seen == [ValueError]


def test_a_signal_a_library_swallowed_still_ends_the_command_before_it_writes(tmp_path):
    """A bare ``except:`` around an optional import eats the KeyboardInterrupt: the command still ends
    as interrupted when it comes to hold its folder, and nothing is created."""
    from pipelines.guards import claimed_output

    with Interruption():
        try:
            signal.raise_signal(signal.SIGINT)
        except:  # noqa: E722 - what the library does
            pass
        with pytest.raises(KeyboardInterrupt):
            with claimed_output("prog", str(tmp_path / "out"), inputs={}, writes=["a"], overwrite=False):
                pass
    assert not (tmp_path / "out").exists()
