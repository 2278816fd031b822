"""Registry of frameworks: names and aliases -> backend package, environment, container image.

Adding a framework is adding a folder under backends/ and one entry here. The host never imports
a framework; it only names the backend module that runs inside the framework's environment.
"""
from dataclasses import dataclass
from typing import Dict, List, Tuple

from .errors import UserError


@dataclass(frozen=True)
class Framework:
    name: str  # canonical name used in run ids and reports
    aliases: Tuple[str, ...]
    backend: str  # package under backends/: python -m backends.<backend> SPEC RESULT
    display: str  # how reports name it
    import_name: str  # module an interpreter must have to run this backend
    ngc_image: str  # pinned NGC image for GPU machines (containers/<backend>/Dockerfile)
    available: bool = True
    unavailable_reason: str = ""


FRAMEWORKS: Tuple[Framework, ...] = (
    Framework("tf", ("tensorflow", "tf_horovod", "horovod"), "tf_horovod",
              "TensorFlow (+Horovod)", "tensorflow", "nvcr.io/nvidia/tensorflow:24.03-tf2-py3"),
    Framework("mxnet", ("mx",), "mxnet", "MXNet", "mxnet", "nvcr.io/nvidia/mxnet:23.09-py3"),
    Framework("caffe2", ("torch", "pytorch", "caffe2_torch"), "caffe2_torch",
              "PyTorch (Caffe2)", "torch", "nvcr.io/nvidia/pytorch:24.03-py3"),
)

_BY_NAME: Dict[str, Framework] = {}
for _fw in FRAMEWORKS:
    for _n in (_fw.name,) + _fw.aliases:
        _BY_NAME[_n] = _fw


def names() -> List[str]:
    return [fw.name for fw in FRAMEWORKS]


def get(name: str) -> Framework:
    """Look a framework up by name or alias; a UserError names the valid choices."""
    try:
        return _BY_NAME[name.strip().lower()]
    except KeyError:
        raise UserError("unknown framework {!r}; choose from {}".format(
            name, ", ".join(names()))) from None


def parse(csv: str) -> List[Framework]:
    """'tf,torch' -> [tf, caffe2], in the given order, duplicates dropped."""
    items = [s for s in (x.strip() for x in csv.split(",")) if s]
    if not items:
        raise UserError("--frameworks is empty; choose from {}".format(", ".join(names())))
    out: List[Framework] = []
    for item in items:
        fw = get(item)
        if fw not in out:
            out.append(fw)
    return out
