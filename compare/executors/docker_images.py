"""Container images of the backends: build context, content-hash tags, builds through the Docker SDK.

    compare/<backend>:<version>-<cpu|gpu>-<hash>   e.g. compare/<backend>:0.1.0-cpu-3f9c0a1b2c4d

The hash covers every build input (the Dockerfile, backends/, the pinned requirements, setup
script and Debian packages of the CPU twin), so a changed input gets a new tag and is rebuilt; an
unchanged one is found and not built again. COMPARE_IMAGE_<FRAMEWORK> (the name in capitals)
names another image to run instead. The image holds backends/ only, nothing from compare/.
"""
import contextlib
import functools
import hashlib
import http.server
import os
import queue
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from .. import __version__, envs
from ..frameworks import Framework

ROOT = Path(__file__).resolve().parent.parent.parent
CONTAINERS = ROOT / "containers"
LOCAL_BASE = "compare/base:bookworm"  # containers/base/build.sh: the CPU base without a registry
CODE_DIR = "/opt/compare-backends"  # where the Dockerfiles copy backends/ (PYTHONPATH in a run)
LABEL = "org.compare."


class ImageError(Exception):
    """An image could not be built; the message is Docker's."""


def variant_of(device: str) -> str:
    return "gpu" if device == "cuda" else "cpu"


def dockerfile(fw: Framework, variant: str) -> Path:
    """containers/<backend>/Dockerfile[.cpu] where a framework needs its own, else the generic one."""
    name = "Dockerfile.cpu" if variant == "cpu" else "Dockerfile"
    own = CONTAINERS / fw.backend / name
    return own if own.exists() else CONTAINERS / name


def context_files(fw: Framework, variant: str) -> Dict[str, bytes]:
    """Build-context path -> content: everything the image is made from (hashed)."""
    files = {"Dockerfile": dockerfile(fw, variant).read_bytes()}
    code = ROOT / "backends"
    for path in sorted(code.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files["backends/" + path.relative_to(code).as_posix()] = path.read_bytes()
    if variant == "cpu":
        files["build/install.sh"] = (CONTAINERS / "install-cpu.sh").read_bytes()
        files["build/requirements.txt"] = envs.requirements_file(fw, "cpu").read_bytes()
        files["build/system-packages"] = " ".join(fw.system_packages).encode()
        if envs.setup_script(fw).exists():
            files["build/setup.sh"] = envs.setup_script(fw).read_bytes()
    else:  # the pinned NGC image is an input too: a new pin is a new image
        files["build/base-image"] = fw.ngc_image.encode()
    return files


def default_base(c, fw: Framework, variant: str) -> Optional[str]:
    """BASE_IMAGE when none is given: the NGC pin for GPUs; for the CPU twin our debootstrapped
    base where it exists, else None (the Dockerfile's own default)."""
    if variant != "cpu":
        return fw.ngc_image
    return LOCAL_BASE if c is not None and find(c, LOCAL_BASE) else None


def inputs_hash(files: Dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name] + b"\0")
    return h.hexdigest()[:12]


def image_name(fw: Framework, variant: str) -> str:
    """The tag of fw's image built from the current inputs."""
    return "compare/{}:{}-{}-{}".format(fw.backend, __version__, variant,
                                        inputs_hash(context_files(fw, variant)))


def wanted(fw: Framework, variant: str) -> str:
    """The image a run of fw uses: COMPARE_IMAGE_<NAME> if set, else the current inputs' tag."""
    return os.environ.get("COMPARE_IMAGE_" + fw.name.upper()) or image_name(fw, variant)


PROBE_S = 10  # seconds an engine has to answer the ping: a hung one is told, not waited for
REQUEST_S = 60  # then each request's (a container's start, an image's list)


def client():
    """A Docker SDK client whose engine answered a ping; docker.errors.DockerException if not."""
    import docker
    c = docker.from_env(timeout=PROBE_S)
    c.ping()
    c.api.timeout = REQUEST_S
    return c


def engine() -> "tuple":
    """(client, None) when an engine answers, else (None, why not)."""
    try:
        import docker  # noqa: F401  (a dependency of compare: pip install -e .)
    except ImportError:
        return None, "the docker package is not installed (pip install docker)"
    try:
        return client(), None
    except Exception as exc:  # DockerException, requests errors: no engine to talk to
        return None, "no Docker engine answers ({})".format(why_not(exc))


def why_not(exc: BaseException) -> str:
    """The reason a Docker client could not reach an engine, in words: the SDK's errors wrap
    urllib3's, which wrap the OS error (`...FileNotFoundError(2, ...)))`)."""
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    text = str(exc)
    for marker, said in (("No such file or directory", "nothing at {}: start dockerd, or set "
                                                       "DOCKER_HOST"),
                         ("Connection refused", "{} refuses connections: is dockerd running?"),
                         ("Permission denied", "no permission to use {}: run as root or join the "
                                               "docker group"),
                         ("timed out", "{} did not answer in time")):
        if marker in text:
            return said.format(where)
    return text.splitlines()[0][:200] if text else type(exc).__name__


def find(c, name: str):
    """The image called `name`, or None."""
    import docker
    try:
        return c.images.get(name)
    except docker.errors.ImageNotFound:
        return None


def missing(c, fws: List[Framework], variant: str) -> List[str]:
    return [wanted(fw, variant) for fw in fws if find(c, wanted(fw, variant)) is None]


def default_wheelhouse() -> Optional[Path]:
    """The wheelhouse containers/wheelhouse.sh fills by default (compare's cache folder), where it
    holds wheels: an image a run builds for changed code installs from it as `./scripts/test`'s
    `compare images build --wheelhouse` did, so Docker's layer cache keeps the install step."""
    folder = envs.cache_dir() / "wheelhouse"
    return folder if folder.is_dir() and any(folder.glob("*.whl")) else None


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve a wheelhouse folder over HTTP on 127.0.0.1 (builds use host networking): pip's
    --find-links then reads it without the wheels being copied into an image layer."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    # a steady port keeps the build arg, hence Docker's layer cache of the pip step, the same
    port = 30000 + int(hashlib.sha256(str(folder).encode()).hexdigest(), 16) % 10000
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError:  # taken: any free port (the pip step is then rebuilt)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:{}/".format(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@dataclass
class Built:
    name: str
    image_id: str
    size_mb: float
    seconds: float
    built: bool  # False: an image of these inputs existed and was kept


def _context(files: Dict[str, bytes], dest: Path, ca_bundle: Optional[Path]) -> None:
    for name, content in files.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(content)
    if (dest / "build").exists():  # not hashed: where the CA comes from does not change the image
        shutil.copyfile(str(ca_bundle), str(dest / "build" / "ca.crt")) if ca_bundle else \
            (dest / "build" / "ca.crt").write_text("")


def build(c, fw: Framework, variant: str, base_image: Optional[str] = None,
          wheelhouse: Optional[Path] = None, ca_bundle: Optional[Path] = None, force: bool = False,
          log: Callable[[str], None] = print, stop: Callable[[], bool] = lambda: False) -> Built:
    """Build fw's image unless one of the same inputs and base exists; ImageError on failure, or
    when stop() turns true while it builds (the engine ends a build whose client has gone)."""
    started = time.time()
    files = context_files(fw, variant)
    name = image_name(fw, variant)
    if base_image is None:
        base_image = default_base(c, fw, variant)
    old = find(c, name)
    if old is not None and not force and (base_image is None or
                                          old.labels.get(LABEL + "base") == base_image):
        return Built(name, old.id, old.attrs["Size"] / 1e6, time.time() - started, False)
    args = {"BASE_IMAGE": base_image} if base_image else {}
    labels = {LABEL + "backend": fw.backend, LABEL + "variant": variant,
              LABEL + "version": __version__, LABEL + "inputs": name.rsplit("-", 1)[1],
              LABEL + "base": base_image or "(Dockerfile default)"}
    logfile = envs.cache_dir() / "images" / (name.replace("/", "_").replace(":", "_") + ".log")
    logfile.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="compare-build-") as tmp, \
            (serve(wheelhouse) if wheelhouse else contextlib.nullcontext()) as url:
        _context(files, Path(tmp), ca_bundle)
        if url:
            args.update(PIP_FIND_LINKS=url, PIP_NO_INDEX="1")
        log("building {} from {} (log: {})".format(name, base_image or "the Dockerfile's base",
                                                   logfile))
        _stream(c.api.build(path=tmp, tag=name, buildargs=args, labels=labels, rm=True,
                            forcerm=True, network_mode="host", decode=True, pull=False),
                logfile, started, log, stop)
    image = c.images.get(name)
    return Built(name, image.id, image.attrs["Size"] / 1e6, time.time() - started, True)


STOP_POLL_S = 0.5  # how often a build waiting for output looks whether compare is stopping


def _read_until(chunks, stop: Callable[[], bool]) -> Iterator[Optional[dict]]:
    """The engine's output chunks, read by a thread of their own, then None once stop() is true:
    a step may print nothing for minutes (Horovod's compile: ~1 min), and a stop must not wait
    for it. The reader is left blocked on the stream; compare's exit closes the connection, and
    the engine cancels a build whose client has gone."""
    got: "queue.Queue[Tuple[str, object]]" = queue.Queue()

    def read() -> None:
        try:
            for chunk in chunks:
                got.put(("chunk", chunk))
            got.put(("end", None))
        except BaseException as exc:  # the engine's error: raised where the build waits
            got.put(("error", exc))
    threading.Thread(target=read, name="image build output", daemon=True).start()
    while True:
        if stop():
            for _ in range(got.qsize()):  # what was read before the stop still goes to the log
                kind, item = got.get_nowait()
                if kind == "chunk":
                    yield item  # type: ignore[misc]
            yield None
            return
        try:
            kind, item = got.get(timeout=STOP_POLL_S)
        except queue.Empty:
            continue
        if kind == "end":
            return
        if kind == "error":
            raise item  # type: ignore[misc]
        yield item  # type: ignore[misc]


def _stream(chunks, logfile: Path, started: float, log: Callable[[str], None],
            stop: Callable[[], bool] = lambda: False) -> None:
    """Write the build output to logfile, show each step, raise ImageError on an error or as soon
    as stop() is true (within STOP_POLL_S, output or not)."""
    tail: List[str] = []
    with open(logfile, "w") as out:
        for chunk in _read_until(chunks, stop):
            if chunk is None:
                out.write("stopped: compare is stopping\n")
                raise ImageError("stopped after {:.0f} s: compare is stopping (full log: {})".format(
                    time.time() - started, logfile))
            text = chunk.get("stream") or chunk.get("status") or ""
            out.write(text)
            tail = (tail + [line for line in text.splitlines() if line.strip()])[-15:]
            if text.startswith("Step "):
                log("  [{:5.0f} s] {}".format(time.time() - started, text.strip()[:120]))
            if "error" in chunk:
                out.write(chunk["error"] + "\n")
                raise ImageError("{}\n{}\n(full log: {})".format(
                    "\n".join(tail[-8:]), chunk["error"].strip(), logfile))
