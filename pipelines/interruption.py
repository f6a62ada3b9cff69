"""How a command ends: Ctrl-C (SIGINT) and SIGTERM, and an error of ours, end it with one line and a shell's
exit code, never a traceback.

``run_command`` is the one place that turns what ended a command into its line and exit code: a signal
(130, 143), a full disk, and every :class:`domain.errors.NotariusError` that library code raised
(``PROG: what is wrong``, exit 1; ``command_named`` marks the function that runs a command, so an error
is said in that command's name wherever it was started from: the console script, the demo, the report).

Beam-free on purpose: an interruption can land while Beam is still being imported, and reporting it
must not import Beam again (a half-imported module fails on its next import). A command that holds an
output folder reports where nothing was committed (``pipelines.guards``); before that, or in a command
that writes no folder, only the interruption is said.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence, TypeVar

from domain.errors import NotariusError
from runners.no_space import no_space_left

INTERRUPTED_EXIT = 130  # what a shell reports for a command ended by SIGINT
TERMINATED_EXIT = 143  # ... and by SIGTERM
# After the one line, the process ends within this many seconds even if a library thread that is
# not a daemon (Beam's state sampler, caught between starting and being marked started) would
# otherwise keep the interpreter waiting for it forever.
EXIT_WATCHDOG_SECONDS = 5.0


class Terminated(BaseException):
    """SIGTERM, raised where KeyboardInterrupt would be, so one path reports and cleans up both."""


def _exit_soon(code: int) -> None:
    def end() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    watchdog = threading.Timer(EXIT_WATCHDOG_SECONDS, end)
    watchdog.daemon = True
    watchdog.start()


def interrupted(prog: str, folder: str | None, committed: bool = False, terminated: bool = False) -> SystemExit:
    """The one line a command prints when a signal ends it, and its exit (a watchdog ends the process
    if shutting down hangs)."""
    where = f" in {folder}" if folder else ""
    what = f"the run{where} was committed before the signal" if committed else f"nothing committed{where}"
    word = "terminated" if terminated else "interrupted"
    print(f"{prog}: {word}: {what}", file=sys.stderr)
    code = TERMINATED_EXIT if terminated else INTERRUPTED_EXIT
    _forget_the_interrupt_python_saw()
    _exit_soon(code)
    return SystemExit(code)


def _forget_the_interrupt_python_saw() -> None:
    """CPython notes a KeyboardInterrupt that escapes code it runs through ``PyRun_*`` (some extension
    modules run their set-up that way while they are imported) in a process-wide flag, and at exit it then
    kills itself with SIGINT instead of exiting with our code, even though we caught the interrupt. The
    flag is reset by every such run: one successful run of ``pass`` clears it."""
    try:
        import ctypes

        ctypes.pythonapi.PyRun_SimpleString(b"pass")
    except Exception:  # noqa: BLE001 - not CPython, or no ctypes: the exit code may then read -2
        pass


_ACTIVE: list["Interruption"] = []  # the Interruptions whose handlers are installed, outermost first


def signal_came() -> bool:
    """Whether a signal came while an active Interruption's handler was installed, even one whose raise
    was swallowed (a library's bare ``except:`` around an optional import): a command checks this before
    it starts writing, so a lost interruption still ends it there."""
    return any(interruption.seen for interruption in _ACTIVE)


class Interruption:
    """While active (main thread only): SIGINT and SIGTERM raise where the command runs, and note that they
    came. Beam re-raises a KeyboardInterrupt inside a transform as a RuntimeError ("KeyboardInterrupt
    [while running ...]") and its runner threads print their own tracebacks as they are torn down: once
    a signal came, whatever ends the command is reported as the interruption, and the threads' dying
    words are not printed."""

    def __init__(self) -> None:
        self.seen = False
        self.terminated = False
        self._previous: dict[int, object] = {}
        self._previous_unraisable = None
        self._in_hook = False

    def _on_signal(self, signum, frame) -> None:
        self.seen = True
        self.terminated = signum == signal.SIGTERM
        threading.excepthook = lambda args: None
        logging.disable(logging.CRITICAL)  # Beam logs the interrupted transform's traceback as an error
        if self._in_hook:  # a raise here would be ignored as well: once more, later
            self._send_again()
            return
        if self.terminated:
            raise Terminated()
        raise KeyboardInterrupt

    def _on_unraisable(self, unraisable) -> None:
        """A signal that lands while Python runs a callback whose exceptions it ignores (the module lock's
        weakref callback during an import, a ``__del__``) would be printed as "Exception ignored" and
        lost, and the command would run on. Ours is sent again, a moment later from another thread, and
        raised at the next point that can raise, where it ends the command as usual."""
        if isinstance(unraisable.exc_value, (KeyboardInterrupt, Terminated)) and self.seen:
            self._in_hook = True
            try:
                self._send_again()
            finally:
                self._in_hook = False
            return
        (self._previous_unraisable or sys.__unraisablehook__)(unraisable)

    def _send_again(self) -> None:
        signum = signal.SIGTERM if self.terminated else signal.SIGINT
        resend = threading.Timer(0.02, os.kill, (os.getpid(), signum))
        resend.daemon = True
        resend.start()

    def __enter__(self) -> "Interruption":
        if threading.current_thread() is threading.main_thread():  # only the main thread may take signals
            for signum in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(signum) is signal.SIG_IGN:
                    continue  # started to ignore it (nohup, a shell's background job): it stays ignored
                self._previous[signum] = signal.signal(signum, self._on_signal)
            if self._previous:
                self._previous_unraisable = sys.unraisablehook
                sys.unraisablehook = self._on_unraisable
                _ACTIVE.append(self)
        return self

    def __exit__(self, *exc) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        if self._previous_unraisable is not None:
            sys.unraisablehook = self._previous_unraisable
        if self.seen:
            logging.disable(logging.NOTSET)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """A few renames that must not be cut in two (the demo putting its previous state back): SIGINT and
    SIGTERM that come meanwhile are noted and handled as usual once the block ends. Main thread only
    (elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if handler is signal.SIG_IGN or handler is None:
            continue  # ignored stays ignored; None: set outside Python, left alone
        previous[signum] = signal.signal(signum, lambda number, frame: came.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in came[:1]:
            handler = previous[signum]
            if callable(handler):
                handler(signum, None)  # raises as the signal would have (KeyboardInterrupt, Terminated)
            else:
                os.kill(os.getpid(), signum)  # SIG_DFL: end as the signal ends the process


Function = TypeVar("Function", bound=Callable)


def command_named(prog: str) -> Callable[[Function], Function]:
    """Marks the function that runs the command ``prog``: an error of ours that ends it is said in that
    command's name (the first such mark it leaves wins: a command run by another keeps its own name)."""

    def mark(function: Function) -> Function:
        @functools.wraps(function)
        def named(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            except NotariusError as error:
                if error.prog is None:
                    error.prog = prog
                raise

        return named  # type: ignore[return-value]

    return mark


def ended_by(error: NotariusError, prog: str) -> SystemExit:
    """The exit of the command ``prog`` that ``error`` ended: its one line on stderr and its exit code."""
    line = error.line(prog)
    if line is None:
        return SystemExit(error.exit_code)
    if error.exit_code == 1:
        return SystemExit(line)  # Python prints it on stderr and exits with 1
    print(line, file=sys.stderr)
    return SystemExit(error.exit_code)


def run_command(prog: str, main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None) -> int:
    """``main(argv)``, with Ctrl-C or SIGTERM (outside a held folder), an error of ours, and a full disk, reported in
    one line: the console entry point of every command."""
    try:
        with Interruption() as interruption:
            return main(argv)
    except (KeyboardInterrupt, Terminated) as signalled:
        raise interrupted(prog, None, terminated=isinstance(signalled, Terminated)) from None
    except BaseException as error:
        if interruption.seen:  # a signal that Beam turned into another exception
            raise interrupted(prog, None, terminated=interruption.terminated) from None
        if isinstance(error, NotariusError):
            raise ended_by(error, prog) from None
        ran_out, path = no_space_left(error)
        if ran_out and not isinstance(error, SystemExit):  # a command that holds no folder (the report)
            raise SystemExit(f"{prog}: no space left on {path or 'the disk it writes to'}") from None
        raise
