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


def test_a_cuda_run_that_sees_no_gpu_is_unsupported_in_the_words_every_backend_uses():
    with pytest.raises(Unsupported, match=r"^device cuda asked for, but jax 0\.4 sees no GPU "
                                          r"\(backend cpu\)$"):
        policy.check_gpu(False, "jax 0.4", " (backend cpu)")
    policy.check_gpu(True, "torch 2.3.1")


def test_tf32_switched_off_by_the_environment_is_unsupported(monkeypatch):
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    with pytest.raises(Unsupported, match="^tf32 asked for, but NVIDIA_TF32_OVERRIDE=0 switches it off$"):
        policy.check_tf32_override("tf32")
    policy.check_tf32_override("fp32")  # true FP32 is what the override is for
    monkeypatch.delenv("NVIDIA_TF32_OVERRIDE")
    policy.check_tf32_override("tf32")


def test_fp16_on_a_cpu_carries_a_note_and_nothing_else_does():
    assert policy.fp16_cpu_note("fp16", "cpu", runs="XLA runs it") == \
        "fp16 on CPU: XLA runs it, but CPUs have no fp16 tensor cores"
    assert policy.fp16_cpu_note("fp16", "cpu", what="fp16 autocast") == \
        "fp16 autocast on CPU: runs, but CPUs have no fp16 tensor cores"
    assert policy.fp16_cpu_note("fp16", "cuda") is None and policy.fp16_cpu_note("bf16", "cpu") is None


def test_bf16_on_a_cpu_without_bf16_instructions_says_it_is_emulated(tmp_path):
    no_avx512 = frozenset({"sse4_2", "avx2", "fma"})  # this AMD EPYC's kind: no AVX-512 at all
    assert policy.bf16_cpu_note("bf16", "cpu", who="PyTorch", flags=no_avx512) == (
        "bf16 on a CPU without bf16 instructions (neither avx512_bf16 nor amx_bf16, and no "
        "AVX-512): PyTorch emulates it, so its figure and its gain over fp32 measure the "
        "emulation, not bf16 hardware")
    skylake = no_avx512 | {"avx512f", "avx512bw"}  # AVX-512 without its bf16 extension
    assert "amx_bf16): the framework emulates it" in policy.bf16_cpu_note("bf16", "cpu", flags=skylake)
    for native in ("avx512_bf16", "amx_bf16"):  # Cooper Lake, Sapphire Rapids, Zen 4: no note
        assert policy.bf16_cpu_note("bf16", "cpu", flags=skylake | {native}) is None
    assert policy.bf16_cpu_note("bf16", "cpu", flags=frozenset()) is None  # flags unknown: no claim
    assert policy.bf16_cpu_note("fp32", "cpu", flags=no_avx512) is None
    assert policy.bf16_cpu_note("bf16", "cuda", flags=no_avx512) is None
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f amx_bf16\n\nprocessor\t: 1\n")
    assert policy.cpu_flags(str(cpuinfo)) == {"fpu", "sse", "avx512f", "amx_bf16"}
    assert policy.cpu_flags(str(tmp_path / "absent")) == frozenset()


def test_cpu_precision_note_names_the_mode_and_who_runs_it(monkeypatch):
    monkeypatch.setattr(policy, "cpu_flags", lambda: frozenset({"avx2"}))
    assert policy.cpu_precision_note("fp16", "cpu", "autocast", "PyTorch") == \
        "fp16 autocast on CPU: PyTorch runs it, but CPUs have no fp16 tensor cores"
    assert policy.cpu_precision_note("fp16", "cuda", "autocast", "PyTorch") is None
    assert policy.cpu_precision_note("fp32", "cpu", "autocast", "PyTorch") is None
    assert policy.cpu_precision_note("bf16", "cpu", "AMP", "MXNet").startswith(
        "bf16 AMP on a CPU without bf16 instructions (neither avx512_bf16 nor amx_bf16, and no "
        "AVX-512): MXNet emulates it")
    monkeypatch.setattr(policy, "cpu_flags", lambda: frozenset({"avx512f", "amx_bf16"}))
    assert policy.cpu_precision_note("bf16", "cpu", "AMP", "MXNet") is None
