"""compare: benchmark ResNet-50 training across frameworks, each in its own environment."""
__version__ = "0.1.0"
