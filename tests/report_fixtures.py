"""A fixed set of RunResults (no training): the A6000 seed figures for TensorFlow, plus PyTorch
repeats, an out-of-memory cell and a failed MXNet cell. Shared by the report, HTML and diff tests."""
from backends.protocol import RunResult, RunSpec

# tf_cnn_benchmarks on 1/2/4/8x RTX A6000, resnet50, batch 256 (compare/references/)
A6000 = {"fp16": {1: 1220.76, 2: 2382.99, 4: 4634.09, 8: 8816.47},
         "fp32": {1: 520.85, 2: 1036.15, 4: 2042.98, 8: 3980.10}}
MACHINE = {"hostname": "lab1", "cpu_model": "AMD EPYC 7543", "cpu_count": 64, "memory_gib": 503.7,
           "gpus": [{"index": i, "name": "NVIDIA RTX A6000", "driver": "535.54"} for i in range(8)],
           "cuda_driver_version": "12.2", "compare_version": "0.1.0",
           "git": {"commit": "0123456789abcdef", "dirty": False}}


def result(framework, precision, gpus, ips=None, repeat=0, status="ok", reason=None, watts=None,
           device="cuda", batch=256, device_name="NVIDIA RTX A6000", version=None):
    spec = RunSpec(framework=framework, backend={"tf": "tf_horovod", "caffe2": "caffe2_torch"}.get(
        framework, framework), gpus=gpus, device=device, precision=precision, batch_size=batch,
        repeat=repeat)
    telemetry = {"source": "nvml", "samples": 20, "power_avg_w": watts, "util_avg_pct": 97.0,
                 "mem_used_max_mib": 40000.0, "sm_clock_avg_mhz": 1800.0, "temp_max_c": 80.0}
    ok = status == "ok"
    return RunResult(run_id=spec.run_id, status=status, spec=spec.to_dict(), reason=reason,
                     images_per_sec=ips if ok else None, median_images_per_sec=ips if ok else None,
                     uncertainty=0.5 if ok else None, jitter=1.0 if ok else None,
                     distribution="horovod" if framework == "tf" else "ddp",
                     device_name=device_name,
                     framework_version=version or {"tf": "tensorflow 2.15.1", "caffe2": "torch 2.3.1",
                                                   "mxnet": "mxnet 1.9.1"}[framework],
                     telemetry=telemetry if watts is not None else {})


def fixed_results():
    out = [result("tf", p, n, ips, watts=290.0 * n) for p, row in A6000.items() for n, ips in row.items()]
    out += [result("caffe2", "fp16", 1, ips, repeat=i, watts=280.0)
            for i, ips in enumerate([1250.0, 1290.0, 1300.0, 1330.0, 1400.0])]
    out += [result("caffe2", "fp16", 2, 2450.0, watts=570.0), result("caffe2", "fp32", 1, 560.0),
            result("caffe2", "fp32", 2, status="oom", reason="CUDA out of memory. Tried to allocate 2 GiB"),
            result("mxnet", "fp32", 1, status="failed", reason="MXNetError: cudnn failed\nline 2")]
    return out
