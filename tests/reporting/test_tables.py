"""The table model: one section, three renderings that agree; the reporting package has no import
cycle and parses no Markdown."""
import ast
import csv
import io
import re
from pathlib import Path

from compare.reporting import tables
from tests.helpers import ROOT

PACKAGE = ROOT / "compare" / "reporting"
TABLE = tables.Table("Images/sec (speedup vs 1 GPU)", ["framework", "1 GPU", "2 GPUs"],
                     [["A|B <fw>", "100.00", "190.00 (1.900 ±0.010)"]], ["± is the 95 % interval."])


def test_markdown_rendering():
    assert tables.markdown([TABLE]) == (
        "## Images/sec (speedup vs 1 GPU)\n\n| framework | 1 GPU | 2 GPUs |\n|---|---|---|\n"
        "| A\\|B \\<fw> | 100.00 | 190.00 (1.900 ±0.010) |\n\n± is the 95 % interval.\n")


def test_csv_rendering_is_the_table_as_shown():
    rows = list(csv.reader(io.StringIO(tables.to_csv(TABLE))))
    assert rows == [["framework", "1 GPU", "2 GPUs"], ["A|B <fw>", "100.00", "190.00 (1.900 ±0.010)"]]
    assert TABLE.csv_name() == "images_sec"


def test_html_rendering_escapes_cells():
    html = tables.to_html(TABLE)
    assert "<h2>Images/sec (speedup vs 1 GPU)</h2>" in html
    assert "<tr><td>A|B &lt;fw&gt;</td><td>100.00</td><td>190.00 (1.900 ±0.010)</td></tr>" in html
    assert "<p>± is the 95 % interval.</p>" in html


def test_text_sections_bullets_and_bold_warnings():
    text = tables.Text("What the numbers say", ["one", "two"], bullets=True, warnings=["Careful"])
    assert tables.markdown([text]) == "## What the numbers say\n\n- one\n- two\n\n**Careful**\n"
    assert "<ul><li>one</li><li>two</li></ul>\n<p><strong>Careful</strong></p>" in tables.to_html(text)


def _imports(path: Path):
    """Modules of compare.reporting that `path` imports (relative imports: `from . import x`,
    `from .x import y`)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out |= {node.module} if node.module else {a.name for a in node.names}
    return out & {p.stem for p in PACKAGE.glob("*.py")}


def test_the_reporting_package_has_no_import_cycle_and_parses_no_markdown():
    graph = {p.stem: _imports(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    done, stack = set(), []

    def visit(m):
        assert m not in stack, "import cycle: " + " -> ".join(stack[stack.index(m):] + [m])
        if m in done:
            return
        stack.append(m)
        for n in graph.get(m, ()):
            visit(n)
        stack.pop()
        done.add(m)
    for module in graph:
        visit(module)
    assert "report" not in graph["html"] and "html" not in graph["report"]
    sources = {p.stem: p.read_text() for p in PACKAGE.glob("*.py")}
    assert [m for m, text in sources.items() if "markdown_to_html" in text or 'split("|")' in text] == []


def test_columns_and_tables_without_a_value_are_left_out():
    t = tables.Table("Gain", ["framework", "N", "1 GPU", "2 GPUs", "note"],
                     [["JAX", "1", "+10.0%", "", "n/a"], ["PyTorch", "1", "n/a", "", ""]], labels=2)
    kept = t.pruned()
    assert (kept.header, kept.rows) == (["framework", "N", "1 GPU"],
                                       [["JAX", "1", "+10.0%"], ["PyTorch", "1", "n/a"]])
    assert t.pruned().labels == 2 and TABLE.pruned() is TABLE  # nothing to leave out: the same
    empty = tables.Table("Gain", ["framework", "1 GPU"], [["JAX", "n/a"], ["PyTorch", ""]], labels=1)
    assert empty.pruned() is None


def test_free_text_never_becomes_html_in_markdown():
    text = tables.markdown([tables.Text("<b>t</b>", ["reason: <script>alert(1)</script> & n<5"],
                                        warnings=["<!-- hidden -->"]),
                            tables.Table("", ["a"], [["<img src=x onerror=alert(1)>"]], ["<?php ?>"])])
    assert text == ("## \\<b>t\\</b>\n\nreason: \\<script>alert(1)\\</script> & n<5\n\n**\\<!-- hidden -->**"
                    "\n\n| a |\n|---|\n| \\<img src=x onerror=alert(1)> |\n\n\\<?php ?>\n")


def test_markup_in_a_reason_or_an_option_is_escaped_in_report_and_diff(tmp_path, capsys):
    from dataclasses import replace

    from backends.protocol import RunSpec
    from tests.helpers import main_exit, result, save_campaign, windowed
    script = "<script>alert(1)</script>"
    ok = windowed("caffe2", "fp32", 1, [100.0, 101.0])
    spec = replace(RunSpec.from_dict(ok.spec), options={"xla_flags": script})
    marked = replace(ok, spec=spec.to_dict())
    a = save_campaign(tmp_path / "a", [ok, result("mxnet", "fp32", 1, status="failed", reason=script)])
    b = save_campaign(tmp_path / "b", [marked])
    code, out, _ = main_exit(["report", str(a), "--format", "md,html"], capsys)
    assert code == 0 and script not in out and "\\<script>alert(1)\\</script>" in out
    assert script not in (a / "report" / "report.md").read_text()
    assert script not in (a / "report" / "report.html").read_text()
    code, out, _ = main_exit(["diff", str(a), str(b), "--out", str(tmp_path / "d")], capsys)
    assert code == 0 and "alert(1)" in out and script not in out
    assert script not in (tmp_path / "d" / "diff.md").read_text()


def test_free_text_never_becomes_markdown_markup_and_code_spans_stay():
    text = tables.markdown([tables.Text("", ["x\n# Heading [a](http://e.example) ![i](http://t.example/"
                                             "p.png) [r]: http://e.example **b** _e_ loader_workers ~~s~~",
                                             "1. item", "run `compare run … --resume` *now*"], bullets=True),
                            tables.Table("", ["a"], [["- not a list\nx | y"]])])
    assert text == ("- x # Heading [a\\](http://e.example) ![i\\](http://t.example/p.png) [r\\]: "
                    "http://e.example \\*\\*b\\*\\* \\_e\\_ loader_workers \\~\\~s\\~\\~\n"
                    "- 1\\. item\n- run `compare run … --resume` \\*now\\*\n\n"
                    "| a |\n|---|\n| \\- not a list x \\| y |\n")


def test_text_of_a_campaign_file_reaches_no_report_as_markup(tmp_path, capsys):
    from tests.helpers import machine_of, main_exit, result, save_campaign, windowed
    evil = "lab1\n\n# Injected\n[click](http://evil.example) ![t](http://t.example/p.png) **bold**"
    runs = [windowed("caffe2", "fp32", 1, [100.0, 101.0]),
            result("mxnet", "fp32", 1, status="failed", reason=evil, device_name="NVIDIA H200")]
    root = save_campaign(tmp_path / "c", runs, dict(machine_of(runs), hostname=evil))
    code, out, _ = main_exit(["report", str(root)], capsys)
    assert code == 0
    code, diffed, _ = main_exit(["diff", str(root), str(root)], capsys)
    assert code == 0
    for md in (out, (root / "report" / "report.md").read_text(), diffed):
        assert "\n# Injected" not in md and "**bold**" not in md
        assert re.search(r"(?<!\\)\]\(http", md) is None  # every ]( escaped
        assert "# Injected [click\\](http://evil.example) ![t\\](http://t.example/p.png) \\*\\*bold\\*\\*" in md
