"""Whether an MXNet build has machine code for a GPU (backends/mxnet/cuda_build.py, stdlib only).

PyPI's mxnet-cu117 wheel is built for 5.0-8.6 without PTX: on Hopper (9.0) its first kernel would
fail, so a run there must be a recorded `unsupported` with the reason, decided before training.
The same check is run with mxnet itself in tests/backends/test_mxnet.py.
"""
import pytest

from backends.mxnet import cuda_build
from backends.protocol import Unsupported

CU117 = cuda_build.WHEEL_ARCHS["mxnet-cu117"]


def test_the_pip_wheels_architectures_are_those_apache_built():
    assert CU117 == ("5.0", "6.0", "7.0", "8.0", "8.6")


@pytest.mark.parametrize("capability,runs", [((7, 0), True), ((7, 5), True), ((8, 0), True),
                                             ((8, 6), True), ((8, 9), True), ((9, 0), False),
                                             ((10, 0), False), ((12, 0), False), ((3, 7), False)])
def test_machine_code_runs_on_the_same_major_version_at_an_equal_or_higher_minor(capability, runs):
    assert cuda_build.runs_on(capability, CU117) is runs


def test_a_hopper_gpu_with_the_cu117_wheel_is_unsupported_with_the_reason():
    with pytest.raises(Unsupported) as info:
        cuda_build.check_capability((9, 0), CU117, "mxnet-cu117")
    assert str(info.value) == (
        "mxnet-cu117 has GPU code for compute capability 5.0, 6.0, 7.0, 8.0, 8.6 only (no PTX); "
        "this GPU is 9.0, so its first kernel would fail. Use NGC's MXNet image (the docker "
        "executor), which is built for it")


def test_an_ampere_gpu_passes():
    cuda_build.check_capability((8, 0), CU117, "mxnet-cu117")  # no exception


def test_no_pip_cuda_wheel_is_installed_in_the_host_environment():
    assert cuda_build.installed_wheel() is None
