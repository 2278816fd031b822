"""The settings a campaign holds, as they resolved (Plan.held: the device and executor `auto`
chose, the steps the defaults sized): kept in campaign.json and compared on --resume. A campaign
of an earlier compare stored none: they are read back from its results here."""
from dataclasses import fields
from typing import Any, Dict

from backends.contract import RunSpec

from .errors import UserError
from .store import shown
from .study import DECLARED, FREE, HELD, SPEC_NAMES

# the HELD settings (study.py) every cell's RunSpec carries, by their RunSpec names
SPEC_HELD = tuple(SPEC_NAMES.get(n, n) for n, s in DECLARED.items() if s.resume == HELD and
                  SPEC_NAMES.get(n, n) in {f.name for f in fields(RunSpec)})


# what a resume may change (FREE), as the resume's message lists them
FREE_FLAGS = tuple(s.flag for s in DECLARED.values() if s.resume == FREE)


def settings_of_results(results, said="--resume") -> Dict[str, Any]:
    """The settings an earlier compare's campaign (which stored none) ran with, read from its
    results: what their specs say, and the executor and --python their environment recorded.
    A UserError when two results disagree: such a campaign cannot be resumed safely. `said`: the
    resume as the message names it (`--resume DIR`, or a campaign file's key: Study.resuming)."""
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
                raise UserError("{}: the campaign stored no settings (an earlier compare made "
                                "it) and its results disagree: {} {} in {} vs {} in {}; start a new "
                                "campaign".format(said, key, shown(found[key][0]),
                                                  found[key][1], shown(value), r.run_id))
            found.setdefault(key, (value, r.run_id))
    return {k: v for k, (v, _) in found.items()}
