"""``--truth``: a run measured against the simulated producer's ground truth.

The retry economy and the report take the ground truth as a value (``GroundTruth``: the file, and the
words its producer counts defects in) and never import the simulator. The commands that accept
``--truth`` (``python -m pipelines.retry_economy``, ``python -m pipelines.report``, the demo) get it
from ``ground_truth``: the simulator's vocabulary is loaded from ``sample/`` when ``--truth`` is
given, and only then, so an operator's report, which has no ground truth, never loads the simulator
(``tests/test_layers.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from analysis.retry_economy import DefectVocabulary


@dataclass(frozen=True)
class GroundTruth:
    """A ground-truth file and the words its producer counts defects in: its defect kinds as the domain
    computations need them (``vocabulary``), and the evaluations' reason codes each blocking kind is
    reported under (``reason_codes``: the ground truth counts defects by kind, the evaluations issues by
    code; benign kinds have none)."""

    path: Path
    vocabulary: DefectVocabulary
    reason_codes: Mapping[str, tuple[str, ...]]


def ground_truth(path: str | os.PathLike | None) -> GroundTruth | None:
    """The simulated producer's ground truth in ``path``, with its vocabulary; None without a path."""
    if not path:
        return None
    from sample.sim_vocabulary import simulated_vocabulary

    vocabulary, reason_codes = simulated_vocabulary()
    return GroundTruth(Path(path), vocabulary, reason_codes)
