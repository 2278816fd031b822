"""The structure DESIGN.md promises ("plug-in seams"), checked on the source itself: modules
import one way (no cycle anywhere in compare/ and backends/), the host reaches backends/ only
through the contract (backends/contract/), and no block of code is repeated between two backend
folders (what they share lives once, in backends/)."""
import ast
import itertools
from pathlib import Path
from typing import Dict, List, Set, Tuple

from tests.helpers import ROOT

PACKAGES = ("compare", "backends")
WINDOW = 6  # lines: a block this long written twice is a copy


def _modules() -> Dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


def import_graph() -> Dict[str, Set[str]]:
    """module -> the modules of compare/ and backends/ it imports, at the top or inside a
    function (both run). Importing a package's own parent does not count: Python imports the
    parent first anyway, so `from . import OPTIONS` in a submodule closes no loop."""
    modules = _modules()
    edges = {m: set() for m in modules}  # type: Dict[str, Set[str]]
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets = [next((t for t in (base + "." + a.name, base) if t in modules), None)
                           for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                if target in modules and target != name and not name.startswith(target + "."):
                    edges[name].add(target)
    return edges


def cycles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """Every loop a depth-first walk finds, as [a, b, ..., a]."""
    found, state = [], {}  # state: 1 on the current path, 2 done

    def walk(module: str, path: List[str]) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                found.append(path[path.index(target):] + [target])
            elif not state.get(target):
                walk(target, path)
        path.pop()
        state[module] = 2
    for module in sorted(edges):
        if not state.get(module):
            walk(module, [])
    return found


def test_the_cycle_finder_finds_a_loop_and_passes_a_tree():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_every_backend_has_its_runtime_imported_by_data_and_train_never_the_reverse():
    edges = import_graph()
    for backend in ("caffe2_torch", "jax", "mxnet", "tf_horovod"):
        pkg = "backends." + backend
        assert pkg + ".runtime" in edges[pkg + ".data"] and pkg + ".runtime" in edges[pkg + ".train"]
        assert pkg + ".train" not in edges[pkg + ".data"], backend


def test_no_import_cycle_in_compare_or_backends():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


CONTRACT = "backends.contract"
IMPORTERS = ("import_module", "__import__")  # calls that execute a module named by a string
# host functions that may import a module named by a non-constant string, and why; a backend's
# package is reached through the contract's loader (shared.backend), never by the host itself
DYNAMIC = {("compare.executors", "load"): "an executor class of compare/ (EXECUTORS)"}


def _inside_contract(target: str) -> bool:
    return target == CONTRACT or target.startswith(CONTRACT + ".")


def _backends_target(target: str) -> bool:
    return target == "backends" or target.startswith("backends.")


def _import_calls(tree: ast.AST):
    """(the function a call is in, or "", the call) for every importlib call of the tree."""
    def walk(node: ast.AST, where: str):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
            if isinstance(child, ast.Call):
                f = child.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if name in IMPORTERS:
                    yield where, child
            yield from walk(child, inner)
    yield from walk(tree, "")


def outside_contract(root: Path, package: str = "compare") -> List[str]:
    """'module:line: what' for every place a host module imports a backend module other than the
    contract: `import` and `from` statements at any depth, and importlib / __import__ calls whose
    constant target is one (a non-constant target only in the functions DYNAMIC names)."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        name = ".".join(path.relative_to(root).with_suffix("").parts).replace(".__init__", "")
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                targets = [node.module + "." + a.name if node.module == "backends" else node.module
                           for a in node.names]
            for target in targets:
                if _backends_target(target) and not _inside_contract(target):
                    found.append("{}:{}: imports {}".format(name, node.lineno, target))
        for where, call in _import_calls(tree):
            arg = call.args[0] if call.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                if _backends_target(arg.value) and not _inside_contract(arg.value):
                    found.append("{}:{}: imports {!r} by a string".format(name, call.lineno, arg.value))
            elif (name, where) not in DYNAMIC:
                found.append("{}:{}: imports a module named at run time (in {}): through the "
                             "contract, or name it in DYNAMIC".format(name, call.lineno, where or "the module"))
    return found


def test_the_contract_checker_sees_every_way_around_it(tmp_path):
    (tmp_path / "compare").mkdir()
    (tmp_path / "compare" / "m.py").write_text(
        "import importlib\n"
        "from backends.contract import RunSpec\n"
        "from backends.contract.shared import launchers\n"
        "import backends.contract.rules\n"
        "from backends import contract\n"
        "from backends import harness\n"
        "def f():\n"
        "    import backends.machine\n"
        "    from backends.dataset import Prepared\n"
        "    importlib.import_module('backends.jax')\n"
        "    __import__('backends.contract')\n"
        "    return importlib.import_module('backends.' + 'mxnet')\n")
    assert outside_contract(tmp_path) == [
        "compare.m:6: imports backends.harness",
        "compare.m:8: imports backends.machine",
        "compare.m:9: imports backends.dataset",
        "compare.m:10: imports 'backends.jax' by a string",
        "compare.m:12: imports a module named at run time (in f): through the contract, or name "
        "it in DYNAMIC"]


def test_the_host_imports_backends_only_through_the_contract():
    found = outside_contract(ROOT)
    assert not found, "host modules reaching into backends/ (use backends.contract):\n" + \
        "\n".join(found)


def test_the_contract_lists_what_it_exports():
    """Every name the contract's __init__ exports is one of its own modules' (its __init__ imports
    nothing else: a backend module may import it without a cycle)."""
    tree = ast.parse((ROOT / "backends" / "contract" / "__init__.py").read_text())
    sources = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert sources <= {"options", "phases", "protocol", "rules", "stats"}, sources
    import backends.contract as contract
    assert all(hasattr(contract, name) for name in contract.__all__)


def _lines(path: Path) -> List[Tuple[int, str]]:
    """The file's code lines (line number, text stripped); blank lines, comments and import
    lines left out (two backends importing the same names copy no logic)."""
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if text and not text.startswith(("#", "import ", "from ")):
            out.append((number, text))
    return out


def _windows(folder: Path) -> Dict[tuple, Tuple[str, int, int]]:
    """Every run of WINDOW consecutive code lines in a folder's files -> (file, index among its
    code lines, line number) of its first line."""
    out = {}  # type: Dict[tuple, Tuple[str, int, int]]
    for path in sorted(folder.rglob("*.py")):
        lines = _lines(path)
        for i in range(len(lines) - WINDOW + 1):
            block = tuple(text for _, text in lines[i:i + WINDOW])
            out.setdefault(block, (str(path.relative_to(folder.parent)), i, lines[i][0]))
    return out


def repeated_blocks(folders: List[Path]) -> List[str]:
    """Blocks of WINDOW or more lines that stand in two of the folders: one line per block,
    naming its first line in each."""
    windows = {folder: _windows(folder) for folder in folders}
    found = []
    for a, b in itertools.combinations(folders, 2):
        shared = {windows[a][block]: windows[b][block] for block in set(windows[a]) & set(windows[b])}
        starts = {(file, i) for file, i, _ in shared}
        for (file, i, line), (other, _, other_line) in sorted(shared.items()):
            if (file, i - 1) not in starts:  # the first window of a longer run stands for it
                found.append("{}:{} ~ {}:{}".format(file, line, other, other_line))
    return found


def test_the_block_finder_sees_a_copied_block_and_not_a_changed_one(tmp_path):
    block = "\n".join("x{} = {}".format(i, i) for i in range(WINDOW))
    for name, text in (("one", block), ("two", "  # moved\n" + block), ("three", block.replace("x3", "y3"))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "m.py").write_text("import os\n\n" + text + "\n")
    assert repeated_blocks([tmp_path / n for n in ("one", "two", "three")]) == ["one/m.py:3 ~ two/m.py:4"]


def test_no_block_of_six_lines_is_repeated_between_two_backends():
    folders = sorted(p for p in (ROOT / "backends").iterdir()
                     if p.is_dir() and (p / "__init__.py").exists())
    assert len(folders) >= 4
    found = repeated_blocks(folders)
    assert not found, "blocks written in two backends (share them in backends/):\n" + "\n".join(found)


def test_what_runs_in_a_foreign_environment_imports_only_the_standard_library_at_load():
    """backends/*.py, launchers/, contract/, pipelines/ and each backend's __init__ and __main__: Python 3.8
    syntax, and at module level only the standard library and backends' own modules (frameworks
    are imported inside functions or in runtime/data/train, which only their environment loads)."""
    import sys
    paths = sorted((ROOT / "backends").glob("*.py")) + sorted((ROOT / "backends" / "launchers").glob("*.py"))
    paths += sorted((ROOT / "backends" / "contract").glob("*.py"))
    paths += sorted((ROOT / "backends" / "pipelines").glob("*.py"))
    paths += sorted((ROOT / "backends").glob("*/__init__.py")) + sorted((ROOT / "backends").glob("*/__main__.py"))
    for path in paths:
        tree = ast.parse(path.read_text(), str(path), feature_version=(3, 8))
        for node in tree.body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for name in names:
                top = name.split(".")[0]
                assert top == "backends" or top in sys.stdlib_module_names, (str(path), name)
