"""Docker executor: one container per run, through the Docker SDK (no shell strings).

    compare run --executor docker --gpus 1,2 --quick

Each run gets its GPUs (device_requests), NGC's recommended IPC and ulimits, the spec (read-only),
a per-run output folder and, for real data, the data folder and its prepared side (read-only, at
the folder's own path), and runs the backend's own command() with the image's python. Native data
formats are written before the sweep by the backend's writer in the same image. The
image is compare/<backend>:<version>-<cpu|gpu>-<hash> (docker_images.py); a missing one is built
first, with its progress shown. A timeout, an OOM kill, an image that does not build or a
container that does not start is a recorded result; the sweep goes on.
"""
import os
import resource
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from backends.contract import LAUNCHED_ENV, RunSpec, visible_gpus
from backends.contract.rules import EXIT_GRACE_ENV
from backends.contract.shared import COMPILE_CACHE_ENV, HOST_LOCK_ENV, dataset

from .. import datasets, files, formats
from ..errors import UserError
from ..frameworks import Framework, get
from ..resources import cpuset
from . import docker_images as images
from .base import Attempt, Context, Executor, Handle, Refused
from .processes import own_env
from .results import Outcome

SPEC_IN = "/compare/spec.json"  # the spec, mounted read-only
OUT_IN = "/compare/out"  # the run's output folder (result.json), mounted read-write
CACHE_IN = "/compare/cache"  # COMPARE_CACHE inside: the prepared side of a read-only data folder
COMPILE_CACHE_IN = "/compare/compile-cache"  # the host's compile caches, mounted read-write
LIFELINE_IN = "/compare/campaign-lock"  # the campaign folder, read-only: its flock is compare's
# NGC: --ipc=host --ulimit memlock=-1 --ulimit stack=67108864. Host IPC gives the containers the
# host's /dev/shm, which loader workers pass batches through (Docker's own is 64 MB; --shm-size
# does nothing beside --ipc=host), so its size is what a run records (shm_bytes)
STACK_BYTES = 64 * 1024 * 1024
# paths a run needs inside the image: a data folder mounted at its own path must not hide them
NEEDED_INSIDE = ("/tmp", "/usr", "/etc", "/bin", "/lib", "/opt/venv", images.CODE_DIR, "/compare",
                 "/dev", "/proc", "/sys")


def container_env(spec: RunSpec, extra: Dict[str, str]) -> Dict[str, str]:
    """The run's own variables (TF32 off for fp32, seed, ...) and `extra`; none of the host's,
    which have no business inside the image, but compare's own settings of its launchers (the
    processes launcher's grace, as a local run's inherits it and a Slurm job's srun is handed it)."""
    passed = {k: os.environ[k] for k in (EXIT_GRACE_ENV,) if k in os.environ}
    return dict(own_env(spec, images.CODE_DIR), **passed, **extra)


def gpu_ids(count: int) -> Optional[List[str]]:
    """The first `count` of the host's CUDA_VISIBLE_DEVICES, when it names GPUs; else None."""
    visible = visible_gpus() or []
    return visible[:count] if len(visible) >= count else None


def shm_bytes() -> Optional[int]:
    """The size of /dev/shm, the host's, which host IPC gives every container."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return st.f_blocks * st.f_frsize


def bind(mounts: List[datasets.Mount]) -> List:
    from docker.types import Mount
    return [Mount(m.container, m.host, type="bind", read_only=m.read_only) for m in mounts]


def run_kwargs(spec: RunSpec, image: str, command: List[str], spec_path: Path, out_dir: Path,
               env: Dict[str, str], ids: Optional[List[str]] = None,
               user: Optional[str] = None, memlock: int = -1,
               mounts: List[datasets.Mount] = (), cpus: Optional[str] = None) -> Dict:
    """The arguments of client.containers.create() for one run (pure: tested without an engine).
    ids: the GPUs it gets; cpus: the cores it is pinned to ('0-15'), when cells share the host."""
    from docker.types import DeviceRequest, Ulimit
    kwargs = {
        "image": image, "command": list(command), "environment": dict(env),
        "volumes": {str(Path(spec_path).resolve()): {"bind": SPEC_IN, "mode": "ro"},
                    str(Path(out_dir).resolve()): {"bind": OUT_IN, "mode": "rw"}},
        "working_dir": OUT_IN,
        "ipc_mode": "host",
        "ulimits": [Ulimit(name="memlock", soft=memlock, hard=memlock),
                    Ulimit(name="stack", soft=STACK_BYTES, hard=STACK_BYTES)],
        "network_mode": "host",  # Horovod/torchrun rendezvous on the host; engines without a bridge
        "privileged": False,
        "labels": {"org.compare.run_id": spec.run_id},
    }
    if user:
        kwargs["user"] = user
    if mounts:
        kwargs["mounts"] = bind(mounts)
    if cpus:
        kwargs["cpuset_cpus"] = cpus
    if spec.device == "cuda":
        request = DeviceRequest(device_ids=list(ids), capabilities=[["gpu"]]) if ids else \
            DeviceRequest(count=spec.gpus, capabilities=[["gpu"]])
        kwargs["device_requests"] = [request]
    return kwargs


def _mount_compile_cache(kwargs: Dict) -> None:
    """The host's compile caches (backends/caches.py) mounted read-write, so that a container's
    compilation outlives it as a local run's does."""
    from .. import envs
    host = envs.cache_dir() / "compile"
    host.mkdir(parents=True, exist_ok=True)
    kwargs["volumes"][str(host)] = {"bind": COMPILE_CACHE_IN, "mode": "rw"}
    kwargs["environment"][COMPILE_CACHE_ENV] = COMPILE_CACHE_IN


def _mount_lifeline(kwargs: Dict, campaign) -> None:
    """The campaign folder, read-only, where its workers watch the flock this compare holds on it
    (backends/lifeline.py): a container is not compare's child, and must not train on for hours
    after a SIGKILL of compare. Only while this process holds the lock: else none to watch."""
    if campaign.locked:
        kwargs["volumes"][str(campaign.root.resolve())] = {"bind": LIFELINE_IN, "mode": "ro"}
        kwargs["environment"][HOST_LOCK_ENV] = LIFELINE_IN


def data_mounts(spec: RunSpec) -> Tuple[List[datasets.Mount], Dict[str, str]]:
    """(mounts, environment) of a real-data run: its folder and prepared side, read-only (the
    formats were written before the sweep); none for synthetic data. DataError: not prepared."""
    if spec.data == "synthetic":
        return [], {}
    return datasets.mounts(dataset.Prepared.find(spec.data), CACHE_IN)


class ImageWriter(formats.Writer):
    """The native formats of --data folders, written by each backend's writer in its image."""

    def __init__(self, executor: "DockerExecutor"):
        self.executor = executor

    def where(self, fw: Framework) -> str:
        return "in image " + images.wanted(fw, self.executor.variant)

    def __call__(self, fw, prepared_path, err, on_line) -> int:
        return self.executor.write_format(fw, prepared_path, err, on_line)


def _remove(container) -> None:
    """Kill and remove a container; one already gone, or going, is fine (a stop signal can
    interrupt a removal after the engine did it)."""
    import docker
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "already in progress" not in _message(exc):
            raise


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "explanation", None) or exc).strip()


def _save_log(container, path: Path, campaign: Path, **which: bool) -> None:
    """One of a finished container's logs into the campaign, chunk by chunk as the engine sends
    it: a run may have logged gigabytes, which compare must not hold in memory at once."""
    try:
        with files.new_file(path, campaign) as out:
            for chunk in container.logs(stream=True, follow=False, **which):
                out.buffer.write(chunk)
    except OSError as exc:  # a full disk: one line, as files.write_bytes says it
        raise files.os_error(exc, path) from None


class Container(Handle):
    """A run's container: waited for up to the run's timeout (then killed), its output saved into
    the campaign's logs; stop() removes it (killing it first: every process of the run ends)."""

    def __init__(self, container, log_paths: Tuple[Path, Path]):
        self.container, self.log_paths, self.removed = container, log_paths, False

    def wait(self, timeout: float) -> Outcome:
        import requests
        container, timed_out = self.container, False
        try:
            rc = container.wait(timeout=timeout)["StatusCode"]
        except requests.exceptions.RequestException:  # the read timed out: the run did not end
            timed_out = True
            container.kill()
            rc = container.wait(timeout=60)["StatusCode"]
        container.reload()
        out_path, err_path = self.log_paths
        campaign = out_path.parent.parent  # logs/ is the campaign's: nothing written through a link
        _save_log(container, out_path, campaign, stdout=True, stderr=False)
        _save_log(container, err_path, campaign, stdout=False, stderr=True)
        oom = container.attrs.get("State", {}).get("OOMKilled")
        return Outcome(exit_code=rc, timed_out=timed_out, oom_killed="the container was killed by "
                       "the out-of-memory killer (exit {})".format(rc) if oom else "")

    def stop(self) -> None:
        if not self.removed:
            _remove(self.container)
            self.removed = True


class DockerExecutor(Executor):
    name = "docker"
    capabilities = frozenset({"real_data", "gpus"})  # the folder is mounted (data_mounts)

    @classmethod
    def available(cls, ctx: Context) -> Tuple[bool, str]:
        """An engine must answer. `auto` also wants every image built already (a build can take
        minutes); `--executor docker` builds the missing ones itself."""
        if ctx.overrides:
            return False, "--python names interpreters, which run outside containers"
        client, why = images.engine()
        if client is None:
            return False, why
        variant = images.variant_of(ctx.device)
        missing = images.missing(client, ctx.frameworks, variant)
        if not missing:
            return True, "the Docker engine answers and the {} images are built".format(variant)
        names = ", ".join(missing) + (" is" if len(missing) == 1 else " are")
        if ctx.requested == cls.name:
            return True, "the Docker engine answers; {} not built yet and will be built first".format(
                names)
        return False, "the Docker engine answers but {} not built (compare images build{})".format(
            names, " --cpu" if variant == "cpu" else "")

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.client = images.client()
        self.variant = images.variant_of(ctx.device)
        self.log = ctx.log
        self.memlock = -1  # NGC: unlimited; lowered once if the engine may not lift it
        # campaigns this executor ran: cleared of a killed sweep's containers at their first run,
        # and of any container of theirs again by close()
        self._reaped = set()
        self._writer = None  # a format writer's container: removed by close() on Ctrl-C or SIGTERM
        self._build_errors: Dict[str, str] = {}  # framework -> why its image did not build
        self._stopping = threading.Event()  # close() was called: no build goes on

    def image(self, fw: Framework):
        """fw's image object, built first where it is missing (and not named by
        COMPARE_IMAGE_<FRAMEWORK>); docker.errors.DockerException or images.ImageError if none."""
        import docker
        name = images.wanted(fw, self.variant)
        try:
            return self.client.images.get(name)
        except docker.errors.ImageNotFound:
            if name != images.image_name(fw, self.variant):  # the user named an image: never
                variable = "COMPARE_IMAGE_" + fw.name.upper()  # build another in its place
                raise images.ImageError(
                    "image {} ({}) is not on this Docker engine: pull or build it (docker images "
                    "lists those there), or unset {} to run compare's own".format(
                        name, variable, variable)) from None
        if fw.name in self._build_errors:
            raise images.ImageError(self._build_errors[fw.name])
        self.log("image {} is not built: building it now".format(name))
        ca = os.environ.get("PIP_CERT")
        ca = Path(ca) if ca and Path(ca).is_file() else None
        wheelhouse = images.default_wheelhouse()
        try:
            try:
                built = images.build(self.client, fw, self.variant, wheelhouse=wheelhouse,
                                     ca_bundle=ca, log=self.log, stop=self._stopping.is_set)
            except images.ImageError as exc:
                if wheelhouse is None or self._stopping.is_set():
                    raise
                self.log("image {} did not build from the wheelhouse {} ({}); building it from "
                         "the package index".format(name, wheelhouse, str(exc).splitlines()[-1]))
                built = images.build(self.client, fw, self.variant, ca_bundle=ca, log=self.log,
                                     stop=self._stopping.is_set)
        except images.ImageError as exc:
            self._build_errors[fw.name] = "image {} did not build: {}".format(name, exc)
            raise images.ImageError(self._build_errors[fw.name]) from None
        self.log("built {} in {:.0f} s".format(name, built.seconds))
        return self.client.images.get(name)

    def _image_or(self, fw: Framework, error: Callable[[str], Exception]):
        """fw's image (self.image), or `error` raised saying why there is none."""
        import docker
        try:
            return self.image(fw)
        except images.ImageError as exc:
            raise error(str(exc)) from None
        except docker.errors.DockerException as exc:
            raise error("image {}: {}".format(images.wanted(fw, self.variant), _message(exc))) from None

    def reap(self, campaign) -> None:
        """Remove this campaign's containers left running by a sweep that was killed (a killed
        `compare` cannot stop its container): a resumed sweep must not share the machine with
        them."""
        stale = self._remove_labelled(campaign.root)
        if stale:
            self.log("removed {} container(s) left by an earlier, killed sweep".format(len(stale)))

    def _remove_labelled(self, root) -> list:
        """Remove every container of the campaign at `root` (its label); returns them."""
        label = "org.compare.campaign={}".format(root.resolve())
        # a container removed between the engine's list and its inspect is not an error: it is gone
        found = self.client.containers.list(all=True, filters={"label": label}, ignore_removed=True)
        for container in found:
            _remove(container)
        return found

    def reap_once(self, campaign) -> None:
        self._reaped.add(campaign.root)  # close() removes every container of these campaigns
        super().reap_once(campaign)

    def environment(self, attempt: Attempt) -> None:
        """The framework's image (built first where it is missing), the python it names, and a
        real-data run's folders to mount."""
        fw = get(attempt.spec.framework)
        name = images.wanted(fw, self.variant)
        with self.ctx.lock:  # cells starting at once build a missing image once, not twice
            image = self._image_or(fw, lambda why: Refused("failed", why))
        try:
            attempt.notes["mounts"], attempt.notes["data_env"] = data_mounts(attempt.spec)
        except dataset.DataError as exc:
            raise Refused("failed", str(exc)) from None
        mounts = attempt.notes["mounts"]
        attempt.python = image.labels.get("org.compare.python", "python")
        attempt.record = dict(image=name, image_id=image.id, python=attempt.python)
        if mounts:
            attempt.record["data_mounts"] = [m.record() for m in mounts]

    def stage(self, attempt: Attempt) -> None:
        super().stage(attempt)
        attempt.spec_path, attempt.result_path = SPEC_IN, OUT_IN + "/result.json"  # its mounts

    def launch(self, attempt: Attempt) -> None:
        import docker
        spec, campaign, slot, mounts = attempt.spec, attempt.campaign, attempt.slot, attempt.notes["mounts"]
        env = container_env(spec, dict(attempt.notes["data_env"], COMPARE_EXECUTOR=self.name,
                                       COMPARE_IMAGE=attempt.record["image_id"], HOME="/tmp"))
        kwargs = run_kwargs(spec, attempt.record["image_id"], attempt.command,
                            campaign.spec_path(spec.run_id), attempt.work, env,
                            list(slot.gpus) if slot and slot.gpus else gpu_ids(spec.gpus),
                            "{}:{}".format(os.getuid(), os.getgid()), self.memlock, mounts,
                            cpuset(slot.cores) if slot and slot.cores else None)
        _mount_compile_cache(kwargs)
        _mount_lifeline(kwargs, campaign)
        kwargs["labels"]["org.compare.campaign"] = str(campaign.root.resolve())
        kwargs["environment"][LAUNCHED_ENV] = repr(time.time())  # the container's start counts
        try:
            self._start(kwargs, lambda container: setattr(attempt, "handle", Container(
                container, campaign.log_paths(spec.run_id))))
        except docker.errors.DockerException as exc:
            raise Refused("failed", "container did not start: {}".format(_message(exc))) from None
        attempt.record.update(ulimit_memlock=self.memlock, ipc_mode=kwargs["ipc_mode"],
                              shm_bytes=shm_bytes())

    # --- real data: formats written in the image before the sweep, folders checked ----------

    def data_writer(self) -> formats.Writer:
        return ImageWriter(self)

    def check_data(self, prepared: List[dataset.Prepared]) -> None:
        """A folder mounted at its own path must not hide what the run needs inside the image."""
        for p in prepared:
            hidden = [h for h in NEEDED_INSIDE if (h + "/").startswith(p.root.rstrip("/") + "/")]
            if hidden:
                raise UserError("--data {}: the docker executor mounts the folder at its own path, "
                                "where it would hide {} inside the containers; copy or bind-mount "
                                "it elsewhere (e.g. /data/imagenet)".format(p.root, hidden[0]))

    def write_format(self, fw: Framework, prepared_path: str, err, on_line) -> int:
        """Run fw's format writer in fw's image: the folder read-only, its prepared side
        read-write (the only mount a container of compare writes data into)."""
        import docker
        image = self._image_or(fw, formats.WriterError)
        mounts, data_env = datasets.mounts(dataset.Prepared(prepared_path), CACHE_IN, write=True)
        inside = next(m.container for m in mounts if m.host == prepared_path)
        python = image.labels.get("org.compare.python", "python")
        kwargs = {"image": image.id, "command": formats.writer_command(fw, python, inside),
                  "environment": dict(data_env, PYTHONPATH=images.CODE_DIR, PYTHONUNBUFFERED="1",
                                      HOME="/tmp"),
                  "mounts": bind(mounts), "user": "{}:{}".format(os.getuid(), os.getgid()),
                  "working_dir": "/tmp", "network_mode": "host",
                  "labels": {"org.compare.writer": fw.name}}
        try:
            container = self._start(kwargs, lambda c: setattr(self, "_writer", c))
            pending = ""
            for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=False):
                *lines, pending = (pending + chunk.decode(errors="replace")).split("\n")
                for line in lines:
                    on_line(line)
            rc = container.wait()["StatusCode"]
            err.write(container.logs(stdout=False, stderr=True).decode(errors="replace"))
        except docker.errors.DockerException as exc:
            raise formats.WriterError("the writer's container in {}: {}".format(
                images.wanted(fw, self.variant), _message(exc))) from None
        finally:
            self._remove_writer()
        return rc

    def close(self) -> None:
        """Remove the running container, and any other of the campaigns this executor ran: a
        stop signal may land between the engine creating a container and this process holding
        it (a signal is raised wherever the main thread is), but every container carries its
        campaign's label."""
        import docker
        self._stopping.set()  # an image being built for a cell stops within a second
        super().close()
        self._remove_writer()
        for root in self._reaped:
            try:
                self._remove_labelled(root)
            except docker.errors.DockerException as exc:
                self.log("could not check for containers left running: {}".format(_message(exc)))

    def _remove_writer(self) -> None:
        if self._writer is not None:
            _remove(self._writer)
            self._writer = None

    def _start(self, kwargs: Dict, hold: Callable[[object], None]):
        """Create and start a container, handed to hold() as soon as it exists (so that close()
        removes it, a signal during its start too); removed again if it does not start. An engine
        that may not lift the memlock limit (no CAP_SYS_RESOURCE) gets the host's own hard limit
        instead."""
        import docker
        from docker.types import Ulimit
        container = self.client.containers.create(**kwargs)
        hold(container)
        try:
            container.start()
            return container
        except docker.errors.APIError as exc:
            _remove(container)
            host_limit = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
            if "rlimit" not in _message(exc) or self.memlock != -1 or host_limit < 0:
                raise
            self.memlock = host_limit
            self.log("note: Docker may not lift the limit on memory a container can pin (locked "
                     "memory, which NGC images ask to be unlimited for fast GPU copies); running "
                     "with this machine's own limit, {:.0f} MiB, instead".format(host_limit / 2 ** 20))
            kwargs = dict(kwargs, ulimits=[u if u["Name"] != "memlock" else
                                           Ulimit(name="memlock", soft=host_limit, hard=host_limit)
                                           for u in kwargs["ulimits"]])
            return self._start(kwargs, hold)
