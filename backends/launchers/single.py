"""One process: the backend's command as it is (that process may drive several devices)."""
from .launcher import Launcher


class Single(Launcher):
    """one process, which may drive several devices (MXNet's contexts, JAX's, a MirroredStrategy)"""
