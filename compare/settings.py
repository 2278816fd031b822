"""The settings of a campaign: what changes the measured number besides the matrix axes, fixed
when the campaign is created and held on --resume; for a campaign of an earlier compare, which
stored none, read back from its results."""
from typing import Any, Dict

from .errors import UserError

# what changes the measured number besides the matrix axes: fixed when a campaign is created
COMMON_SETTINGS = ("image_size", "steps", "warmup_steps", "windows", "compile")


def settings(config: Dict[str, Any], executor: str) -> Dict[str, Any]:
    """The settings of a campaign that change the measured number and are not a matrix axis: the
    device, COMMON_SETTINGS, the executor, and per framework its options and --python."""
    common = config.get("common", {})
    out = {"device": config.get("device"), "executor": executor}
    out.update({key: common.get(key) for key in COMMON_SETTINGS})
    if config.get("batch_search"):  # an auto cell is one cell whatever batch it chose
        out["batch_search"] = config["batch_search"]
    for fw in config.get("frameworks", []):
        out["options." + fw] = config.get("options", {}).get(fw, {})
        out["python." + fw] = config.get("python", {}).get(fw)  # None: compare's choice
    return out


def settings_of_results(results) -> Dict[str, Any]:
    """The settings an earlier compare's campaign (which stored none) ran with, read from its
    results: what their specs say, and the executor and --python their environment recorded.
    A UserError when two results disagree: such a campaign cannot be resumed safely."""
    found: Dict[str, Any] = {}
    for r in results:
        spec, env, fw = r.spec, r.environment or {}, r.spec.get("framework")
        config = {"device": spec.get("device"), "frameworks": [fw],
                  "common": {k: spec[k] for k in COMMON_SETTINGS if k in spec},
                  "options": {fw: spec.get("options") or {}},
                  "python": {fw: env.get("python")} if env.get("interpreter_source") == "--python" else {}}
        mine = settings(config, env.get("executor"))
        unknown = [k for k in COMMON_SETTINGS if k not in spec] + ([] if env.get("executor") else [
            "executor"]) + ([] if "interpreter_source" in env else ["python." + fw])
        for key, value in mine.items():
            if key in unknown:
                continue
            if key in found and found[key][0] != value:
                raise UserError("--resume: the campaign stored no settings (an earlier compare made "
                                "it) and its results disagree: {} {} in {} vs {} in {}; start a new "
                                "campaign".format(key, found[key][0], found[key][1], value, r.run_id))
            found.setdefault(key, (value, r.run_id))
    return {k: v for k, (v, _) in found.items()}
