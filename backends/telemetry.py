"""GPU telemetry during the timed region: power, utilisation, memory, clocks, temperature.

Standard library only at import time, Python >= 3.8: `pynvml` (package nvidia-ml-py) is imported
lazily inside `NvmlProvider`, so a backend without it (or a CPU machine) records nulls, not zeros.

    sampler = telemetry.for_spec(spec, rank)   # inert on CPU, on ranks > 0, or without NVML
    sampler.start()                            # background thread, one sample every ~100 ms
    ...timed region...
    record = sampler.stop()                    # RunResult.telemetry

A provider is any object with `devices() -> [dict]` (index, name, ...) and `read(index) -> dict`
holding the keys of FIELDS (a value may be None where the device does not report it). Tests use a
fake provider; the GPU run uses NVML.
"""
import statistics
import threading
from typing import Any, Dict, List, Optional, Sequence

from .contract.rules import visible_gpus

# key -> unit, for one device sample
FIELDS = ("power_w", "util_pct", "mem_used_mib", "sm_clock_mhz", "mem_clock_mhz", "temp_c")
INTERVAL_S = 0.1


class NvmlProvider:
    """Reads NVIDIA GPUs through NVML. Raises on construction where NVML cannot be used."""

    def __init__(self, indices: Sequence[int]):
        import pynvml  # lazy: backends stay stdlib-only at import time
        self.nvml = pynvml
        pynvml.nvmlInit()
        self.handles = {i: pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices}

    def devices(self) -> List[Dict[str, Any]]:
        nv = self.nvml
        out = []
        for i, h in self.handles.items():
            out.append({"index": i, "name": _text(nv.nvmlDeviceGetName(h)),
                        "driver": _text(nv.nvmlSystemGetDriverVersion()),
                        "power_limit_w": _try(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0)})
        return out

    def read(self, index: int) -> Dict[str, Optional[float]]:
        nv, h = self.nvml, self.handles[index]
        return {
            "power_w": _try(lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
            "util_pct": _try(lambda: float(nv.nvmlDeviceGetUtilizationRates(h).gpu)),
            "mem_used_mib": _try(lambda: nv.nvmlDeviceGetMemoryInfo(h).used / 2.0 ** 20),
            "sm_clock_mhz": _try(lambda: float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))),
            "mem_clock_mhz": _try(lambda: float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))),
            "temp_c": _try(lambda: float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))),
        }

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def _try(read) -> Optional[float]:
    """A device that does not report one figure (e.g. power on some boards) gives None for it."""
    try:
        return float(read())
    except Exception:
        return None


def empty(reason: str) -> Dict[str, Any]:
    """The record when nothing was sampled: every figure null, with the reason."""
    record = {"source": None, "reason": reason, "samples": 0, "devices": [],
              "interval_s": None}  # type: Dict[str, Any]
    record.update({k: None for k in summary_keys()})
    return record


def summary_keys() -> List[str]:
    return ["power_avg_w", "power_max_w", "util_avg_pct", "util_max_pct", "mem_used_max_mib",
            "sm_clock_avg_mhz", "mem_clock_avg_mhz", "temp_avg_c", "temp_max_c"]


class Sampler:
    """Samples `provider` every `interval` seconds on a daemon thread between start() and stop().

    Power is the sum over the GPUs this process samples (rank 0's node's: the host's report
    counts it once per node for the whole job's draw);
    utilisation, clocks and temperature are the mean over GPUs; memory is the largest GPU's.
    """

    def __init__(self, provider: Any, indices: Sequence[int], interval: float = INTERVAL_S,
                 source: str = "nvml"):
        self.provider, self.indices, self.interval, self.source = provider, list(indices), interval, source
        self.samples = []  # type: List[List[Dict[str, Optional[float]]]]
        self.errors = []  # type: List[str]
        self._stop = threading.Event()
        self._thread = None  # type: Optional[threading.Thread]

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="compare-telemetry", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(self.interval):
                return

    def _sample(self) -> None:
        try:
            self.samples.append([self.provider.read(i) for i in self.indices])
        except Exception as exc:  # telemetry must never break a measurement
            if len(self.errors) < 5:
                self.errors.append("{}: {}".format(type(exc).__name__, exc))

    def stop(self) -> Dict[str, Any]:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self._sample()  # the end of the region is sampled too, so a short region has >= 2 samples
        try:
            devices = self.provider.devices()
        except Exception:
            devices = [{"index": i} for i in self.indices]
        close = getattr(self.provider, "close", None)
        if close is not None:
            close()
        record = summarize(self.samples)
        record.update(source=self.source, reason="; ".join(self.errors) or None,
                      devices=devices, interval_s=self.interval)
        return record


def summarize(samples: Sequence[Sequence[Dict[str, Optional[float]]]]) -> Dict[str, Any]:
    """samples[t][gpu] -> the summary figures of summary_keys(); None where never reported."""

    def per_sample(key, combine):
        out = []
        for row in samples:
            values = [d.get(key) for d in row if d.get(key) is not None]
            if values:
                out.append(combine(values))
        return out

    def mean(xs):
        return statistics.fmean(xs) if xs else None

    power = per_sample("power_w", sum)
    util = per_sample("util_pct", statistics.fmean)
    temp = per_sample("temp_c", statistics.fmean)
    mem = per_sample("mem_used_mib", max)
    return {
        "samples": len(samples),
        "power_avg_w": mean(power), "power_max_w": max(power) if power else None,
        "util_avg_pct": mean(util), "util_max_pct": max(util) if util else None,
        "mem_used_max_mib": max(mem) if mem else None,
        "sm_clock_avg_mhz": mean(per_sample("sm_clock_mhz", statistics.fmean)),
        "mem_clock_avg_mhz": mean(per_sample("mem_clock_mhz", statistics.fmean)),
        "temp_avg_c": mean(temp), "temp_max_c": max(temp) if temp else None,
    }


class _Inert:
    """The sampler where nothing can or should be sampled; stop() gives the all-null record."""

    def __init__(self, reason: str):
        self.reason = reason

    def start(self) -> None:
        pass

    def stop(self) -> Dict[str, Any]:
        return empty(self.reason)


def visible_indices(count: int, env: Optional[Dict[str, str]] = None) -> List[int]:
    """NVML indices of the job's first `count` GPUs (NVML ignores CUDA_VISIBLE_DEVICES; we map it)."""
    items = visible_gpus(env)
    if items and all(s.isdigit() for s in items):
        return [int(s) for s in items[:count]]
    return list(range(count))


def for_spec(spec: Any, rank: int, provider: Any = None) -> Any:
    """A started-on-demand sampler for this run: rank 0 of a CUDA run samples the job's GPUs."""
    if spec.device != "cuda":
        return _Inert("no GPU telemetry on device {}".format(spec.device))
    if rank != 0:
        return _Inert("sampled by rank 0")
    if str(spec.options.get("telemetry", True)).lower() in ("0", "false", "off", "no"):
        return _Inert("telemetry switched off (option telemetry=false)")
    indices = visible_indices(spec.gpus)
    if provider is None:
        try:
            provider = NvmlProvider(indices)
        except Exception as exc:  # no pynvml, no driver, no permission: nulls with the reason
            return _Inert("NVML unavailable: {}: {}".format(type(exc).__name__, exc))
    return Sampler(provider, indices)
