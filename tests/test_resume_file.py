"""A --resume a campaign file gives (`resume = true`) is named in messages by the file and its key,
as every other setting the file gives is: never "--resume DIR", which the user did not type."""
import json

import pytest

from compare.store import CAMPAIGN_KIND
from tests.helpers import FAST, fake_python, main_exit


@pytest.fixture()
def campaign(tmp_path, capsys):
    """A finished one-cell campaign `c` of a stand-in caffe2 (3 timed steps), cwd its folder."""
    fake = fake_python(tmp_path)
    code, _, err = main_exit([str(a) for a in ["run", "--frameworks", "caffe2", "--python",
                                               "caffe2={}".format(fake), "--results", tmp_path / "c"]
                              + FAST], capsys)
    assert code == 0, err
    return tmp_path / "c"


def test_a_held_setting_changed_by_a_file_that_resumes_names_the_file(campaign, capsys, monkeypatch):
    monkeypatch.chdir(campaign.parent)
    (campaign.parent / "more.toml").write_text('results = "c"\nresume = true\nsteps = 5\n')
    code, _, err = main_exit(["run", "--config", "more.toml"], capsys)
    assert (code, err) == (2, "compare: error: more.toml: resume = true (results {}): steps 5 (the "
                              "campaign's: 3): held by the campaign (they change what its cells "
                              "measure); leave them out (the campaign's are used) or start a new "
                              "campaign\n".format(campaign))


def test_a_corrupt_campaign_a_file_resumes_is_named_by_the_file(tmp_path, capsys, monkeypatch):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "campaign.json").write_text(json.dumps(
        {"kind": CAMPAIGN_KIND, "settings": {"device": "cpu"}, "planned": {},
         "sessions": [{"config": []}]}))
    (tmp_path / "study.toml").write_text('resume = true\n')
    monkeypatch.chdir(tmp_path)
    code, _, err = main_exit(["run", "--config", "study.toml", "--results", "c"], capsys)
    assert (code, err) == (2, "compare: error: study.toml: resume = true (--results {}): campaign.json "
                              "is corrupt (its latest session's config is a list, not an object); "
                              "restore it or start a new campaign\n".format(tmp_path / "c"))


def test_resume_from_a_flag_still_says_the_flag(tmp_path, capsys, monkeypatch):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "campaign.json").write_text(json.dumps(
        {"kind": CAMPAIGN_KIND, "settings": {"device": "cpu"}, "planned": {},
         "sessions": [{"config": []}]}))
    monkeypatch.chdir(tmp_path)
    code, _, err = main_exit(["run", "--results", "c", "--resume"], capsys)
    assert (code, err) == (2, "compare: error: --resume {}: campaign.json is corrupt (its latest "
                              "session's config is a list, not an object); restore it or start a "
                              "new campaign\n".format(tmp_path / "c"))


def test_an_unfinished_campaign_a_file_resumes_says_to_leave_the_files_key_out(tmp_path, capsys,
                                                                              monkeypatch):
    (tmp_path / "c" / "results").mkdir(parents=True)  # a creation that did not finish
    (tmp_path / "study.toml").write_text('results = "c"\nresume = true\n')
    monkeypatch.chdir(tmp_path)
    code, _, err = main_exit(["run", "--config", "study.toml"], capsys)
    assert (code, err) == (2, "compare: error: study.toml: resume = true (results {}): its creation did "
                              "not finish (no campaign.json); run again without resume = true in "
                              "study.toml to create it\n".format(tmp_path / "c"))


def test_a_cell_planned_otherwise_in_a_campaign_a_file_resumes_names_the_file(campaign, capsys,
                                                                             monkeypatch):
    meta = json.loads((campaign / "campaign.json").read_text())
    cell = next(iter(meta["planned"]))
    meta["planned"][cell] = "0" * 16  # planned with other settings (a hand edit)
    (campaign / "campaign.json").write_text(json.dumps(meta))
    monkeypatch.chdir(campaign.parent)
    (campaign.parent / "more.toml").write_text('results = "c"\nresume = true\n')
    code, _, err = main_exit(["run", "--config", "more.toml"], capsys)
    assert code == 2 and err.startswith(
        "compare: error: more.toml: resume = true (results {}): cell {} was planned with other "
        "settings (spec hash 0000000000000000, now ".format(campaign, cell)), err


def test_a_resume_of_a_folder_that_does_not_exist_is_named_by_the_file(tmp_path, capsys, monkeypatch):
    (tmp_path / "study.toml").write_text('results = "nowhere"\nresume = true\n')
    monkeypatch.chdir(tmp_path)
    code, _, err = main_exit(["run", "--config", "study.toml"], capsys)
    assert (code, err) == (2, "compare: error: study.toml: resume = true (results {}): no such folder; "
                              "give a folder made by `compare run`\n".format(tmp_path / "nowhere"))


def test_an_earlier_campaign_whose_results_disagree_a_file_resumes_is_named_by_the_file(
        tmp_path, capsys, monkeypatch):
    # settings_of_results said "--resume DIR" where only the file had asked for the resume
    from tests.test_resume import _earlier_campaign
    campaign = _earlier_campaign(tmp_path)
    meta = json.loads((campaign / "campaign.json").read_text())
    del meta["settings"]  # an earlier compare's campaign that stored none: read from its results
    (campaign / "campaign.json").write_text(json.dumps(meta))
    other = campaign / "results" / "caffe2-fp32-w2-b32-s32-r1.json"
    result = json.loads(other.read_text())
    result["environment"]["executor"] = "docker"
    other.write_text(json.dumps(result))
    (tmp_path / "study.toml").write_text('results = "c"\nresume = true\n')
    monkeypatch.chdir(tmp_path)
    code, _, err = main_exit(["run", "--config", "study.toml", "--plan"], capsys)
    assert (code, err) == (2, "compare: error: study.toml: resume = true (results {}): the campaign "
                              "stored no settings (an earlier compare made it) and its results "
                              "disagree: executor local in caffe2-fp32-w1-b32-s32-r0 vs docker in "
                              "caffe2-fp32-w2-b32-s32-r1; start a new campaign\n".format(campaign))
