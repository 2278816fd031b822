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


def test_the_spec_hash_covers_settings_not_repeats_and_ignores_fields_at_their_default():
    base = RunSpec(framework="caffe2", backend="caffe2_torch", steps=20)
    assert base.spec_hash == RunSpec(framework="caffe2", backend="caffe2_torch", steps=20, repeat=4,
                                     nonce="abc").spec_hash
    for change in ({"steps": 21}, {"warmup_steps": 3}, {"windows": 2}, {"compile": True},
                   {"options": {"channels_last": True}}, {"image_size": 64}, {"seed": 1}):
        assert RunSpec(**dict(dict(framework="caffe2", backend="caffe2_torch", steps=20), **change)
                       ).spec_hash != base.spec_hash, change
    # what an older protocol without `nodes` computed for the same spec (nodes at its default)
    import hashlib
    old = {k: v for k, v in base.to_dict().items() if k in ("framework", "backend", "steps")}
    assert base.spec_hash == hashlib.sha256(json.dumps(old, sort_keys=True, separators=(",", ":"))
                                            .encode()).hexdigest()[:16]
