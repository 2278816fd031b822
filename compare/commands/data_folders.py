"""`compare data`: real data for `compare run --data DIR`.

    compare data make DIR [--images 10000] [--classes 1000] [--image-size 500x375] [--seed 1234]
    compare data make DIR --learnable small|large [--classes K] [--images N]
    compare data prepare DIR [--frameworks tf,mxnet] [--device auto|cpu|cuda]
    compare data info DIR

`make` writes an ImageNet-layout folder of synthetic JPEGs that decode like photos; `prepare`
checks every JPEG (corrupt ones are listed and skipped) and writes each framework's native format
beside the folder once; `compare run --data DIR` does the same for what is missing.
"""
import os
from pathlib import Path
from typing import List, Optional

import typer

from .. import frameworks as fws
from .. import parsing
from ..errors import UserError

app = typer.Typer(help="Make, check and prepare image folders for --data DIR.", no_args_is_help=True)


def _named(folder: str, command: str) -> str:
    """The folder argument as typed; '' names none (open_folder would read the current folder's
    name as '' and say 'no class subfolders ... in ;')."""
    from ..datasets import LAYOUT
    return parsing.given(folder, command + ": FOLDER", LAYOUT)


def _console():
    from rich.console import Console
    return Console(stderr=True, markup=False, highlight=False, soft_wrap=True)


@app.command()
def make(
    dest: str = typer.Argument(..., help="New or empty folder to write DIR/train/<class>/*.JPEG into."),
    images: Optional[int] = typer.Option(None, help="Number of JPEGs (default 10000).",
                                         show_default=False),
    classes: Optional[int] = typer.Option(None, help="Number of class folders, labels 0..K-1 "
                                          "(default 1000).", show_default=False),
    image_size: str = typer.Option("500x375", help="WIDTHxHEIGHT of every JPEG (ImageNet's typical)."),
    seed: int = typer.Option(1234, help="Image i depends only on (seed, i)."),
    quality: int = typer.Option(90, help="JPEG quality (90: ~110 KB at 500x375, ImageNet's average)."),
    workers: Optional[int] = typer.Option(None, help="Processes that render (default: all cores)."),
    learnable: Optional[str] = typer.Option(
        None, help="small or large: DIR/train and DIR/val of images whose classes a network can "
        "learn, for --target-accuracy (small: 10 classes, 480 + 200 images, for a CPU; large: "
        "100 classes, 20,000 + 3,000, for one GPU); --classes K and --images N (training "
        "images) resize it."),
):
    """Write an ImageNet-layout folder of JPEGs with ImageNet's size and entropy (deterministic)."""
    from .. import imagegen
    dest = Path(parsing.given(dest, "compare data make: DEST", "give a new or empty folder"))
    if seed < 0:  # numpy's generators take none
        raise UserError("--seed {}: must be >= 0".format(seed))
    if learnable is not None:
        from ..learnable import SIDE
        if image_size != "500x375":
            raise UserError("--image-size {!r}: --learnable images are {n}x{n} (the crops of "
                            "training are image_size of the run); leave it out".format(
                                image_size, n=SIDE))
        spec = _learnable(learnable, images, classes, seed, quality)
        made = spec.classes * spec.train_per_class
        if images is not None and made != images:  # whole images per class: say what is made
            _console().print("note: --images {}: {} training image{} per class of {}, {} in all".format(
                images, spec.train_per_class, "" if spec.train_per_class == 1 else "s",
                spec.classes, made))
    else:
        spec = _photos(images, classes, image_size, seed, quality)
    if not 1 <= quality <= 95:
        raise UserError("--quality {}: give 1 to 95 (Pillow's useful range)".format(quality))
    images = spec.images  # the default where --images is not given
    _bounded("--workers", 1 if workers is None else workers, 256)
    console = _console()
    if imagegen.check_destination(dest, spec):
        console.print("{}: already holds these {} images; nothing to do".format(dest, images))
        return
    try:  # before the progress bar: a folder that cannot be made is one line
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError("{}: cannot create the folder ({}); give a new or empty folder you can "
                        "write".format(dest, exc.strerror or exc)) from None
    if learnable is None and spec.images < spec.classes:  # round-robin: the first classes get one
        console.print("note: --classes {}: {} image{} fill {} class{} of one image each (labels "
                      "0..{}); give --images {} or more for {} classes".format(
                          spec.classes, spec.images, "" if spec.images == 1 else "s", spec.images,
                          "" if spec.images == 1 else "es", spec.images - 1, spec.classes,
                          spec.classes))
    total = _write(dest, spec, workers or os.cpu_count() or 1, images, console)
    if learnable is not None:
        from ..datasets import counted
        print("{}: {} training and {} validation JPEGs in {}, {:.1f} MB; use: compare run "
              "--data {} --target-accuracy 0.9".format(
                  dest, spec.classes * spec.train_per_class, spec.classes * spec.val_per_class,
                  counted(spec.classes, "class", "classes"), total / 1e6, dest))
        return
    from ..datasets import counted
    print("{}: {} of {}x{} in {}, {:.1f} MB ({:.0f} KB each); use: compare run --data {}".format(
        dest, counted(images, "JPEG"), spec.width, spec.height,
        counted(min(spec.classes, images), "class", "classes"), total / 1e6, total / 1e3 / images, dest))


def _bounded(name: str, value: int, high: int) -> None:
    if value < 1:
        raise UserError("{} {}: must be >= 1".format(name, value))
    if value > high:
        raise UserError("{} {}: must be <= {}".format(name, value, high))


def _photos(images: Optional[int], classes: Optional[int], image_size: str, seed: int,
            quality: int):
    from .. import imagegen
    width, height = imagegen.parse_size(image_size)
    images, classes = 10000 if images is None else images, 1000 if classes is None else classes
    _bounded("--images", images, 10_000_000)
    _bounded("--classes", classes, 100_000)
    return imagegen.MakeSpec(images, classes, width, height, seed, quality)


def _learnable(name: str, images: Optional[int], classes: Optional[int], seed: int, quality: int):
    """The --learnable preset, resized by --classes and --images (training images in all; the
    validation part keeps the preset's ratio to them)."""
    import dataclasses

    from .. import learnable
    if name not in learnable.PRESETS:
        raise UserError("--learnable {!r}: choose from {}".format(name, ", ".join(learnable.PRESETS)))
    spec = learnable.LearnableSpec(*learnable.PRESETS[name], seed=seed, quality=quality)
    if classes is not None:
        _bounded("--classes", classes, 10_000)
        spec = dataclasses.replace(spec, classes=classes)
    if images is not None:
        _bounded("--images", images, 10_000_000)
        per = max(1, images // spec.classes)
        val = max(1, per * spec.val_per_class // spec.train_per_class)
        spec = dataclasses.replace(spec, train_per_class=per, val_per_class=val)
    return spec


def _write(dest: Path, spec, jobs: int, images: int, console) -> int:
    """Render the folder with a progress bar; the bytes written."""
    from rich import progress as rp

    from .. import imagegen
    with rp.Progress(rp.TextColumn("making JPEGs"), rp.BarColumn(), rp.MofNCompleteColumn(),
                     rp.TextColumn("{task.fields[mb]:.1f} MB, {task.fields[kb]:.0f} KB each"),
                     rp.TimeElapsedColumn(), rp.TextColumn("ETA"), rp.TimeRemainingColumn(),
                     console=console) as bar:
        task = bar.add_task("", total=images, mb=0.0, kb=0.0)
        state = {"bytes": 0, "images": 0}

        def advance(n: int, nbytes: int) -> None:
            state["bytes"] += nbytes
            state["images"] += n
            bar.update(task, advance=n, mb=state["bytes"] / 1e6,
                       kb=state["bytes"] / 1e3 / state["images"])
        return imagegen.make(dest, spec, jobs, advance)


@app.command()
def prepare(
    folder: str = typer.Argument(..., help="An ImageNet-layout folder (DIR/train/<class>/*.JPEG)."),
    frameworks: Optional[str] = typer.Option(None, help="Comma list of {} (default: all available)."
                                             .format(fws.choices())),
    device: str = typer.Option("auto", help="auto, cuda or cpu: which managed environment writes."),
    python: List[str] = typer.Option([], metavar="FRAMEWORK=PATH", help="FRAMEWORK=PATH: run that "
                                     "backend's writer with this python; several: the flag again."),
):
    """Check every JPEG and write each framework's native format beside the folder (once)."""
    from .. import datasets, envs, formats, machine_record
    if device not in ("auto", "cpu", "cuda"):
        raise UserError("--device {!r}: choose from auto, cuda, cpu".format(device))
    fw_list = [fws.get(n) for n in parsing.frameworks(frameworks)] if frameworks is not None \
        else fws.FRAMEWORKS
    overrides = envs.parse_overrides(python)
    found = datasets.open_folder(_named(folder, "compare data prepare"), "compare data prepare")
    envs.check_cache()  # the writers' environments (and a read-only folder's prepared side)
    if device == "auto":
        device = "cuda" if machine_record.gpus() else "cpu"
    elif device == "cuda" and not machine_record.gpus():  # as `run --device cuda` refuses it;
        # a format is the same whichever environment wrote it (the manifest's fingerprint alone)
        raise UserError("--device cuda: no NVIDIA GPU found on this machine (nvidia-smi lists "
                        "none); use --device cpu: its environments write the same formats, which "
                        "GPU runs read")
    console = _console()
    _unused_python(overrides, console)
    for fw in fw_list:  # its writer would fail at once (as a run's cells would: stages/plan.py)
        if fw.name in overrides and formats.data_format(fw) is not None:
            envs.check_python(fw, overrides[fw.name])
    prepared = datasets.checked(found, console)
    print(datasets.summary(prepared))
    held_out_error = None
    if datasets.held_out(found.root):  # DIR/train and DIR/val: the held-out part too
        try:
            print("held out: " + datasets.summary(datasets.checked_held_out(
                prepared, console, what="compare data prepare")))
        except UserError as exc:  # time to accuracy's alone: train/'s formats are written all
            held_out_error = exc  # the same (a throughput run reads train/ alone), then said
    failed = formats.prepare_formats(prepared, fw_list, console.print, console,
                                      formats.LocalWriter(device, overrides, console.print))
    for fw in fw_list:
        fmt = formats.data_format(fw)
        state = "failed: " + failed[fw.name] if fw.name in failed else \
            "ready in " + (prepared.format_dir(fmt) if fmt else prepared.root)
        print("{:<8} {:<10} {}".format(fw.name, fmt or "folder", state))
    if held_out_error is not None:
        raise held_out_error
    raise typer.Exit(1 if failed else 0)


def _unused_python(overrides, console) -> None:
    """One warning line for the --python of frameworks that have no writer (they read the JPEG
    folder themselves: DATA_FORMAT None): prepare runs nothing with it, so it is not probed."""
    from .. import formats
    unused = [name for name in overrides if formats.data_format(fws.get(name)) is None]
    if unused:
        console.print("warning: --python {}: not used: {} (no native format to write)".format(
            ", ".join("{}={}".format(n, overrides[n]) for n in unused),
            "{} reads the JPEG folder itself".format(unused[0]) if len(unused) == 1 else
            "{} read the JPEG folder themselves".format(" and ".join(
                [", ".join(unused[:-1]), unused[-1]]))))


@app.command()
def info(folder: str = typer.Argument(..., help="An ImageNet-layout folder.")):
    """What compare knows of a folder: images, classes, corrupt files, prepared formats."""
    from backends.contract.shared import dataset

    from .. import datasets, formats
    found = datasets.open_folder(_named(folder, "compare data info"), "compare data info")
    held_out = datasets.held_out(found.root)  # DIR/val of a time-to-accuracy folder
    prepared, line = _checked_state(found, folder, dataset)
    print(line)
    if held_out:  # what is wrong with it is part of what there is to know, not an error of info
        try:
            print("held out: " + _checked_state(datasets.open_folder(held_out, "held out:"),
                                                folder, dataset)[1])
        except UserError as exc:
            print(str(exc).split("; " + datasets.LAYOUT)[0] + "; " + datasets.VAL_LAYOUT)
    if prepared is None:
        return
    stale = prepared.fingerprint != found.fingerprint
    for fw in fws.FRAMEWORKS:
        fmt = formats.data_format(fw)
        state = "the folder itself" if fmt is None else "{} {}".format(
            fmt, "ready" if prepared.ready(fmt) and not stale else "not written")
        print("{:<8} {}".format(fw.name, state))


def _checked_state(found, asked: str, dataset):
    """(the folder's manifest or None, one line: what the last check found, or that there was
    none yet)."""
    from .. import datasets
    try:
        prepared = dataset.Prepared.find(found.root)
    except dataset.DataError:
        return None, "{}: {} in {}; not checked yet (compare data prepare {})".format(
            found.root, datasets.counted(len(found.entries), "file"),
            datasets.counted(len(found.classes), "class", "classes"), asked)
    stale = prepared.fingerprint != found.fingerprint
    return prepared, datasets.summary(prepared) + (
        " (stale: the folder changed since)" if stale else "")
