"""Sample data and test doubles for notarius-reprocess.

- `sample.crd3`: converts CRD3 (Critical Role) episode files into transcript
  records (contract §3.1), with fixed-size extraction and scene chunk plans.
- `sample.simulated_producer`: a SIMULATED producer (a test/demo double, not a
  model) that writes raw model-candidate records (contract §3.2) with known,
  injected defects plus a ground-truth file.
- `sample/data/`: a bundled two-episode transcript sample and compact SRD name
  lists (see `sample/data/ATTRIBUTION.md` for licences).
"""
