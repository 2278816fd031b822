"""The plug-in seams: a framework is a folder + one registry entry, an executor is one file + one
registry line, a launcher is one file + one registry line, and no other host file names a
framework.

The throw-away framework, executor and launcher are added to a temporary copy of the repository,
exactly as a contributor would add them, and then show up everywhere without any other file
being edited.
"""
import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compare import frameworks
from tests.helpers import ROOT

TOY_BACKEND = {
    "__init__.py": '''
        """A throw-away framework: pure Python, for the plug-in seam test."""
        from ..options import Option

        MODULE = "backends.toy"
        OPTIONS = (Option("work", "int", "multiply-adds per image per step", default=2000, minimum=1),)


        def launcher(spec):
            return "tagged" if spec.gpus > 1 else "single"


        def command(python, spec, spec_path, result_path):
            return [python, "-m", MODULE, spec_path, result_path]
        ''',
    "__main__.py": '''
        import sys

        from ..harness import main
        from . import OPTIONS


        def _setup(spec):
            from .train import setup
            return setup(spec)


        if __name__ == "__main__":
            sys.exit(main(_setup, declared=OPTIONS))
        ''',
    "train.py": '''
        from .. import options, policy, world
        from ..harness import Trainer, cpu_name
        from . import OPTIONS


        class ToyTrainer(Trainer):
            def __init__(self, spec):
                policy.check_precision(spec.precision, spec.device)
                self.spec, self.n = spec, options.value(OPTIONS, spec.options, "work")
                self.w, self._loss = 1.0, 1.0

            def step(self):
                acc = 0.0
                for _ in range(self.n * self.spec.batch_size):
                    acc += self.w * 0.5
                self.w *= 0.9
                self._loss = self.w

            def loss(self):
                return self._loss

            def describe(self):
                return {"framework_version": "toy 0.1", "device_name": cpu_name(),
                        "settings": policy.settings(
                            trainable_parameters=1, optimizer_impl="loop",
                            precision=self.spec.precision, loss_scaling=None, tf32=False,
                            layout="NCHW", compiler=None, threads=1, work=self.n,
                            launcher=world.world().launcher)}


        def setup(spec):
            return ToyTrainer(spec)
        ''',
}
TOY_ENTRY = '''
register(Framework("toy", ("throwaway",), "toy", "Toy (throw-away)", ("json",),
                   "nvcr.io/nvidia/pytorch:24.03-py3", "#00aa00"))
'''
TAGGED_LAUNCHER = '''
"""A throw-away launcher: the one process, told the name of what started it."""
from .launcher import Launcher


class Tagged(Launcher):
    """one process, tagged with its launcher's name (the seam test's)"""

    def command(self, python, spec, rank):
        return ["env", "COMPARE_LAUNCHER=tagged"] + list(rank)
'''
FAKE_EXECUTOR = '''
"""A throw-away executor: every backend run by this interpreter, chosen only when asked for."""
import sys
from pathlib import Path

from . import Executor, Flag, processes


class FakeExecutor(Executor):
    name = "fake"
    auto = False
    FLAGS = (Flag("fake_level", "How fake the runs are (--executor fake)."),)

    @classmethod
    def available(cls, ctx):
        return True, "a throw-away executor for the seam test"

    def environment(self, attempt):  # where the backend runs, and what its result records of it
        attempt.python, attempt.record = sys.executable, {"fake_level": self.ctx.flags["fake_level"]}

    def launch(self, attempt):  # the launcher's command, on this host, the repository on its path
        env = processes.run_env(attempt.spec, Path(__file__).resolve().parents[2])
        attempt.handle = processes.start(attempt, attempt.command, env)
'''


def _copy(tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(str(ROOT), str(dest), ignore=shutil.ignore_patterns(
        ".git", ".venv", "results", "__pycache__", "*.egg-info", ".whl", ".gl"))
    return dest


def _compare(repo: Path, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(repo))
    proc = subprocess.run([sys.executable, "-m", "compare"] + list(args), cwd=str(repo), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    repo = _copy(tmp_path_factory.mktemp("seams"))
    toy = repo / "backends" / "toy"
    toy.mkdir()
    for name, text in TOY_BACKEND.items():
        (toy / name).write_text(textwrap.dedent(text).lstrip())
    (repo / "compare" / "requirements" / "toy-cpu.txt").write_text("# nothing: pure Python\n")
    with open(repo / "compare" / "frameworks.py", "a") as f:
        f.write(TOY_ENTRY)
    _add(repo / "compare" / "executors", "fake", FAKE_EXECUTOR,
         '    "local": "compare.executors.local:LocalExecutor",\n',
         '    "fake": "compare.executors.fake:FakeExecutor",\n')
    _add(repo / "backends" / "launchers", "tagged", TAGGED_LAUNCHER,
         '    "srun": "backends.launchers.srun:Srun",\n',
         '    "tagged": "backends.launchers.tagged:Tagged",\n')
    return repo


def _add(package: Path, name: str, text: str, after: str, line: str) -> None:
    """One file in `package` and one registry line in its __init__.py, after the line `after`."""
    (package / (name + ".py")).write_text(text.lstrip())
    registry = package / "__init__.py"
    assert after in registry.read_text()
    registry.write_text(registry.read_text().replace(after, after + line))


def test_a_new_framework_shows_up_in_list_help_options_and_images(repo):
    listed = _compare(repo, "list", "frameworks").stdout
    assert [line.split()[0] for line in listed.splitlines()] == ["tf", "mxnet", "caffe2", "jax", "toy"]
    assert "Comma list of tf, mxnet, caffe2, jax, toy" in " ".join(_compare(repo, "run", "--help").stdout.split())
    options = _compare(repo, "list", "options", "throwaway").stdout
    assert "  work=int (default: 2000): multiply-adds per image per step" in options
    images = _compare(repo, "images", "list", "--cpu").stdout
    assert any(line.startswith("toy      compare/toy:0.1.0-cpu-") for line in images.splitlines())


def test_a_new_framework_runs_and_is_reported_with_its_name_and_colour(repo, tmp_path):
    campaign = tmp_path / "c"
    proc = _compare(repo, "run", "--frameworks", "toy", "--gpus", "1,2", "--quick", "--executor",
                    "local", "--option", "work=50", "--results", str(campaign))
    assert "| Toy (throw-away) | fp32 | 32 | 64 | " in proc.stdout
    html = (campaign / "report" / "report.html").read_text()
    assert "Toy (throw-away)" in html and "data:image/png;base64," in html

    result = json.loads((campaign / "results" / "toy-fp32-w2-b32-s64-r0.json").read_text())
    assert result["status"] == "ok" and result["spec"]["options"] == {"work": 50}
    assert result["settings"]["optimizer"] == "sgd-momentum" and result["settings"]["work"] == 50


def test_a_new_executor_is_one_file_and_one_line(repo, tmp_path):
    doctor = _compare(repo, "doctor").stdout
    assert "executor fake:   available: a throw-away executor for the seam test" in doctor
    assert "executor: fake" not in doctor  # auto = False: never picked without being asked for
    proc = _compare(repo, "run", "--frameworks", "toy", "--quick", "--executor", "fake",
                    "--option", "work=10", "--fake-level", "3", "--results", str(tmp_path / "c"))
    assert "executor: fake (--executor fake)" in proc.stderr
    # the template ran its two steps: the run's own result, with what its environment() recorded
    result = json.loads((tmp_path / "c" / "results" / "toy-fp32-w1-b32-s64-r0.json").read_text())
    assert (result["status"], result["images_per_sec"] > 0) == ("ok", True), result["reason"]
    assert (result["environment"]["executor"], result["environment"]["fake_level"]) == ("fake", "3")
    # its own flag: in `compare run --help`, and refused for another executor
    assert "--fake-level" in _compare(repo, "run", "--help").stdout
    refused = subprocess.run([sys.executable, "-m", "compare", "run", "--executor", "local",
                              "--fake-level", "3"], cwd=str(repo), capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=str(repo)), timeout=300)
    assert (refused.returncode, refused.stderr) == (
        2, "compare: error: --fake-level is read by the fake executor only; add --executor fake\n")


def test_a_new_launcher_is_one_file_and_one_line(repo, tmp_path):
    listed = _compare(repo, "list", "launchers").stdout.splitlines()
    assert "tagged     one process, tagged with its launcher's name (the seam test's)" in listed
    campaign = tmp_path / "c"
    _compare(repo, "run", "--frameworks", "toy", "--gpus", "1,2", "--quick", "--executor", "local",
             "--option", "work=10", "--results", str(campaign))
    launched = {p.stem: json.loads(p.read_text())["settings"]["launcher"]
                for p in (campaign / "results").glob("*.json")}
    # the toy asks for it with two workers: the process it started knows it (backends/world.py)
    assert launched == {"toy-fp32-w1-b32-s64-r0": "single", "toy-fp32-w2-b32-s64-r0": "tagged"}


def _string_constants(tree: ast.AST):
    """Every string literal that is not a docstring, with its line."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_no_framework_name_is_written_into_the_host_outside_the_registry():
    import re
    words = {n for fw in frameworks.FRAMEWORKS for n in (fw.name,) + fw.aliases}
    pattern = re.compile(r"(?<![\w.])({})(?![\w])".format("|".join(sorted(words))))
    found = []
    for path in sorted((ROOT / "compare").rglob("*.py")):
        if path.name == "frameworks.py":
            continue
        for line, text in _string_constants(ast.parse(path.read_text())):
            if pattern.search(text):
                found.append("{}:{}: {!r}".format(path.relative_to(ROOT), line, text[:80]))
    assert not found, "framework names outside compare/frameworks.py:\n" + "\n".join(found)
