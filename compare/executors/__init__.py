"""Executors start a backend in its environment and turn whatever happens into a RunResult."""
