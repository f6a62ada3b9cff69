"""The words the simulated producer's ground truth counts defects in, for a run measured against it.

The ground truth (``--truth-out`` of ``sample.simulated_producer``) lists each candidate's injected
defects by kind (``sim_defects.DefectKind``, ``sim_reconciliation.ReconciliationDefect``). The retry
economy and the report take these words as a value with the ``--truth`` file
(``pipelines.retry_economy.GroundTruth``) and never import the simulator: ``pipelines.truth`` calls
``simulated_vocabulary`` when a command is given ``--truth``, and only then.
"""

from __future__ import annotations

from typing import Mapping

from analysis.retry_economy import DefectVocabulary
from sample.sim_defects import BENIGN_KINDS, REASON_CODES, DefectKind
from sample.sim_reconciliation import RECONCILIATION_REASON_CODES

# The simulated producer's defect kinds, as the domain computations need them.
SIMULATED_VOCABULARY = DefectVocabulary(
    benign=frozenset(BENIGN_KINDS),
    canonicalized=frozenset({DefectKind.REVERSED_ENDPOINTS, DefectKind.REVERSED_ENDPOINTS_RENUMBERED}),
    unparseable=frozenset({DefectKind.TRUNCATED_JSON}),
    schema=frozenset({DefectKind.UNSUPPORTED_ENUM}),
)
# The evaluations' reason codes each blocking kind of the simulated producer is reported under (the ground
# truth counts defects by kind, the evaluations issues by code; benign kinds have none).
SIMULATED_REASON_CODES: dict[str, tuple[str, ...]] = {
    str(kind): codes for kind, codes in (*REASON_CODES.items(), *RECONCILIATION_REASON_CODES.items())}


def simulated_vocabulary() -> tuple[DefectVocabulary, Mapping[str, tuple[str, ...]]]:
    """The simulated producer's defect kinds as the retry economy needs them, and the reason codes each
    blocking kind is reported under."""
    return SIMULATED_VOCABULARY, SIMULATED_REASON_CODES
