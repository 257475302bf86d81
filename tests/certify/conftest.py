"""tests/certify: the fake session (fakes.py) importable by the test modules beside it (pytest runs
with --import-mode=importlib)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
