"""Docker executor: one container per run, through the Docker SDK (no shell strings).

    compare run --executor docker --frameworks tf,mxnet,caffe2 --gpus 1,2 --quick

Each run gets its GPUs (device_requests), NGC's recommended IPC and ulimits, the spec (read-only)
and a per-run output folder, and runs the backend's own command() with the image's python. The
image is compare/<backend>:<version>-<cpu|gpu>-<hash> (compare/images.py). A timeout, an OOM
kill, a missing image or a container that does not start is a recorded result; the sweep goes on.
"""
import os
import resource
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from backends.protocol import RunResult, RunSpec

from .. import frameworks, images
from ..errors import UserError
from ..store import Campaign
from .base import collect, failure, now
from .local import run_env

SPEC_IN = "/compare/spec.json"  # the spec, mounted read-only
OUT_IN = "/compare/out"  # the run's output folder (result.json), mounted read-write
SHM_SIZE = "1g"  # NGC: --shm-size=1g --ulimit memlock=-1 --ulimit stack=67108864
STACK_BYTES = 64 * 1024 * 1024
EXECUTORS = ("auto", "local", "docker")
OWN_ENV = ("PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONHASHSEED", "NVIDIA_TF32_OVERRIDE")


def container_env(spec: RunSpec, extra: Dict[str, str]) -> Dict[str, str]:
    """The run's environment as the local executor decides it (TF32 off for fp32, seed, ...),
    minus the host's own variables, which have no business inside the image."""
    env = run_env(spec, Path(images.CODE_DIR), extra)
    return {k: v for k, v in env.items() if k in OWN_ENV or k in extra}


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


def choose(requested: str, fws: List[frameworks.Framework], device: str,
           overrides: Dict[str, str]) -> Tuple[str, str]:
    """(executor name, why): docker when an engine answers and the images are built, else local."""
    if requested not in EXECUTORS:
        raise UserError("unknown executor {!r}; choose from {}".format(requested, ", ".join(EXECUTORS)))
    if requested == "local":
        return "local", "--executor local"
    client, why = images.engine()
    if requested == "docker":
        if client is None:
            raise UserError("--executor docker: {}; use --executor local".format(why))
        return "docker", "--executor docker"
    if overrides:
        return "local", "--python names interpreters, which run outside containers"
    if client is None:
        return "local", why
    variant = images.variant_of(device)
    missing = images.missing(client, fws, variant)
    if missing:
        return "local", "the Docker engine answers but {} not built (compare images build{})".format(
            ", ".join(missing) + (" is" if len(missing) == 1 else " are"),
            " --cpu" if variant == "cpu" else "")
    return "docker", "the Docker engine answers and the {} images are built".format(variant)


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "explanation", None) or exc).strip()


class DockerExecutor:
    name = "docker"

    def __init__(self, device: str, log: Callable[[str], None] = lambda s: None):
        self.client = images.client()
        self.variant = images.variant_of(device)
        self.log = log
        self.memlock = -1  # NGC: unlimited; lowered once if the engine may not lift it
        self._reaped = set()  # campaigns already cleared of containers left by a killed sweep

    def image(self, fw: frameworks.Framework):
        """fw's image object; docker.errors.ImageNotFound (with Docker's message) if missing."""
        return self.client.images.get(images.wanted(fw, self.variant))

    def reap(self, campaign: Campaign) -> int:
        """Remove this campaign's containers left running by a sweep that was killed (a killed
        `compare` cannot stop its container): a resumed sweep must not share the machine with
        them. Returns how many were removed."""
        label = "org.compare.campaign={}".format(campaign.root.resolve())
        stale = self.client.containers.list(all=True, filters={"label": label})
        for container in stale:
            container.remove(force=True)
        if stale:
            self.log("removed {} container(s) left by an earlier, killed sweep".format(len(stale)))
        return len(stale)

    def run(self, spec: RunSpec, campaign: Campaign, timeout: float) -> RunResult:
        import docker
        started = now()
        if campaign.root not in self._reaped:
            self._reaped.add(campaign.root)
            self.reap(campaign)
        fw = frameworks.get(spec.framework)
        name = images.wanted(fw, self.variant)
        try:
            image = self.image(fw)
        except docker.errors.DockerException as exc:
            return failure(spec, "failed", "image {}: {} (build it: compare images build{})".format(
                name, _message(exc), " --cpu" if self.variant == "cpu" else ""), started_at=started)
        spec_path = campaign.save_spec(spec)
        work = campaign.work_dir(spec.run_id)
        python = image.labels.get("org.compare.python", "python")
        backend = __import__("backends." + fw.backend, fromlist=["command"])
        command = backend.command(python, spec, SPEC_IN, OUT_IN + "/result.json")
        env = container_env(spec, {"COMPARE_EXECUTOR": self.name, "COMPARE_IMAGE": image.id,
                                   "HOME": "/tmp"})
        kwargs = run_kwargs(spec, image.id, command, spec_path, work, env, gpu_ids(spec.gpus),
                            "{}:{}".format(os.getuid(), os.getgid()), self.memlock)
        kwargs["labels"]["org.compare.campaign"] = str(campaign.root.resolve())
        try:
            container = self._start(kwargs)
        except docker.errors.DockerException as exc:
            return failure(spec, "failed", "container did not start: {}".format(_message(exc)),
                           started_at=started)
        try:
            rc, timed_out, oom_killed = self._wait(container, timeout)
            err_path = self._save_logs(container, campaign, spec.run_id)
        finally:
            container.remove(force=True)
        result = collect(spec, work / "result.json", rc, err_path, started, timed_out, timeout)
        if oom_killed and not timed_out and result.status == "failed":
            result = failure(spec, "oom", "the container was killed by the out-of-memory killer "
                             "(exit {})".format(rc), result.stderr_tail, started)
        result.environment.update(executor=self.name, image=name, image_id=image.id, python=python,
                                  ulimit_memlock=self.memlock)
        return result

    def _start(self, kwargs: Dict):
        """Create and start the container; removed again if it does not start. An engine that may
        not lift the memlock limit (no CAP_SYS_RESOURCE) gets the host's own hard limit instead."""
        import docker
        from docker.types import Ulimit
        container = self.client.containers.create(**kwargs)
        try:
            container.start()
            return container
        except docker.errors.APIError as exc:
            container.remove(force=True)
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

    def _save_logs(self, container, campaign: Campaign, run_id: str) -> Path:
        out_path, err_path = campaign.log_paths(run_id)
        out_path.write_bytes(container.logs(stdout=True, stderr=False))
        err_path.write_bytes(container.logs(stdout=False, stderr=True))
        return err_path
