"""Which GPUs an MXNet build has machine code for, and whether this GPU is one of them. Stdlib only.

MXNet's PyPI CUDA wheels are compiled for a fixed list of architectures and carry no PTX
(MXNET_CUDA_ARCH in apache/mxnet's config/distribution/linux_cu*.cmake), so on a newer GPU the
first kernel fails ("no kernel image is available for execution on the device"). That is a
recorded `unsupported` here, before any training step. A build not listed below (NGC's image, a
source build) is checked by running a small convolution on the GPU instead (train.py).
"""
from typing import Optional, Sequence, Tuple

from ..protocol import Unsupported

# MXNET_CUDA_ARCH of the 1.9.1 wheels on PyPI (config/distribution/linux_cu112.cmake and
# linux_cu117.cmake); an arch without "+PTX" gets machine code only
WHEEL_ARCHS = {
    "mxnet-cu112": ("5.0", "6.0", "7.0", "8.0", "8.6"),
    "mxnet-cu117": ("5.0", "6.0", "7.0", "8.0", "8.6"),
}


def installed_wheel() -> Optional[str]:
    """The PyPI CUDA wheel mxnet was installed from, where it is one of WHEEL_ARCHS's, else None."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return None
    for name in WHEEL_ARCHS:
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        return name
    return None


def runs_on(capability: Tuple[int, int], archs: Sequence[str]) -> bool:
    """Whether machine code built for `archs` (no PTX) runs on a GPU of `capability`.

    A cubin for X.y runs on devices X.z with z >= y, never on another major version: code for
    8.6 runs on Ada (8.9), not on Hopper (9.0).
    """
    major, minor = int(capability[0]), int(capability[1])
    for arch in archs:
        arch_major, arch_minor = (int(part) for part in arch.split("+")[0].split("."))
        if arch_major == major and arch_minor <= minor:
            return True
    return False


def check_capability(capability: Tuple[int, int], archs: Sequence[str], build: str) -> None:
    """Unsupported when `build` (e.g. "mxnet-cu117") has no code that runs on this GPU."""
    if runs_on(capability, archs):
        return
    raise Unsupported(
        "{} has GPU code for compute capability {} only (no PTX); this GPU is {}.{}, so its first "
        "kernel would fail. Use NGC's MXNet image (the docker executor), which is built for it"
        .format(build, ", ".join(archs), capability[0], capability[1]))
