import sys
from pathlib import Path

# Test helpers (fixture_archive, output_reader, flink_support) import by plain name.
sys.path.insert(0, str(Path(__file__).resolve().parent))
