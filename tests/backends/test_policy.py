"""The rules every trainer shares (backends/policy.py): stdlib, so tested without a framework."""
import pytest

from backends import policy
from backends.protocol import Unsupported


def test_tf32_on_a_cpu_is_unsupported_with_the_reason():
    with pytest.raises(Unsupported, match=r"^tf32 is an NVIDIA tensor-core mode; the CPU has none "
                                          r"\(use fp32 or bf16\)$"):
        policy.check_precision("tf32", "cpu")


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_tensor_core_modes_need_ampere(precision):
    with pytest.raises(Unsupported, match=r"^{} needs compute capability 8\.0\+, this GPU is 7\.0$"
                       .format(precision)):
        policy.check_precision(precision, "cuda", (7, 0))
    policy.check_precision(precision, "cuda", (9, 0))  # an H200: no error


def test_fp16_and_fp32_run_everywhere():
    for device, cc in (("cpu", None), ("cuda", (6, 0)), ("cuda", (9, 0))):
        policy.check_precision("fp16", device, cc)
        policy.check_precision("fp32", device, cc)


def test_a_launcher_that_started_the_wrong_number_of_workers_is_an_error():
    with pytest.raises(RuntimeError, match="^spec asks for 2 workers but torchrun started 1$"):
        policy.check_workers(2, 1, "torchrun")
    policy.check_workers(2, 2, "torchrun")


def test_each_worker_gets_an_equal_share_of_the_cores():
    assert [policy.cpu_threads(n, cores=16) for n in (1, 2, 3, 4, 32)] == [16, 8, 5, 4, 1]


def test_settings_share_one_vocabulary_and_keep_the_frameworks_own():
    s = policy.settings(trainable_parameters=25557032, optimizer_impl="fused", precision="bf16",
                        loss_scaling=None, tf32=False, layout="NHWC", compiler=None, threads=None,
                        cuda_graphs=True)
    assert list(s)[:len(policy.COMMON_SETTINGS)] == list(policy.COMMON_SETTINGS)
    assert (s["optimizer"], s["compute_dtype"], s["cuda_graphs"]) == ("sgd-momentum", "bfloat16", True)
    with pytest.raises(ValueError, match="repeat common keys: compute_dtype, optimizer"):
        policy.settings(trainable_parameters=1, optimizer_impl="x", precision="fp32",
                        loss_scaling=None, tf32=False, layout="NCHW", compiler=None, threads=1,
                        optimizer="adam", compute_dtype="float64")
