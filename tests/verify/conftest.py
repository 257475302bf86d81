"""tests/verify: the foreign-model builders (foreign_models.py, torch_models.py) importable by
the test modules beside them (pytest runs with --import-mode=importlib)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
