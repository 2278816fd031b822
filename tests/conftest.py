"""pytest set-up: the repository on sys.path (helpers live in tests/helpers.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
