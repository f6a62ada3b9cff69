"""Documentation generated from the code: ``python -m docgen.data_dictionary`` writes docs/outputs.md.

Outside ``domain/``: the domain declares (each family its prose in ``FamilySpec.docs``), this package
renders. It reads the domain and the schema files under ``assets/``; nothing of the job imports it.
"""
