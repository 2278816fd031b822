"""The comparator's reading of stored results, shared with the timeline and the plan."""
from backends.contract import RunResult
from compare import eta
from compare.reporting import comparator, timeline
from tests.helpers import result


def test_a_spec_stored_before_the_data_mode_field_is_told_apart_by_data_and_data_only():
    # the report, the timeline and the plan's like cells read one rule (contract.data_mode): a
    # data-only run of an earlier format is data-only everywhere, never a training figure
    base = result("caffe2", "fp32", 1, 100.0)
    modes = []
    for data, data_only in (("synthetic", False), ("/imagenet", False), ("/imagenet", True)):
        spec = dict(base.spec, data=data, data_only=data_only)
        del spec["data_mode"]
        r = RunResult(**dict(base.to_dict(), spec=spec))
        modes.append((comparator.run_record(r)["data_mode"], eta.Estimates._like(spec, "local")[-3],
                      timeline._key(spec)[timeline.KEY.index("data_mode")]))
    assert modes == [("synthetic",) * 3, ("real",) * 3, ("data-only",) * 3]
