"""tests/control: `import _cartpole_signals` works from the test modules (importlib import mode)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
