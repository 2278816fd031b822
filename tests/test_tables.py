"""The table model: one section, three renderings that agree; the reporting package has no import
cycle and parses no Markdown."""
import ast
import csv
import io
from pathlib import Path

from compare.reporting import tables

PACKAGE = Path(__file__).resolve().parent.parent / "compare" / "reporting"
TABLE = tables.Table("Images/sec (speedup vs 1 GPU)", ["framework", "1 GPU", "2 GPUs"],
                     [["A|B <fw>", "100.00", "190.00 (1.900 ±0.010)"]], ["± is the 95 % interval."])


def test_markdown_rendering():
    assert tables.markdown([TABLE]) == (
        "## Images/sec (speedup vs 1 GPU)\n\n| framework | 1 GPU | 2 GPUs |\n|---|---|---|\n"
        "| A\\|B <fw> | 100.00 | 190.00 (1.900 ±0.010) |\n\n± is the 95 % interval.\n")


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
