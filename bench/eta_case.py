"""Print the plan's ETA against the wall time for each case of an ETA fixture: the figures
tests/test_plan_eta.py holds to 25 %, computed by the test's own function:

    python3 bench/eta_case.py tests/fixtures/eta/study8_h200.json

With `--reference NAME` on a file of reference cell times, each cell of its other campaigns
planned from campaign NAME alone (marked r where a like cell is there), against what it took:

    python3 bench/eta_case.py compare/references/cell_times/h200.json --reference study
"""
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from backends.protocol import RunResult, RunSpec  # noqa: E402
from compare import eta as plan  # noqa: E402
from tests.test_plan_eta import planned  # noqa: E402


def from_reference(fixture, name: str) -> None:
    references = [RunResult.from_dict(r) for r in fixture["campaigns"][name]]
    estimates = plan.Estimates([], "local", references=references)
    for other, rows in fixture["campaigns"].items():
        for r in (RunResult.from_dict(row) for row in rows if other != name):
            seconds, mark = estimates.of(RunSpec.from_dict(r.spec))
            print("{} {}: planned {}{:.1f} s, took {:.1f} s".format(
                other, r.run_id, mark, seconds, r.phases["cell_end"] - r.phases["cell_start"]))


def main(path: str, reference: str = "") -> None:
    fixture = json.loads(Path(path).read_text())
    if reference:
        return from_reference(fixture, reference)
    for case in fixture["cases"]:
        with tempfile.TemporaryDirectory() as tmp:
            eta, wall, _, _ = planned(fixture, case, Path(tmp))
        print("{} from {}: planned {:.0f} s, took {:.0f} s ({:.2f})".format(
            case["target"], ",".join(case["earlier"]), eta, wall, eta / wall))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[3] if sys.argv[2:3] == ["--reference"] else "")
