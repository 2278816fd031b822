"""`compare images build`: the backends' container images, through the Docker SDK.

    compare images build --cpu --wheelhouse ~/.cache/compare/wheelhouse --ca-bundle "$PIP_CERT"
    compare images build --frameworks NAME,NAME         # GPU images on the pinned NGC bases
    compare images list [--cpu]

An image whose inputs (Dockerfile, backends/, pins) are unchanged is kept, not rebuilt.
"""
import re
from pathlib import Path
from typing import Optional

import typer

from .. import envs, parsing
from .. import frameworks as fws
from ..errors import UserError

# an image reference as docker reads one: [REGISTRY[:PORT]/]name[/name...][:TAG][@DIGEST], names in
# lower case (distribution/reference's grammar, shortened)
_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(r"^(?:[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*(?::[0-9]+)?/)?{0}(?:/{0})*"
                             r"(?::\w[\w.-]{{0,127}})?(?:@[a-z0-9]+(?:[+._-][a-z0-9]+)*:[0-9a-fA-F]{{32,}})?$"
                             .format(_PART), re.ASCII)

app = typer.Typer(help="Build and list the backends' container images.", no_args_is_help=True)


@app.command()
def build(
    frameworks: Optional[str] = typer.Option(None, help="Comma list of {} (default: all).".format(
        fws.choices())),
    cpu: bool = typer.Option(False, "--cpu", help="The CPU twins (Dockerfile.cpu): pinned CPU wheels."),
    base_image: Optional[str] = typer.Option(
        None, help="BASE_IMAGE build arg (default: the NGC image; --cpu: compare/base:bookworm "
                   "where it exists, else the Dockerfile's debian:bookworm-slim)."),
    wheelhouse: Optional[str] = typer.Option(  # text: typer makes '' Path('.'), the current folder
        None, metavar="DIR",
        help="Folder of wheels pip installs from, no index (air-gapped; containers/wheelhouse.sh)."),
    ca_bundle: Optional[str] = typer.Option(
        None, metavar="FILE", help="CA file pip inside trusts (a TLS-intercepting proxy; e.g. $PIP_CERT)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when the inputs are unchanged."),
):
    """Build each framework's image unless one of the same inputs exists; print name, id, size, time."""
    from rich.console import Console

    from ..executors import docker_images as images
    console = Console(stderr=True, markup=False, highlight=False)
    fw_list = [fws.get(n) for n in parsing.frameworks(frameworks)] if frameworks is not None \
        else fws.FRAMEWORKS
    if base_image == "":
        raise UserError("--base-image is empty; give an image to build on, or leave it out (the NGC "
                        "image)")
    if base_image is not None and not IMAGE_REFERENCE.match(base_image):  # docker would say
        # "invalid reference format" per framework, after the engine was asked
        raise UserError("--base-image {!r}: not an image reference; give [REGISTRY/]NAME[:TAG] in lower "
                        "case (e.g. debian:bookworm-slim, nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04), or "
                        "leave it out (the NGC image)".format(base_image))
    for text, flag, folder in ((wheelhouse, "--wheelhouse", True), (ca_bundle, "--ca-bundle", False)):
        wanted = "a folder of wheels (containers/wheelhouse.sh fills one)" if folder \
            else "a CA certificate file (PEM)"
        if text == "":
            raise UserError("{} is empty; give {}".format(flag, wanted))
        path = None if text is None else Path(text)
        if path is not None and not path.exists():
            raise UserError("{} {}: no such {}; give {}".format(flag, path, "folder" if folder else "file",
                                                                wanted))
        if path is not None and path.is_dir() != folder:  # a file served as a wheelhouse, ...
            raise UserError("{} {}: is a {}; give {}".format(flag, path, "file" if folder else "folder",
                                                             wanted))
    wheelhouse_dir, ca_file = (None if t is None else Path(t) for t in (wheelhouse, ca_bundle))
    envs.check_cache()  # each build's log goes there (and the wheelhouse it may serve)
    c, why = images.engine()
    if c is None:
        raise UserError(why + "; start dockerd, or run without containers (--executor local)")
    variant = "cpu" if cpu else "gpu"
    failed = 0
    for fw in fw_list:
        try:
            b = images.build(c, fw, variant, base_image, wheelhouse_dir, ca_file, force, console.print)
        except images.ImageError as exc:
            failed += 1
            console.print("{}: build failed:\n{}".format(fw.name, exc), markup=False)
            continue
        print("{:<8} {} {} {:.0f} MB {} in {:.1f} s".format(
            fw.name, b.name, b.image_id[7:19], b.size_mb, "built" if b.built else "up to date",
            b.seconds))
    raise typer.Exit(1 if failed else 0)


@app.command("list")
def list_images(cpu: bool = typer.Option(False, "--cpu", help="The CPU twins (what runs on a "
                                          "machine without GPUs) instead of the GPU images.")):
    """The GPU image (--cpu: the CPU twin) each framework's current code runs in, and whether it
    is built (without an engine: the names its images would have)."""
    from ..executors import docker_images as images
    c, why = images.engine()
    variant = "cpu" if cpu else "gpu"
    for fw in fws.FRAMEWORKS:
        name = images.wanted(fw, variant)
        img = images.find(c, name) if c else None
        # a COMPARE_IMAGE_<FRAMEWORK> image is the user's: `compare images build` never builds it
        missing = "not built" if name == images.image_name(fw, variant) else \
            "not on this Docker engine (named by COMPARE_IMAGE_{}: pull or build it yourself)".format(
                fw.name.upper())
        print("{:<8} {} {}".format(fw.name, name, "{} {:.0f} MB".format(
            img.id[7:19], img.attrs["Size"] / 1e6) if img else missing if c else
            "(no Docker engine answers)"))
