"""The root of the errors this project raises on purpose.

Every error the project raises about its inputs, options, folders or files is a
:class:`NotariusError`: a library function raises it with what is wrong, and only the console
entry point (``pipelines.interruption.run_command``) decides how a command that it ends says so
and with which exit code: one line on stderr, ``PROG: what is wrong``, exit 1. A library never
ends the process itself (no ``SystemExit`` below the command layer: ``tests/test_layers.py``).

The project's error classes keep their own names and bases (a ``ManifestError`` is still a
``ValueError``), so code that catches them by name is unchanged.

This module imports nothing: every package may use it (the domain, the runners included).
"""

from __future__ import annotations


class NotariusError(Exception):
    """Something a command cannot go on with; its text says what, in words for the operator (one line)."""

    exit_code = 1
    # False: the text is said as it is, without the command's name before it (a few refusals that were
    # always worded so: a file of an export that is damaged, the runner's advice on a failed job).
    names_the_command = True
    # The command it ended, once it left one (``pipelines.interruption.ending``); None until then.
    prog: str | None = None

    def line(self, prog: str) -> str | None:
        """What the command ``prog`` says when this ends it (None: nothing more)."""
        said_by = self.prog or prog
        return f"{said_by}: {self}" if self.names_the_command else str(self)


class Refused(NotariusError):
    """What a command will not do, and why: an input, a folder or a state it finds (``names_the_command``
    False: the text is the whole line)."""

    def __init__(self, why: str, *, names_the_command: bool = True) -> None:
        super().__init__(why)
        self.names_the_command = names_the_command
