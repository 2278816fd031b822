"""The spec/result contract: round trips, schema version, atomic writes."""
import json

import pytest

from backends.protocol import (
    SCHEMA_VERSION,
    RunResult,
    RunSpec,
    SchemaError,
    read_result,
    read_spec,
    write_result,
    write_spec,
)


def test_spec_round_trip_and_run_id(tmp_path):
    spec = RunSpec(framework="caffe2", backend="caffe2_torch", gpus=2, precision="bf16",
                   batch_size=64, image_size=128, repeat=1)
    write_spec(str(tmp_path / "s.json"), spec)
    back = read_spec(str(tmp_path / "s.json"))
    assert back == spec
    assert back.run_id == "caffe2-bf16-w2-b64-s128-r1"
    assert back.global_batch == 128


def test_result_with_another_schema_version_is_refused(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1, "run_id": "x",
                                "status": "ok", "spec": {}}))
    with pytest.raises(SchemaError, match="schema_version 2; this compare reads version 1"):
        read_result(str(path))


def test_unknown_status_is_refused():
    with pytest.raises(SchemaError, match="status 'great'"):
        RunResult(run_id="x", status="great", spec={})


def test_atomic_write_leaves_no_temp_file(tmp_path):
    write_result(str(tmp_path / "r.json"), RunResult(run_id="x", status="ok", spec={}))
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
    assert read_result(str(tmp_path / "r.json")).status == "ok"


def test_spec_validation_names_the_bad_value():
    with pytest.raises(SchemaError, match="image_size must be >= 32, got 16"):
        RunSpec(framework="caffe2", backend="caffe2_torch", image_size=16).validate()


def test_files_are_written_with_the_umask_like_any_other(tmp_path):
    import os
    old = os.umask(0o027)
    try:
        write_result(str(tmp_path / "r.json"), RunResult(run_id="x", status="ok", spec={}))
    finally:
        os.umask(old)
    assert oct((tmp_path / "r.json").stat().st_mode & 0o777) == "0o640"  # mkstemp alone: 0o600
