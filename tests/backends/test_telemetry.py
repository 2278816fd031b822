"""The GPU telemetry sampler, driven by a fake NVML provider on the CPU, and its harness hook."""
import json
import subprocess
import sys
import time

import pytest

from backends import harness, telemetry
from backends.protocol import RunSpec, read_result


class FakeNvml:
    """Two GPUs; GPU i draws 100*(i+1) W at first and 100*(i+1)+50 W from the third sample on."""

    def __init__(self):
        self.reads, self.closed = 0, False

    def devices(self):
        return [{"index": i, "name": "Fake GPU", "driver": "999.1"} for i in (0, 1)]

    def read(self, index):
        self.reads += 1
        late = self.reads > 4  # two reads (one per GPU) per sample
        return {"power_w": 100.0 * (index + 1) + (50.0 if late else 0.0), "util_pct": 90.0 + index,
                "mem_used_mib": 1000.0 * (index + 1), "sm_clock_mhz": 1500.0,
                "mem_clock_mhz": None, "temp_c": 60.0 + 10 * index}

    def close(self):
        self.closed = True


def _spec(**kw):
    base = dict(framework="caffe2", backend="caffe2_torch", device="cuda", gpus=2, batch_size=10,
                warmup_steps=1, steps=6, windows=3)
    base.update(kw)
    return RunSpec(**base)


def test_summary_of_known_samples():
    g0 = {"power_w": 100.0, "util_pct": 80.0, "mem_used_mib": 500.0, "temp_c": 50.0}
    g1 = {"power_w": 200.0, "util_pct": 100.0, "mem_used_mib": 900.0, "temp_c": 70.0}
    hot = dict(g1, power_w=260.0, temp_c=80.0)
    s = telemetry.summarize([[g0, g1], [g0, hot]])
    assert s["samples"] == 2
    assert s["power_avg_w"] == pytest.approx((300.0 + 360.0) / 2)  # job power: sum over GPUs
    assert s["power_max_w"] == 360.0
    assert s["util_avg_pct"] == 90.0 and s["util_max_pct"] == 90.0  # mean over GPUs
    assert s["mem_used_max_mib"] == 900.0
    assert s["temp_avg_c"] == pytest.approx((60.0 + 65.0) / 2) and s["temp_max_c"] == 65.0
    assert s["sm_clock_avg_mhz"] is None  # never reported: null, not zero


def test_sampler_samples_about_every_interval_until_stopped():
    fake = FakeNvml()
    sampler = telemetry.Sampler(fake, [0, 1], interval=0.02)
    sampler.start()
    time.sleep(0.3)
    record = sampler.stop()
    reads_at_stop = fake.reads
    time.sleep(0.1)
    assert fake.reads == reads_at_stop, "the thread kept sampling after stop()"
    assert 6 <= record["samples"] <= 20
    assert record["source"] == "nvml" and record["interval_s"] == 0.02 and fake.closed
    assert record["power_max_w"] == 150.0 + 250.0
    assert 300.0 < record["power_avg_w"] < 400.0
    assert record["mem_used_max_mib"] == 2000.0 and record["temp_max_c"] == 65.0
    assert record["mem_clock_avg_mhz"] is None
    assert [d["name"] for d in record["devices"]] == ["Fake GPU", "Fake GPU"]


def test_a_failing_provider_never_breaks_the_measurement():
    class Broken(FakeNvml):
        def read(self, index):
            raise RuntimeError("GPU is lost")
    record = telemetry.Sampler(Broken(), [0], interval=0.01).stop()
    assert record["samples"] == 0 and record["power_avg_w"] is None
    assert "GPU is lost" in record["reason"]


def test_cpu_runs_and_other_ranks_record_nulls_not_zeros():
    for spec, rank in ((_spec(device="cpu"), 0), (_spec(), 1)):
        record = telemetry.for_spec(spec, rank, provider=FakeNvml())
        record.start()
        out = record.stop()
        assert out["source"] is None and out["samples"] == 0
        assert all(out[k] is None for k in telemetry.summary_keys())


def test_visible_devices_map_to_nvml_indices():
    assert telemetry.visible_indices(2, {"CUDA_VISIBLE_DEVICES": "3,5,6"}) == [3, 5]
    assert telemetry.visible_indices(2, {}) == [0, 1]


class StepTrainer(harness.Trainer):
    def step(self):
        time.sleep(0.03)


def test_harness_records_telemetry_of_the_timed_region(tmp_path, monkeypatch):
    fake = FakeNvml()
    real = telemetry.for_spec
    monkeypatch.setattr(telemetry, "for_spec", lambda spec, rank: real(spec, rank, provider=fake))
    result = harness.run(_spec(), str(tmp_path / "r.json"), lambda s: StepTrainer())
    assert result.status == "ok", result.reason
    stored = read_result(str(tmp_path / "r.json")).telemetry
    assert stored["source"] == "nvml" and stored["samples"] >= 2
    assert stored["power_avg_w"] >= 300.0


def test_cpu_run_without_nvml_stores_null_telemetry(tmp_path):
    result = harness.run(_spec(device="cpu", gpus=1), str(tmp_path / "r.json"), lambda s: StepTrainer())
    stored = json.loads((tmp_path / "r.json").read_text())["telemetry"]
    assert result.status == "ok" and stored["power_avg_w"] is None and stored["samples"] == 0


def test_importing_backends_pulls_no_nvml():
    code = "import sys, backends.harness, backends.telemetry; print('pynvml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_host_cpu_counts_the_cpu_seconds_of_the_jobs_process_group():
    """The CPU seconds of the timed region, whatever else the machine runs (so not the ratio)."""
    from backends import hostcpu
    sampler = hostcpu.Sampler()
    sampler.start()
    t0 = time.process_time()
    while time.process_time() - t0 < 0.3:  # this process burns 0.3 s of CPU
        pass
    record = sampler.stop()
    assert record["host_cpu_s"] >= 0.3 - 0.03  # ticks of 10 ms
    assert record["host_cpu_processes"] >= 1 and record["host_cpu_cores"] > 0
    assert record["host_cpu_scope"] == "the job's process group (launcher, ranks, loader workers)"
