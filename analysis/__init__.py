"""What the operator learns from finished runs, computed from the rows the runs wrote.

- ``retry_economy``: what a run's retry requests ask for and must never show (defect recall against the
  ground truth, leaks, requests per failing slot) and the producer retries endpoint canonicalization saved;
- ``run_summary``: the report's tables over a run's rows, as streaming aggregates;
- ``compare``: two runs side by side, slot by slot (contract §6.3): outcomes, changes, ``compare.json``.

Pure Python over rows, manifests and values passed in: no Beam, no I/O. It may import ``domain/`` (the
rules a run was decided by); it never imports Beam, ``transforms/``, ``pipelines/``, ``runners/`` or the
simulator (``sample/``, whose vocabulary comes in as a value), and ``domain/`` never imports it
(``tests/test_layers.py``). The commands that read run folders and print or write the results live in
``pipelines/`` (``retry_economy``, ``report``, ``compare``, ``verify``).
"""
