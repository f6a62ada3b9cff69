"""A deterministic cost of a call, for tests that claim how cost grows with input size.

``operations(fn, *args)`` runs ``fn`` under ``sys.settrace`` and returns its result
and an :class:`Operations` count:

* ``lines``: Python line events, in every Python frame the call runs (the domain's,
  and any pure-Python library it calls, e.g. jsonschema). A loop body executed n
  times is n line events per line.
* ``scanned``: the length of every list, tuple, str or bytes that an ``in`` / ``not in``
  test looks through (a scan in C, one line event however long the sequence). The
  container is found by re-reading, at the ``CONTAINS_OP`` instruction, the simple
  operand chain the compiler emitted for it (a local, cell, global or constant
  followed by attribute loads, as in ``u in chunk.unit_ids`` or ``label in subjects``).

The count is the same on every run of the same input with the same Python and
library versions, whatever the machine load: no clock is read. It is a cost model,
not a time: use it for ratios (four times the size costs about four times as much).

What it cannot see:

* work inside C functions and C extensions: ``sorted``, ``str.join``, ``list.index``,
  ``list.remove``, orjson parsing, pydantic-core validation, regex matching. A call is
  one line event however much work it does in C;
* an ``in`` whose container is not a simple chain (a call result, a subscript, an
  expression): it is not charged (``unresolved`` counts those tests);
* ``in`` over other types (dict, set, range, user classes) is not charged: it is
  constant time, or runs Python code that is counted as lines.
* C calls as such: ``sys.setprofile``'s ``c_call`` events would add one per call,
  which says nothing about how much the call does, so they are not counted.

Counts depend on the Python and library versions (bytecode and line layout): assert
ratios between two counts of one run, never an absolute count. Tracing replaces any
other tracer (coverage, a debugger) for the duration of the call, and frames that hold
an ``in`` run with opcode events, so a traced call is some tens of times slower.

Call it on a warm path (run the same call once untraced first) so that one-time
work — caches, lazy imports, compiled validators — is not in the count.
"""

from __future__ import annotations

import dis
import sys
from dataclasses import dataclass
from types import CodeType
from typing import Any, Callable

SCANNED_TYPES = (list, tuple, str, bytes)
_BASE_LOADS = {"LOAD_FAST", "LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_CONST"}
_MISSING = object()


@dataclass(frozen=True)
class Operations:
    lines: int
    scanned: int
    unresolved: int

    @property
    def total(self) -> int:
        return self.lines + self.scanned


def _membership_operands(code: CodeType) -> dict[int, tuple[str, Any, tuple[str, ...]] | None]:
    """For each CONTAINS_OP of ``code`` (by byte offset): how to re-read its container,
    as (base load, base name or constant, attribute names), or None when it is no
    simple chain."""
    instructions = list(dis.get_instructions(code))
    found: dict[int, tuple[str, Any, tuple[str, ...]] | None] = {}
    for i, ins in enumerate(instructions):
        if ins.opname != "CONTAINS_OP":
            continue
        j, attrs = i - 1, []
        while j >= 0 and instructions[j].opname == "LOAD_ATTR":
            attrs.append(instructions[j].argval)
            j -= 1
        base = instructions[j] if j >= 0 else None
        if base is None or base.opname not in _BASE_LOADS or any(
                instructions[k].is_jump_target for k in range(j + 1, i + 1)):
            found[ins.offset] = None
        else:
            found[ins.offset] = (base.opname, base.argval, tuple(reversed(attrs)))
    return found


def _container(frame, operand: tuple[str, Any, tuple[str, ...]]) -> Any:
    load, name, attrs = operand
    if load == "LOAD_CONST":
        value = name
    elif load in ("LOAD_GLOBAL", "LOAD_NAME") and name not in frame.f_locals:
        value = frame.f_globals.get(name, _MISSING)
        if value is _MISSING:
            value = frame.f_builtins.get(name, _MISSING)
    else:
        value = frame.f_locals.get(name, _MISSING)
    for attr in attrs:
        if value is _MISSING:
            break
        value = getattr(value, attr, _MISSING)
    return value


def operations(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Operations]:
    """``fn(*args, **kwargs)`` and the operations it cost (see the module docstring)."""
    lines = scanned = unresolved = 0
    operands_by_code: dict[CodeType, dict[int, Any]] = {}

    def local(frame, event, arg):
        nonlocal lines, scanned, unresolved
        if event == "line":
            lines += 1
        elif event == "opcode":
            operands = operands_by_code[frame.f_code]
            if frame.f_lasti in operands:
                operand = operands[frame.f_lasti]
                container = _MISSING if operand is None else _container(frame, operand)
                if container is _MISSING:
                    unresolved += 1
                elif isinstance(container, SCANNED_TYPES):
                    scanned += len(container)
        return local

    def on_call(frame, event, arg):
        code = frame.f_code
        operands = operands_by_code.get(code)
        if operands is None:
            operands = operands_by_code[code] = _membership_operands(code)
        if operands:  # opcode events only where an `in` may scan
            frame.f_trace_opcodes = True
        return local

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.settrace(previous)
    return result, Operations(lines, scanned, unresolved)
