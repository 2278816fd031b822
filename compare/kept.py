"""What a campaign keeps of its study, read back from campaign.json (its `meta`): the study its
latest session asked, the executor its cells ran with; for a campaign of an earlier compare, which
kept no study, that study rebuilt from the RunConfig its campaign.json recorded, else from its
results' specs. Reads no file: study.build reads campaign.json once and passes it here."""
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import parsing as p
from .errors import UserError


def asked_study(meta: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """What a campaign's latest session asked (campaign.json: its study, the settings' sources),
    where it stored a study; None for a campaign of an earlier compare."""
    asked = _latest_config(meta)
    return asked if isinstance(asked, dict) and isinstance(asked.get("study"), dict) else None


def _latest_config(meta: Dict[str, Any]) -> Any:
    """campaign.json's latest session's config, whatever it holds (None where it has none)."""
    session = (meta.get("sessions") or [{}])[-1]
    return session.get("config") if isinstance(session, dict) else None


def check_latest(meta: Dict[str, Any], said: str) -> None:
    """One line where campaign.json's latest session, its config or that config's study is there
    but not an object: a hand edit or a bad copy (an earlier compare's session kept a RunConfig
    object and no study), never a campaign to rebuild as an earlier compare's. `said`: the resume
    as messages name it (`--resume DIR`, or a campaign file's key: study.resuming)."""
    session = (meta.get("sessions") or [{}])[-1]
    config = session.get("config", {}) if isinstance(session, dict) else {}
    for what, there, value in (("latest session", True, session),
                               ("latest session's config", True, config),
                               ("latest session's study", isinstance(config, dict) and "study" in config,
                                isinstance(config, dict) and config.get("study"))):
        if there and not isinstance(value, dict):
            raise UserError("{}: campaign.json is corrupt (its {} is {}, not an object); "
                            "restore it or start a new campaign".format(said, what, json_kind(value)))


def json_kind(value: Any) -> str:
    """What a JSON value is, in words: a list, a string, a number, true, null."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return {list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), "an object")


def ran_with(meta: Dict[str, Any]) -> Optional[str]:
    """The executor a campaign's cells ran with (campaign.json `meta`'s settings), whatever
    --executor asked for."""
    settings = meta.get("settings")
    return settings.get("executor") if isinstance(settings, dict) else None


def rebuilt(meta: Dict[str, Any], said: str, given, specs: Callable[[], List[Dict[str, Any]]],
            flag: Callable[[str], str]) -> Dict[str, Any]:
    """The study of a campaign of an earlier compare (`meta`: its campaign.json, which kept no
    study) from its RunConfig, then from its results' `specs()` for what that does not say; what
    neither says and is not `given` now is one line naming each `flag(setting)` to give. Where
    nothing ran and its config says nothing, today's flags and defaults hold, as a new one's.
    `said`: the resume as messages name it (check_latest)."""
    config = _latest_config(meta)
    config = config if isinstance(config, dict) else {}
    shapes = [(key, config.get(key), kind) for key, kind in SHAPES.items()] + [  # each of its JSON
        ("options." + k, v, dict) for k, v in dict(config.get("options") or {}).items()  # type
    ] * isinstance(config.get("options"), dict)
    for key, value, kind in shapes:  # what study_of_config reads of it
        if value is not None and not isinstance(value, kind):
            raise UserError("{}: campaign.json is corrupt (its latest session's config, of an "
                            "earlier compare, has {} {}, not {}); restore it or start a new "
                            "campaign".format(said, key, json_kind(value), "a list" if kind is list
                                              else "an object"))
    study, missing = study_of_config(config)
    missing, ran = [n for n in missing if n not in given], []
    if missing:  # what its results' specs say (the cells it ran)
        ran = specs()
        study.update(study_of_specs(ran, missing))
        missing = [n for n in missing if n not in study]
    if missing and (ran or set(config) & set(OLD_KEYS)):
        raise UserError("{}: the campaign was made by an earlier compare, which stored no "
                        "study, and its campaign.json does not say its {}; give {} as the campaign "
                        "was made".format(said, ", ".join(missing), " ".join(map(flag, missing))))
    return study


# an earlier compare's `config` (its RunConfig) key -> the setting it is now; each key it lacks is
# the declared default where that compare had no such flag yet, else REQUIRED
OLD_NAMES = {"frameworks": "frameworks", "gpus": "gpus", "precisions": "precision",
             "batch_sizes": "batch_size", "device": "device", "repeats": "repeats",
             "timeout": "timeout", "nodes": "nodes", "data": "data", "data_only": "data_only",
             "models": "model", "modes": "mode", "executor": "executor", "concurrency": "concurrency",
             "executor_flags": "executor_flags"}
OLD_COMMON = {"image_size": "image_size", "steps": "steps", "warmup_steps": "warmup",
              "windows": "windows", "compile": "compile"}
# the parts of a RunConfig study_of_config reads whole, by their JSON type (each may be null)
SHAPES = {"common": dict, "python": dict, "options": dict, "model_batches": dict, "image_sizes": dict,
          "batch_search": list}
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
    out["option"] = ["{}.{}={}".format(fw, k, p.as_text(v)) for fw, given in
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
