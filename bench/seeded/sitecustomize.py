"""Imported at start-up by every counted process (bench.instructions puts this folder on PYTHONPATH):
Python's ``random`` seeded, so the elements Beam samples for its size estimates are the same in every
run (seeded from the OS, they moved a 20k-candidate job's count by about 0.5%)."""

import random

random.seed(0)
