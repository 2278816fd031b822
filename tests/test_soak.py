"""The fault-injection soak (bench/soak.py) at CI's size: at least 20 faults (SIGKILL and SIGTERM
to compare, a worker, a launcher; the disk filled mid-write where a tmpfs can be mounted; a
result cut in half) over a 20-cell CPU campaign of PyTorch and JAX cells, resumed after each
session until done, every session checked (docs/reliability.md has the large run's figures)."""
import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.backend  # real frameworks in their managed environments


def test_twenty_faults_lose_nothing_rewrite_nothing_and_leave_no_process(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "soak.py"), "--faults", "20",
                           "--seed", "7", "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=2400, cwd=str(ROOT))
    lines = [line for line in proc.stdout.splitlines() if line.startswith("soak: ")]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = lines[0]
    assert int(re.search(r"soak: (\d+) faults injected", line).group(1)) >= 20, line
    assert int(re.search(r"; (\d+) cells in", line).group(1)) >= 20, line
    assert int(re.search(r"(\d+) resumes", line).group(1)) >= 10, line
    assert "lost 0, rewritten 0, orphans 0, errors 0, lock blocked 0" in line, proc.stdout
    assert "final cells equal to the plan reference" in line, proc.stdout
    assert proc.returncode == 0, proc.stdout[-3000:]
