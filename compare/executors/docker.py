"""Docker executor: one container per run, through the Docker SDK (no shell strings).

    compare run --executor docker --gpus 1,2 --quick

Each run gets its GPUs (device_requests), NGC's recommended IPC and ulimits, the spec (read-only)
and a per-run output folder, and runs the backend's own command() with the image's python. The
image is compare/<backend>:<version>-<cpu|gpu>-<hash> (docker_images.py); a missing one is built
first, with its progress shown. A timeout, an OOM kill, an image that does not build or a
container that does not start is a recorded result; the sweep goes on.
"""
import os
import resource
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from backends.phases import LAUNCHED_ENV
from backends.protocol import RunResult, RunSpec

from ..frameworks import Framework, get
from . import Context, Executor
from . import docker_images as images
from .base import collect, failure, now, own_env

SPEC_IN = "/compare/spec.json"  # the spec, mounted read-only
OUT_IN = "/compare/out"  # the run's output folder (result.json), mounted read-write
SHM_SIZE = "1g"  # NGC: --shm-size=1g --ulimit memlock=-1 --ulimit stack=67108864
STACK_BYTES = 64 * 1024 * 1024


def container_env(spec: RunSpec, extra: Dict[str, str]) -> Dict[str, str]:
    """The run's own variables (TF32 off for fp32, seed, ...) and `extra`; none of the host's,
    which have no business inside the image."""
    return dict(own_env(spec, images.CODE_DIR), **extra)


def gpu_ids(count: int) -> Optional[List[str]]:
    """The first `count` of the host's CUDA_VISIBLE_DEVICES, when it names GPUs; else None."""
    visible = [x.strip() for x in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if x.strip()]
    return visible[:count] if len(visible) >= count else None


def run_kwargs(spec: RunSpec, image: str, command: List[str], spec_path: Path, out_dir: Path,
               env: Dict[str, str], ids: Optional[List[str]] = None,
               user: Optional[str] = None, memlock: int = -1) -> Dict:
    """The arguments of client.containers.create() for one run (pure: tested without an engine)."""
    from docker.types import DeviceRequest, Ulimit
    kwargs = {
        "image": image, "command": list(command), "environment": dict(env),
        "volumes": {str(Path(spec_path).resolve()): {"bind": SPEC_IN, "mode": "ro"},
                    str(Path(out_dir).resolve()): {"bind": OUT_IN, "mode": "rw"}},
        "working_dir": OUT_IN,
        "ipc_mode": "host", "shm_size": SHM_SIZE,
        "ulimits": [Ulimit(name="memlock", soft=memlock, hard=memlock),
                    Ulimit(name="stack", soft=STACK_BYTES, hard=STACK_BYTES)],
        "network_mode": "host",  # Horovod/torchrun rendezvous on the host; engines without a bridge
        "privileged": False,
        "labels": {"org.compare.run_id": spec.run_id},
    }
    if user:
        kwargs["user"] = user
    if spec.device == "cuda":
        request = DeviceRequest(device_ids=list(ids), capabilities=[["gpu"]]) if ids else \
            DeviceRequest(count=spec.gpus, capabilities=[["gpu"]])
        kwargs["device_requests"] = [request]
    return kwargs


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


class DockerExecutor(Executor):
    name = "docker"

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
        self._container = None  # the running one: stopped by close() on Ctrl-C or SIGTERM
        self._build_errors: Dict[str, str] = {}  # framework -> why its image did not build

    def image(self, fw: Framework):
        """fw's image object, built first where it is missing (and not named by
        COMPARE_IMAGE_<FRAMEWORK>); docker.errors.DockerException or images.ImageError if none."""
        import docker
        name = images.wanted(fw, self.variant)
        try:
            return self.client.images.get(name)
        except docker.errors.ImageNotFound:
            if name != images.image_name(fw, self.variant):
                raise  # the user named an image: never build something else in its place
        if fw.name in self._build_errors:
            raise images.ImageError(self._build_errors[fw.name])
        self.log("image {} is not built: building it now".format(name))
        ca = os.environ.get("PIP_CERT")
        try:
            built = images.build(self.client, fw, self.variant,
                                 ca_bundle=Path(ca) if ca and Path(ca).is_file() else None,
                                 log=self.log)
        except images.ImageError as exc:
            self._build_errors[fw.name] = "image {} did not build: {}".format(name, exc)
            raise images.ImageError(self._build_errors[fw.name]) from None
        self.log("built {} in {:.0f} s".format(name, built.seconds))
        return self.client.images.get(name)

    def reap(self, campaign) -> int:
        """Remove this campaign's containers left running by a sweep that was killed (a killed
        `compare` cannot stop its container): a resumed sweep must not share the machine with
        them. Returns how many were removed."""
        stale = self._remove_labelled(campaign.root)
        if stale:
            self.log("removed {} container(s) left by an earlier, killed sweep".format(len(stale)))
        return len(stale)

    def _remove_labelled(self, root) -> list:
        """Remove every container of the campaign at `root` (its label); returns them."""
        label = "org.compare.campaign={}".format(root.resolve())
        found = self.client.containers.list(all=True, filters={"label": label})
        for container in found:
            _remove(container)
        return found

    def run(self, spec: RunSpec, campaign, timeout: float) -> RunResult:
        import docker
        started = now()
        if campaign.root not in self._reaped:
            self._reaped.add(campaign.root)
            self.reap(campaign)
        fw = get(spec.framework)
        name = images.wanted(fw, self.variant)
        try:
            image = self.image(fw)
        except images.ImageError as exc:
            return failure(spec, "failed", str(exc), started_at=started)
        except docker.errors.DockerException as exc:
            return failure(spec, "failed", "image {}: {}".format(name, _message(exc)),
                           started_at=started)
        spec_path = campaign.save_spec(spec)
        work = campaign.work_dir(spec.run_id)
        python = image.labels.get("org.compare.python", "python")
        command = fw.module().command(python, spec, SPEC_IN, OUT_IN + "/result.json")
        env = container_env(spec, {"COMPARE_EXECUTOR": self.name, "COMPARE_IMAGE": image.id,
                                   "HOME": "/tmp"})
        kwargs = run_kwargs(spec, image.id, command, spec_path, work, env, gpu_ids(spec.gpus),
                            "{}:{}".format(os.getuid(), os.getgid()), self.memlock)
        kwargs["labels"]["org.compare.campaign"] = str(campaign.root.resolve())
        kwargs["environment"][LAUNCHED_ENV] = repr(time.time())  # the container's start counts
        try:
            container = self._start(kwargs)
        except docker.errors.DockerException as exc:
            self._remove_running()
            return failure(spec, "failed", "container did not start: {}".format(_message(exc)),
                           started_at=started)
        try:
            rc, timed_out, oom_killed = self._wait(container, timeout)
            err_path = self._save_logs(container, campaign, spec.run_id)
        finally:
            self._remove_running()
        result = collect(spec, work / "result.json", rc, err_path, started, timed_out, timeout)
        if oom_killed and not timed_out and result.status == "failed":
            result = failure(spec, "oom", "the container was killed by the out-of-memory killer "
                             "(exit {})".format(rc), result.stderr_tail, started)
        result.environment.update(executor=self.name, image=name, image_id=image.id, python=python,
                                  ulimit_memlock=self.memlock)
        return result

    def close(self) -> None:
        """Remove the running container, and any other of the campaigns this executor ran: a
        stop signal may land between the engine creating a container and this process holding
        it (a signal is raised wherever the main thread is), but every container carries its
        campaign's label."""
        import docker
        self._remove_running()
        for root in self._reaped:
            try:
                self._remove_labelled(root)
            except docker.errors.DockerException as exc:
                self.log("could not check for containers left running: {}".format(_message(exc)))

    def _remove_running(self) -> None:
        if self._container is not None:
            _remove(self._container)  # kills it first: every process of the run ends
            self._container = None

    def _start(self, kwargs: Dict):
        """Create and start the container; removed again if it does not start. An engine that may
        not lift the memlock limit (no CAP_SYS_RESOURCE) gets the host's own hard limit instead."""
        import docker
        from docker.types import Ulimit
        container = self.client.containers.create(**kwargs)
        self._container = container  # from now on close() removes it (a signal during start too)
        try:
            container.start()
            return container
        except docker.errors.APIError as exc:
            self._remove_running()
            host_limit = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
            if "rlimit" not in _message(exc) or self.memlock != -1 or host_limit < 0:
                raise
            self.memlock = host_limit
            self.log("the engine may not set memlock=-1; using the host's limit {} bytes".format(
                host_limit))
            kwargs = dict(kwargs, ulimits=[u if u["Name"] != "memlock" else
                                           Ulimit(name="memlock", soft=host_limit, hard=host_limit)
                                           for u in kwargs["ulimits"]])
            return self._start(kwargs)

    def _wait(self, container, timeout: float) -> Tuple[Optional[int], bool, bool]:
        """(exit code, timed out, OOM-killed); a container past its timeout is killed."""
        import requests
        timed_out = False
        try:
            rc = container.wait(timeout=timeout)["StatusCode"]
        except requests.exceptions.RequestException:  # the read timed out: the run did not end
            timed_out = True
            container.kill()
            rc = container.wait(timeout=60)["StatusCode"]
        container.reload()
        return rc, timed_out, bool(container.attrs.get("State", {}).get("OOMKilled"))

    def _save_logs(self, container, campaign, run_id: str) -> Path:
        out_path, err_path = campaign.log_paths(run_id)
        out_path.write_bytes(container.logs(stdout=True, stderr=False))
        err_path.write_bytes(container.logs(stdout=False, stderr=True))
        return err_path
