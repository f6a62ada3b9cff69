"""The words the simulated producer's ground truth counts defects in, written at the head of the truth file.

The ground truth (``--truth-out`` of ``sample.simulated_producer`` and ``sample.simulated_batch``) lists
each candidate's injected defects by kind (``sim_defects.DefectKind``,
``sim_reconciliation.ReconciliationDefect``). What those kinds mean to a run measured against it - which
are benign, which endpoint ordering repairs, which hide the others - and the reason codes the job
reports each blocking kind under are its first line (``truth_vocabulary_line``, in the format of
``analysis.ground_truth.vocabulary_record``). A command given ``--truth`` reads them from there
(``pipelines.truth.ground_truth``) and never imports the simulator.
"""

from __future__ import annotations

from analysis.ground_truth import DefectVocabulary, vocabulary_record
from sample.jsonl import dumps_line
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


def truth_vocabulary_line() -> bytes:
    """The first line of every ground-truth file the simulator writes."""
    return dumps_line(vocabulary_record(SIMULATED_VOCABULARY, SIMULATED_REASON_CODES))
