"""Code that runs inside each framework's own environment (standard library only at import)."""
