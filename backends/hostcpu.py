"""Host CPU use during the timed region: CPU seconds of the job's processes ÷ wall seconds, i.e.
how many cores the job kept busy (input-pipeline workers included). Standard library only.

The job is this process's process group: the local executor starts every run in a session of
its own, so the group holds the launcher (torchrun), every rank and every loader worker
(DataLoader, Grain) of the run, and nothing else. Read from /proc (utime + stime of each member);
without /proc, this process and its waited-for children (resource.getrusage).

    sampler = hostcpu.Sampler(); sampler.start()  ...timed region...  record = sampler.stop()
"""
import os
import time
from typing import Dict, Optional, Tuple

PROC = "/proc"


def _group_cpu(pgid: int) -> Optional[Tuple[float, int]]:
    """(CPU seconds, processes) of the live processes of group `pgid`; None without /proc."""
    if not os.path.isdir(os.path.join(PROC, "self")):
        return None
    ticks, total, count = os.sysconf("SC_CLK_TCK"), 0, 0
    for name in os.listdir(PROC):
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(PROC, name, "stat")) as f:
                text = f.read()
        except OSError:  # ended while we looked
            continue
        fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp ...
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of proc(5))
            count += 1
    return total / ticks, count


def _rusage_cpu() -> Tuple[float, int]:
    import resource
    seconds = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        seconds += usage.ru_utime + usage.ru_stime
    return seconds, 1


class Sampler:
    """start() and stop() around the timed region; stop() -> the host_cpu_* record."""

    def __init__(self) -> None:
        self.pgid = os.getpgid(0) if hasattr(os, "getpgid") else None
        self.scope = "the job's process group (launcher, ranks, loader workers)"
        self.started = None  # type: Optional[Tuple[float, float]]

    def _read(self) -> Tuple[float, int]:
        found = _group_cpu(self.pgid) if self.pgid is not None else None
        if found is None:
            self.scope = "this process and its ended children (no /proc)"
            return _rusage_cpu()
        return found

    def start(self) -> None:
        self.started = (time.perf_counter(), self._read()[0])

    def stop(self) -> Dict[str, object]:
        if self.started is None:
            return {"host_cpu_cores": None, "host_cpu_s": None, "host_cpu_processes": None,
                    "host_cpu_scope": None}
        cpu, processes = self._read()
        wall, used = time.perf_counter() - self.started[0], cpu - self.started[1]
        return {"host_cpu_cores": round(used / wall, 3) if wall > 0 else None,
                "host_cpu_s": round(used, 3), "host_cpu_processes": processes,
                "host_cpu_scope": self.scope}
