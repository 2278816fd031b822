"""Tests of the executors (tests/executors mirrors compare/executors)."""
