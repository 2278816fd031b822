"""The report of a stored campaign, byte for byte: tests/fixtures/campaign_cpu is a real CPU
campaign (`compare run --frameworks caffe2 --quick --image-size 32 --steps 2 --warmup 1
--windows 2 --repeats 2 --gpus 1,2 --device cpu --executor local`, made at 3f40005, before the
Study and the four stages) with the report that code wrote. `compare report` of the same folder
must write the same files: a refactoring that changes a figure, a word or an order shows here.
Nothing in them varies (the times shown are the results' own), so nothing is masked."""
import shutil
from pathlib import Path

import pytest

from tests.helpers import main_exit

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "campaign_cpu"
FILES = ["report.md", "report.csv", "report.json", "runs.csv", "tables/images_sec.csv",
         "tables/phases.csv", "tables/repeats.csv", "tables/scaling_efficiency.csv"]


@pytest.fixture()
def campaign(tmp_path):
    root = tmp_path / "campaign"
    shutil.copytree(str(FIXTURE / "campaign"), str(root))
    return root


def test_compare_report_of_the_stored_campaign_is_the_stored_report(campaign, tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, err = main_exit(["report", str(campaign), "--format", "md,csv,json", "--out",
                                   str(out)], capsys)
    assert code == 0, err
    assert stdout == (FIXTURE / "report" / "report.md").read_text()
    for name in FILES:
        assert (out / name).read_bytes() == (FIXTURE / "report" / name).read_bytes(), name
    assert sorted(p.name for p in (out / "tables").iterdir()) == sorted(
        Path(n).name for n in FILES if n.startswith("tables/"))
