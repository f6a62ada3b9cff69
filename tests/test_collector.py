"""The collector policy of the job's DoFns (runners/collector.py)."""

import gc
import weakref

import pytest

from runners import collector


@pytest.fixture
def fresh_policy(monkeypatch):
    """Each test starts untuned and leaves the process's collector as it found it."""
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    monkeypatch.setattr(collector, "_tuned", False)
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    (gc.enable if enabled else gc.disable)()


def test_tuning_freezes_what_is_alive_and_raises_only_the_young_threshold(fresh_policy):
    gc.unfreeze()
    _, older, oldest = gc.get_threshold()
    collector.tune_collector()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (collector.YOUNG_THRESHOLD, older, oldest)


def test_tuning_happens_once_per_process(fresh_policy):
    collector.tune_collector()
    frozen = gc.get_freeze_count()
    later = [[] for _ in range(1000)]  # alive, tracked, created after the first call
    collector.tune_collector()
    assert gc.get_freeze_count() == frozen
    assert later


class Node:
    pass


def cycle() -> tuple[Node, Node]:
    """Two objects that reference each other: only the cyclic collector frees them."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a, b


def test_cycles_made_after_tuning_are_still_collected(fresh_policy):
    collector.tune_collector()
    a, b = cycle()
    del a, b
    assert gc.collect() >= 2


@pytest.mark.parametrize("enabled_before", [True, False])
def test_paused_inside_and_restored_after(fresh_policy, enabled_before):
    (gc.enable if enabled_before else gc.disable)()
    with collector.collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled() is enabled_before


def test_restored_when_the_call_raises(fresh_policy):
    gc.enable()
    with pytest.raises(ValueError):
        with collector.collector_paused():
            raise ValueError("a key's call failed")
    assert gc.isenabled()


def test_freezing_for_exit_keeps_the_status_and_takes_what_is_alive_out_of_collection(fresh_policy):
    gc.unfreeze()
    a, b = cycle()
    alive = weakref.ref(a)
    assert collector.freeze_for_exit(3) == 3
    del a, b
    gc.collect()
    assert alive() is not None  # a frozen cycle is left to the process's end
    gc.unfreeze()
    gc.collect()
    assert alive() is None


def test_the_console_script_freezes_before_the_process_ends(fresh_policy, monkeypatch):
    from pipelines import cli

    gc.unfreeze()
    monkeypatch.setattr(cli, "main", lambda argv: 2)
    assert cli.console_main() == 2
    assert gc.get_freeze_count() > 0


def test_a_command_is_imported_with_the_collector_paused_then_frozen(fresh_policy, tmp_path, monkeypatch):
    import sys

    (tmp_path / "frozen_probe.py").write_text("import gc\nCOLLECTING = gc.isenabled()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "frozen_probe", raising=False)
    gc.unfreeze()
    gc.enable()
    module = collector.import_frozen("frozen_probe")
    assert module.COLLECTING is False  # no collection while it was imported
    assert gc.isenabled() and gc.get_freeze_count() > 0
