"""Console script ``notarius-reprocess``: the reprocess job's command line."""

from __future__ import annotations

import sys

from pipelines import reprocess


def main(argv: list[str] | None = None) -> int:
    return reprocess.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
