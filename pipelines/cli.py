"""Console script ``notarius-reprocess``.

With no subcommand it runs the reprocess job with its SPEC §6 flags. Two
subcommands close the loop with the providers' batch APIs:

- ``export-batch``: retry requests -> provider batch request files;
- ``import-batch``: provider batch result files -> the next attempts' candidates;
- ``verify DIR``: check a run folder against its manifest.

Each entry point is imported only when it runs: every Beam PipelineOptions
subclass joins one shared flag parser, so a job's flags must not be visible to
another job's run.
"""

from __future__ import annotations

import importlib
import sys

from pipelines.interruption import run_command
from runners.collector import freeze_for_exit

SUBCOMMANDS = {"export-batch": "pipelines.batch_export", "import-batch": "pipelines.batch_import",
               "verify": "pipelines.verify", "compare": "pipelines.compare"}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # A signal before a command holds its folder (during imports, say) is one line too; after: pipelines.guards.
    return run_command("notarius-reprocess", _dispatch, argv)


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] in SUBCOMMANDS:
        return importlib.import_module(SUBCOMMANDS[argv[0]]).main(argv[1:])
    from runners.warm_workers import start_early

    start_early(argv, ("pipelines.reprocess",))  # before Beam's import below: see pipelines.reprocess
    from pipelines import reprocess

    return reprocess.main(argv)


def console_main() -> int:
    """The ``notarius-reprocess`` console script: ``main``, in a process that ends with it."""
    return freeze_for_exit(main())


if __name__ == "__main__":
    sys.exit(console_main())
