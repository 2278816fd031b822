"""The settings a campaign holds, as they resolved (Plan.held: the device and executor `auto`
chose, the steps the defaults sized): kept in campaign.json and compared on --resume. A campaign
of an earlier compare stored none: they are read back from its results here."""
from dataclasses import fields
from typing import Any, Dict, List, Tuple

from backends.contract import RunSpec

from .errors import UserError
from .study import DECLARED, FREE, HELD, SPEC_NAMES

# the HELD settings (study.py) every cell's RunSpec carries, by their RunSpec names
SPEC_HELD = tuple(SPEC_NAMES.get(n, n) for n, s in DECLARED.items() if s.resume == HELD and
                  SPEC_NAMES.get(n, n) in {f.name for f in fields(RunSpec)})


# what a resume may change (FREE), as the resume's message lists them
FREE_FLAGS = tuple(s.flag for s in DECLARED.values() if s.resume == FREE)


def settings_of_results(results) -> Dict[str, Any]:
    """The settings an earlier compare's campaign (which stored none) ran with, read from its
    results: what their specs say, and the executor and --python their environment recorded.
    A UserError when two results disagree: such a campaign cannot be resumed safely."""
    found: Dict[str, Any] = {}
    for r in results:
        spec, env, fw = r.spec, r.environment or {}, r.spec.get("framework")
        mine = {k: spec[k] for k in SPEC_HELD if k in spec}
        mine.update({"executor": env.get("executor"), "options." + fw: spec.get("options") or {},
                     "python." + fw: env.get("python") if env.get("interpreter_source") == "--python"
                     else None})
        unknown = ([] if env.get("executor") else ["executor"]) + (
            [] if "interpreter_source" in env else ["python." + fw])
        for key, value in mine.items():
            if key in unknown:
                continue
            if key in found and found[key][0] != value:
                raise UserError("--resume: the campaign stored no settings (an earlier compare made "
                                "it) and its results disagree: {} {} in {} vs {} in {}; start a new "
                                "campaign".format(key, found[key][0], found[key][1], value, r.run_id))
            found.setdefault(key, (value, r.run_id))
    return {k: v for k, (v, _) in found.items()}


# an earlier compare's `config` (its RunConfig) key -> the setting it is now; each key it lacks is
# the declared default where that compare had no such flag yet, else REQUIRED
OLD_NAMES = {"frameworks": "frameworks", "gpus": "gpus", "precisions": "precision",
             "batch_sizes": "batch_size", "device": "device", "repeats": "repeats",
             "timeout": "timeout", "nodes": "nodes", "data": "data", "data_only": "data_only",
             "models": "model", "modes": "mode", "executor": "executor", "concurrency": "concurrency",
             "executor_flags": "executor_flags"}
OLD_COMMON = {"image_size": "image_size", "steps": "steps", "warmup_steps": "warmup",
              "windows": "windows", "compile": "compile"}
OLD_KEYS = tuple(OLD_NAMES) + ("common", "options", "python", "batch_search")  # a RunConfig's
REQUIRED = ("frameworks", "gpus", "precision", "batch_size", "device", "image_size", "steps", "warmup")


def study_of_config(config: Dict[str, Any]) -> Tuple[Dict[str, Any], List[str]]:
    """An earlier compare's campaign.json `config` (its RunConfig, no study) -> (its study as
    campaign.json keeps one now, the REQUIRED settings it does not say). Each cell's measure is
    kept exactly: image size, steps and warm-up as they resolved (given, --quick's or the
    defaults'), the batch of each network where none was given; --quick is left out (the values
    it set are given)."""
    from .matrix import image_sizes
    common = config.get("common") if isinstance(config.get("common"), dict) else {}
    out = {new: config[old] for old, new in OLD_NAMES.items() if old in config}
    out.update({new: common[old] for old, new in OLD_COMMON.items() if old in common})
    if config.get("batch_search"):
        out["batch_search"] = "-".join(str(b) for b in config["batch_search"])
    out["python"] = ["{}={}".format(k, v) for k, v in dict(config.get("python") or {}).items()]
    out["option"] = ["{}.{}={}".format(fw, k, _option_text(v)) for fw, given in
                     dict(config.get("options") or {}).items() for k, v in dict(given).items()]
    batches = set(dict(config.get("model_batches") or {}).values())
    if out.get("batch_size") == [] and len(batches) == 1:  # the default batch of its networks
        out["batch_size"] = list(batches)
    elif out.get("batch_size") == []:
        out["batch_size"] = None  # each network's default here (the planned cells must agree)
    sizes = config.get("image_sizes")
    if isinstance(sizes, dict) and sizes and isinstance(out.get("image_size"), int):
        for quick in (False, True):  # each network's own size (native or --quick's), not one given
            try:
                native = image_sizes(list(sizes), None, quick)
            except UserError:
                continue
            if native == sizes:
                out.update(image_size=None, quick=quick)
                break
    missing = [n for n in REQUIRED if n not in out and not (n == "image_size" and "quick" in out)]
    return out, missing


# the REQUIRED settings a cell's spec says, by their spec field
IN_SPECS = {"frameworks": "framework", "gpus": "gpus", "precision": "precision",
            "batch_size": "batch_size", "device": "device", "image_size": "image_size",
            "steps": "steps", "warmup": "warmup_steps"}


def study_of_specs(specs, names) -> Dict[str, Any]:
    """The settings `names` as the specs of a campaign's results say them (where its campaign.json
    does not): an axis as the values its cells ran (`auto` for a searched batch), another setting
    where every cell has the one value."""
    out: Dict[str, Any] = {}
    for name in names:
        field = IN_SPECS.get(name)
        values = list(dict.fromkeys(
            "auto" if field == "batch_size" and spec.get("batch_auto") else spec.get(field)
            for spec in specs if field)) if field else []
        if not values or None in values:
            continue
        if name in ("gpus", "batch_size"):
            values = sorted(v for v in values if v != "auto") + ["auto"] * ("auto" in values)
        if name in ("frameworks", "gpus", "precision", "batch_size"):
            out[name] = values
        elif len(values) == 1:
            out[name] = values[0]
    return out


def _option_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
