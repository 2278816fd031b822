"""The contract between the host (`compare/`) and a backend running in its own environment.

Standard library only, Python >= 3.8: this module is imported inside foreign containers.
A RunSpec goes in as a JSON file; a RunResult comes out as a JSON file, written atomically.
"""
import datetime
import hashlib
import json
import os
import tempfile
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional

SCHEMA_VERSION = 1

# not_converged: a time-to-accuracy run that trained --max-epochs without reaching its target
# (a finished cell, with the best accuracy it reached); never a throughput run's status
STATUSES = ("ok", "failed", "oom", "timeout", "unsupported", "skipped", "not_converged")
# what a run measures: images/sec over timed steps, or the time to a target top-1 accuracy
KINDS = ("throughput", "accuracy")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
DEVICES = ("cpu", "cuda")
# how a framework is run (docs/modes.md): as a plain script of it would, or its documented fastest
# way (the switches each backend declares in MODES, the best batch); verdicts stay within a mode
MODES = ("default", "tuned")
# RunSpec fields that do not change the measured number (batch_auto: the batch it chose does)
NOT_SETTINGS = ("repeat", "nonce", "batch_auto", "search", "planned_steps")
DEFAULT_MODEL = "resnet50"  # backends/networks.py lists the others


def utc_now() -> str:
    """The time now, as results and campaign files record it: UTC, ISO 8601, to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class SchemaError(ValueError):
    """A spec or result file that is not ours, is corrupt, or has another schema version."""


class Unsupported(Exception):
    """Raised by a backend when the device or framework cannot run what the spec asks for.

    The harness records it as status `unsupported` with this message as the reason.
    """


def data_mode(spec: Dict[str, Any]) -> str:
    """A stored spec's data mode (RunSpec.data_mode): the field where the spec has it, else made
    from `data` and `data_only` as RunSpec makes it (a spec written before the field)."""
    if spec.get("data_mode"):
        return spec["data_mode"]
    if spec.get("data", "synthetic") == "synthetic":
        return "synthetic"
    return "data-only" if spec.get("data_only") else "real"


@dataclass
class RunSpec:
    """One cell of the benchmark matrix: what a backend must train and measure."""

    framework: str  # registry name, e.g. "caffe2"
    backend: str  # python package under backends/, e.g. "caffe2_torch"
    gpus: int = 1  # workers per node: GPUs on cuda, processes (or contexts) on cpu
    nodes: int = 1  # machines (a Slurm allocation); world = gpus * nodes
    device: str = "cpu"  # "cpu" or "cuda"
    precision: str = "fp32"  # one of PRECISIONS
    batch_size: int = 32  # per worker
    image_size: int = 224
    num_classes: int = 1000
    model: str = DEFAULT_MODEL
    data: str = "synthetic"  # or the absolute path of an ImageNet-layout JPEG folder
    data_only: bool = False  # with a folder: time the input pipeline alone, no training
    warmup_steps: int = 10
    steps: int = 50  # timed steps, split into `windows` windows
    windows: int = 5
    repeat: int = 0  # index of this repeat of the cell
    seed: int = 1234
    compile: bool = False
    learning_rate: float = 0.01
    momentum: float = 0.9
    options: Dict[str, Any] = field(default_factory=dict)  # backend-specific switches
    mode: str = "default"  # one of MODES; its switches are already in options (and compile)
    batch_auto: bool = False  # batch_size was chosen by a batch search (compare/batchsearch.py)
    probe: bool = False  # a short run of a batch search: recorded as a probe, never as a cell
    # an auto cell whose search runs in its own process (backends/batchprobe.py): {"bounds":
    # [MIN, MAX], "budget_s": s[, "images": n]}; batch_size is where it starts, then the batch it
    # chose; `images`: what the cell's timed steps must cover should it choose a smaller batch
    search: Optional[Dict[str, Any]] = None
    # an auto cell whose search ended below its start and so times more steps than planned, to
    # time the images planned (backends/batchprobe.py: steps_covering): the steps of the cell as
    # planned, which its hash keeps (one cell whichever batch, and so steps, its search chose)
    planned_steps: Optional[int] = None
    # time to accuracy (docs/accuracy.md): train on data/train, evaluate top-1 on data/val every
    # eval_every epochs until target_accuracy (0 < t <= 1) or max_epochs; None: a throughput run
    target_accuracy: Optional[float] = None
    max_epochs: int = 10
    eval_every: int = 1
    # set by the host for each attempt; the result must echo it, so a late result of a process
    # left over from an earlier attempt is never taken for this attempt's
    nonce: str = ""

    @property
    def run_id(self) -> str:
        """e.g. caffe2-fp16-g2-b256-s224-r0; a model other than the default is named after the
        framework, a searched batch is `bauto`, a mode other than default and a probe of a search
        are named at the end: ResNet-50 ids at defaults stay what they always were."""
        return "{}-{}{}-{}{}{}-b{}-s{}{}{}{}-{}".format(
            self.framework, "" if self.model == DEFAULT_MODEL else self.model + "-",
            self.precision, "n{}x".format(self.nodes) if self.nodes > 1 else "",
            "g" if self.device == "cuda" else "w", self.gpus,
            "auto" if self.batch_auto and not self.probe else self.batch_size, self.image_size,
            "" if self.data_mode == "synthetic" else "-" + self.data_mode.replace("-", ""),
            "" if self.kind == "throughput" else "-tta",
            "" if self.mode == "default" else "-" + self.mode,
            "probe" if self.probe else "r{}".format(self.repeat))

    @property
    def kind(self) -> str:
        """throughput (images/sec over timed steps) or accuracy (time to a target accuracy)."""
        return "throughput" if self.target_accuracy is None else "accuracy"

    @property
    def run_seed(self) -> int:
        """The seed this run trains with: the spec's for a throughput run (its repeats measure the
        same thing); for time to accuracy a different, recorded one per repeat, as MLPerf's runs."""
        return self.seed if self.kind == "throughput" else self.seed + 1000 * self.repeat

    @property
    def data_mode(self) -> str:
        """synthetic (on-device random tensors), real (a folder through the framework's own
        pipeline) or data-only (that pipeline alone, no training: its ceiling)."""
        return data_mode({"data": self.data, "data_only": self.data_only})

    @property
    def spec_hash(self) -> str:
        """A hash of every field that changes the measured number: all but the repeat index and the
        attempt's nonce. Results with different hashes are never one cell. Fields at their default
        are left out, so a field added later (at its default) changes no existing hash, and a
        campaign resumed with newer code still matches the backend code staged in it."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.planned_steps is not None and not self.probe:
            values["steps"] = self.planned_steps
        settings = {f.name: values[f.name] for f in fields(self)
                    if f.name not in NOT_SETTINGS and values[f.name] != _default(f)}
        if self.batch_auto and not self.probe:  # one cell whichever batch its search chose
            settings["batch_size"] = "auto"
        text = json.dumps(settings, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def world_size(self) -> int:
        """Workers in the whole job: per node times nodes."""
        return self.gpus * self.nodes

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.world_size

    def validate(self) -> None:
        if self.precision not in PRECISIONS:
            raise SchemaError("precision {!r}; valid: {}".format(self.precision, ", ".join(PRECISIONS)))
        if self.device not in DEVICES:
            raise SchemaError("device {!r}; valid: {}".format(self.device, ", ".join(DEVICES)))
        if self.mode not in MODES:
            raise SchemaError("mode {!r}; valid: {}".format(self.mode, ", ".join(MODES)))
        for name in ("gpus", "nodes", "batch_size", "steps", "windows"):
            if getattr(self, name) < 1:
                raise SchemaError("{} must be >= 1, got {}".format(name, getattr(self, name)))
        if self.image_size < 32:
            raise SchemaError("image_size must be >= 32, got {}".format(self.image_size))
        if self.data_only and self.data == "synthetic":
            raise SchemaError("data_only measures an input pipeline: it needs data = a folder")
        if self.target_accuracy is not None:
            if not 0 < self.target_accuracy <= 1:
                raise SchemaError("target_accuracy must be in (0, 1], got {}".format(
                    self.target_accuracy))
            if self.data == "synthetic" or self.data_only:
                raise SchemaError("target_accuracy trains on a folder: it needs data = a folder "
                                  "with train/ and val/, and no data_only")
            for name in ("max_epochs", "eval_every"):
                if getattr(self, name) < 1:
                    raise SchemaError("{} must be >= 1, got {}".format(name, getattr(self, name)))

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["schema_version"] = SCHEMA_VERSION
        d["run_id"] = self.run_id
        d["data_mode"] = self.data_mode
        d["spec_hash"] = self.spec_hash
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "RunSpec":
        _check_version(d, "spec")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class RunResult:
    """What one run measured, or why it measured nothing. One flat record per run."""

    run_id: str
    status: str
    spec: Dict[str, Any]
    reason: Optional[str] = None  # why not ok: error text, unsupported reason
    images_per_sec: Optional[float] = None  # global: global batch * timed steps / timed wall time
    window_images_per_sec: List[float] = field(default_factory=list)
    median_images_per_sec: Optional[float] = None
    uncertainty: Optional[float] = None  # std / sqrt(n) of the window figures
    jitter: Optional[float] = None  # 1.4826 * MAD of the window figures
    step_time_ms: Optional[float] = None
    timed_steps: Optional[int] = None
    wall_time_s: Optional[float] = None
    global_batch: Optional[int] = None
    world_size: Optional[int] = None
    first_loss: Optional[float] = None
    final_loss: Optional[float] = None
    distribution: Optional[str] = None  # ddp | horovod | mirrored | kvstore | single
    framework_version: Optional[str] = None
    device_name: Optional[str] = None
    settings: Dict[str, Any] = field(default_factory=dict)  # what the backend switched on
    environment: Dict[str, Any] = field(default_factory=dict)  # python, host, versions, image
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    stderr_tail: Optional[str] = None  # filled by the executor when a run fails
    # GPU power/util/memory/clocks/temperature over the timed region (backends/telemetry.py);
    # its figures are null, not zero, where nothing was sampled (CPU, no NVML). {} in old files.
    telemetry: Dict[str, Any] = field(default_factory=dict)
    # named moments of the run as Unix times (backends/phases.py); {} in old files
    phases: Dict[str, float] = field(default_factory=dict)
    nonce: Optional[str] = None  # echoed from the spec the backend was given (None in old files)
    spec_hash: Optional[str] = None  # RunSpec.spec_hash of that spec, as given (None in old files)
    # a time-to-accuracy run (docs/accuracy.md): target, reached, best, epochs, epochs_to_target,
    # time_to_train_s (run_start -> run_stop), init_s, compile_s, evals [{epoch, accuracy, time_s}],
    # epoch_images_per_sec, seed, recipe, mllog (its MLPerf log's file name); {} for throughput
    accuracy: Dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise SchemaError("status {!r}; valid: {}".format(self.status, ", ".join(STATUSES)))

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "RunResult":
        _check_version(d, "result")
        known = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in d.items() if k in known})
        except TypeError as exc:
            raise SchemaError("result is missing fields: {}".format(exc))


def _default(f: Any) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING  # a required field: always part of the hash


def _check_version(d: Any, what: str) -> None:
    if not isinstance(d, dict):
        raise SchemaError("{} is not a JSON object".format(what))
    version = d.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SchemaError("{} has schema_version {!r}; this compare reads version {}".format(
            what, version, SCHEMA_VERSION))


def write_json_atomic(path: str, data: Dict[str, Any]) -> None:
    """Write to a temp file in the same folder, then rename: readers never see half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; readable like any file we write
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    try:  # Linux >= 4.7 says it without changing it
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _read(path: str) -> Dict[str, Any]:
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError as exc:
        raise SchemaError("{}: not valid JSON ({})".format(path, exc))


def read_spec(path: str) -> RunSpec:
    return RunSpec.from_dict(_read(path))


def write_spec(path: str, spec: RunSpec) -> None:
    write_json_atomic(path, spec.to_dict())


def read_result(path: str) -> RunResult:
    try:
        return RunResult.from_dict(_read(path))
    except SchemaError as exc:
        raise SchemaError("{}: {}".format(path, exc)) if path not in str(exc) else exc


def write_result(path: str, result: RunResult) -> None:
    write_json_atomic(path, result.to_dict())
