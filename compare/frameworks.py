"""Registry of frameworks: names and aliases -> backend package, environment, image, colour.

Adding a framework is a folder `backends/<backend>/` (command(), OPTIONS, the trainer), its pinned
`compare/requirements/<backend>-<cpu|cuda>.txt`, one `register(...)` below, and its tests.
Everything else on the host (help texts, chart colours, image names, wheelhouse, doctor, reports)
is derived from this registry. The host never imports a framework; it only names the backend
module that runs inside the framework's environment (and imports that module's stdlib-only
`__init__` for its command line and declared options).
"""
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

from backends.contract import COMMON_OPTIONS
from backends.contract.shared import backend

from .errors import UserError


@dataclass(frozen=True)
class Framework:
    name: str  # canonical name used in run ids and reports
    aliases: Tuple[str, ...]
    backend: str  # package under backends/: python -m backends.<backend> SPEC RESULT
    display: str  # how reports name it
    modules: Tuple[str, ...]  # top-level modules every run of the backend imports: an
    # interpreter without one cannot run it (envs.probe asks one that --python names)
    ngc_image: str  # pinned NGC image for GPU machines (the BASE_IMAGE of containers/Dockerfile)
    color: str  # its colour in every chart
    system_packages: Tuple[str, ...] = ()  # Debian packages its CPU image needs besides Python

    def module(self):
        """backends.<backend>: stdlib only at import time (command(), OPTIONS)."""
        return backend(self.backend)

    def pipelines(self) -> Tuple:
        """Its input pipelines for --data DIR, in order of preference (backends/pipelines/)."""
        return tuple(getattr(self.module(), "PIPELINES", ()))

    def options(self) -> Tuple:
        """The `--option` keys this backend reads: its own, then those every backend has."""
        return tuple(getattr(self.module(), "OPTIONS", ())) + COMMON_OPTIONS


FRAMEWORKS: List[Framework] = []
_BY_NAME: Dict[str, Framework] = {}


def register(fw: Framework) -> None:
    """Add a framework; its name and aliases must be new."""
    for n in (fw.name,) + fw.aliases:
        if n in _BY_NAME:
            raise ValueError("framework name {!r} is registered twice".format(n))
        _BY_NAME[n] = fw
    FRAMEWORKS.append(fw)


# `modules` leaves out what only some runs import: horovod (without horovod.tensorflow tf's launcher
# runs the workers through tf.distribute: backends/launchers/horovod.py) and an input pipeline's
# own (torchvision for caffe2's decode=gpu, grain for jax's CPU decode of --data)
register(Framework("tf", ("tensorflow", "tf_horovod", "horovod"), "tf_horovod",
                   "TensorFlow (+Horovod)", ("tensorflow",), "nvcr.io/nvidia/tensorflow:24.03-tf2-py3",
                   "#e8710a"))
register(Framework("mxnet", ("mx",), "mxnet", "MXNet", ("mxnet",), "nvcr.io/nvidia/mxnet:24.06-py3",
                   "#1a73e8",
                   # the mxnet wheel links system libraries minimal bases lack
                   system_packages=("libgomp1", "libquadmath0", "libgfortran5")))
register(Framework("caffe2", ("torch", "pytorch", "caffe2_torch"), "caffe2_torch",
                   "PyTorch (Caffe2)", ("torch",), "nvcr.io/nvidia/pytorch:24.03-py3", "#8e24aa"))
register(Framework("jax", ("flax",), "jax", "JAX (Flax)", ("jax", "jaxlib", "flax", "optax"),
                   "nvcr.io/nvidia/jax:26.04-py3", "#0f9d58"))


def names() -> List[str]:
    return [fw.name for fw in FRAMEWORKS]


def choices() -> str:
    """'tf, mxnet, caffe2': for help texts and error messages."""
    return ", ".join(names())


def get(name: str) -> Framework:
    """Look a framework up by name or alias; a UserError names the valid choices."""
    try:
        return _BY_NAME[name.strip().lower()]
    except KeyError:
        raise UserError("unknown framework {!r}; choose from {}".format(name, choices())) from None


def display(name: str, mode: str = "default") -> str:
    """How reports name a framework ('JAX (Flax)', in a mode other than default 'JAX (Flax),
    tuned'); a result from a framework no longer registered keeps its name."""
    fw = _BY_NAME.get(str(name).lower())
    return (fw.display if fw else str(name)) + ("" if mode in ("default", None) else ", " + mode)


def color(name: str):
    """A framework's chart colour (None: matplotlib picks one)."""
    fw = _BY_NAME.get(str(name).lower())
    return fw.color if fw else None


def pipelines(name) -> Tuple:
    """A framework's input pipelines by its name (none for one no longer registered)."""
    fw = _BY_NAME.get(str(name).lower())
    return fw.pipelines() if fw else ()


def order(present: Sequence[str]) -> List[str]:
    """The names in `present`, in registry order (the report's row and baseline order)."""
    return [n for n in names() if n in set(present)]
