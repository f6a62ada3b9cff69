"""Provider batch files: retry requests out as provider request lines, provider
result lines back in as raw model candidates (contract §3.2). Pure Python, no Beam.

- ``schemas``: each provider's documented JSON Schema subset, checked before export.
- ``prompts``: what the model is asked (system prompt, excerpt, validator feedback).
- ``providers``: one small class per provider: request line, result parsing, limits.
- ``export``: the per-source step of the export job and the file plan.
- ``ledger``: the import's accounting: every exported request classified, every
  result line kept byte for byte, every answer's billed usage totalled.
- ``estimate``: what a batch is expected to cost before it is sent (one documented rule).
- ``prices``: the operator's prices file, and what tokens cost at those prices.
"""
