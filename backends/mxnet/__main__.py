"""Entry point: python -m backends.mxnet SPEC_JSON RESULT_JSON (backends/harness.py)"""
import sys

from ..harness import entry

if __name__ == "__main__":
    sys.exit(entry(__package__))
