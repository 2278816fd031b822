"""The HTML report, rendered in headless Chromium: the charts are there and decode to images."""
import json
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from compare.reporting import charts, comparator, html, report, write_files
from tests.helpers import MACHINE, fixed_results, result, windowed

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--virtual-time-budget=5000"]
# appended only to the test's copy: reports what the browser decoded, into the DOM Chromium dumps
PROBE = """<script>window.addEventListener('load', function () {
  var out = Array.from(document.images).map(function (i) {
    return {alt: i.alt, w: i.naturalWidth, h: i.naturalHeight}; });
  var pre = document.createElement('pre'); pre.id = 'probe';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre); });</script>"""


def _chromium(args, cwd):
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([CHROMIUM] + FLAGS + ["--user-data-dir=" + profile] + args,
                              capture_output=True, text=True, timeout=180, cwd=str(cwd))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("html")
    _, paths = write_files(comparator.cells(fixed_results()), out, ["html"], MACHINE)
    assert paths == [out / "report.html"]
    return out / "report.html"


def test_page_is_self_contained(page):
    text = page.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:|//|file:)""", text)
    assert text.count('src="data:image/png;base64,') == 4
    assert "TensorFlow (+Horovod) (fp16) on 8 GPUs is 7.22× as fast as on one GPU (±0.01): 90% scaling" in text
    assert "PyTorch (Caffe2): fp16 is 132 % faster than fp32 (±15 %)." in text
    # the findings come first, then the charts, then the same tables as report.md
    assert text.index("What the numbers say") < text.index("data:image/png") < text.index("<h1>Tables</h1>")
    assert "<td>2382.99 (1.952 ±0.002)</td>" in text


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test installs it)")
def test_chromium_renders_every_chart(page, tmp_path):
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = _chromium(["--dump-dom", probe.as_uri()], tmp_path)
    decoded = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1)
                         .replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    titles = [c["alt"] for c in decoded]
    assert titles == ["Throughput versus number of GPUs", "Mixed-precision gain over true FP32",
                      "Framework versus framework", "Energy efficiency"]
    for chart in decoded:
        assert chart["w"] > 300 and chart["h"] > 200, chart  # a real picture, not a broken icon
    assert dom.count("<table>") == 7  # as report.md: 6 tables + the cells without a figure


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test installs it)")
def test_screenshot_shows_the_charts(page, tmp_path):
    from PIL import Image
    shot = tmp_path / "shot.png"
    _chromium(["--window-size=1280,2600", "--screenshot=" + str(shot), page.as_uri()], tmp_path)
    img = Image.open(shot).convert("RGB")
    assert img.size == (1280, 2600)
    pixels = np.asarray(img).astype(int)
    orange = int((np.abs(pixels - [0xe8, 0x71, 0x0a]).max(axis=2) < 24).sum())
    assert orange > 20000, "TensorFlow's bars and lines are not on the screenshot"


def test_nothing_to_draw_gives_no_chart():
    one = comparator.cells([result("tf", "fp32", 1, 500.0)])  # one cell, no power reading
    assert charts.all_charts(one) == []
    assert "data:image/png" not in html.page(one, report.build(one))


def test_backticks_are_code_on_the_page_as_in_markdown(page):
    text = page.read_text()
    assert "<code>--mode tuned</code> runs each at its fastest" in text
    assert "`" not in text.split("<h1>Tables</h1>")[1]


def test_the_bars_carry_the_95_percent_interval_of_each_figure():
    df = comparator.cells(fixed_results())
    ok = df[df.status == "ok"]
    labels, series = charts._grouped(ok, ["precision", "batch_size", "image_size", "gpus"],
                                     "{} b{} {}px ×{}", "images_per_sec", "images_per_sec_ci95")
    name, values, _, errors = series[0]
    row = ok[(ok.framework == "tf") & (ok.gpus == 8) & (ok.precision == "fp16")].iloc[0]
    at = labels.index("fp16 b{} {}px ×8".format(row.batch_size, row.image_size))
    assert (name, values[at], errors[at]) == ("TensorFlow (+Horovod)", row.images_per_sec,
                                              row.images_per_sec_ci95)
    assert errors[at] > 0


def test_the_bars_of_one_and_of_two_nodes_are_two_bars():
    """2 GPUs on one node and 2 GPUs per node on two: two bar groups, each its own figure, never
    one '×2' group showing whichever cell came last."""
    df = comparator.cells([windowed(fw, "fp32", 2, [w * f * nodes for w in (990, 1000, 1010)],
                                    nodes=nodes)
                           for fw, f in (("tf", 1.0), ("caffe2", 1.1)) for nodes in (1, 2)])
    labels, series = charts._grouped(df, ["precision", "batch_size", "image_size", "gpus"],
                                     "{} b{} {}px ×{}", "images_per_sec")
    assert labels == ["fp32 b256 224px ×2", "fp32 b256 224px ×2×2"]
    name, values, _ = series[0]
    assert name == "TensorFlow (+Horovod)" and values == [
        df[(df.framework == "tf") & (df.nodes == n)].images_per_sec.iloc[0] for n in (1, 2)]
    assert values[0] != values[1]


def test_report_as_html_prints_no_markdown(tmp_path, capsys):
    from tests.helpers import main_exit, save_campaign
    c = save_campaign(tmp_path / "c", fixed_results())
    code, out, err = main_exit(["report", str(c), "--format", "html"], capsys)
    assert (code, out) == (0, "")
    assert "wrote {}".format(c / "report" / "report.html") in err
    code, out, _ = main_exit(["report", str(c)], capsys)  # md, the default: printed
    assert code == 0 and out.startswith("## What the numbers say")


def test_the_page_is_headed_by_the_networks_the_campaign_trained():
    """A VGG-16 campaign's page is not headed 'ResNet-50 …'; a campaign of two names both."""
    def cells(*models):
        out = []
        for model in models:
            r = result("caffe2", "fp16", 1, 500.0)
            r.spec["model"] = model
            out.append(r)
        return comparator.cells(out)
    vgg = cells("vgg16")
    assert "<h1>VGG-16 training throughput — compare report</h1>" in html.page(vgg, report.build(vgg))
    two = cells("resnet50", "inception3")
    assert "<h1>ResNet-50 v1.5 and Inception-v3 training throughput — compare report</h1>" in \
        html.page(two, report.build(two))


def test_the_gain_and_energy_bars_of_two_image_sizes_are_two_bars(monkeypatch):
    """fp16 over fp32 (and img/s per W) at image sizes 224 and 112: two bar groups, each its own
    figure, never one group showing whichever size came last (their labels named no size)."""
    drawn = {}
    monkeypatch.setattr(charts, "_bars", lambda ax, labels, series, fmt: drawn.setdefault(fmt, (
        labels, series)))
    runs = []
    for precision, gain in (("fp32", 1.0), ("fp16", 1.8)):
        for image, k in ((224, 1.0), (112, 3.0)):
            r = windowed("caffe2", precision, 1, [w * gain * k for w in (990, 1000, 1010)], image=image)
            r.telemetry = {"power_avg_w": 100.0 * k}
            runs.append(r)
    df = comparator.cells(runs)
    assert charts.precision_gain(df) is not None and charts.energy(df) is not None
    labels, series = drawn["{:+.0f}%"]
    assert labels == ["fp16 ×1 b256 224px", "fp16 ×1 b256 112px"]
    assert [round(v) for v in series[0][1]] == [80, 80]
    labels, series = drawn["{:.2f}"]
    assert len(labels) == 4 and len(set(labels)) == 4, labels


def test_the_scaling_chart_draws_the_cells_of_one_and_of_two_nodes_at_one_gpu_count(monkeypatch):
    """1 node × 4 GPUs and 2 nodes × 2 GPUs are both 4 GPUs: each is drawn (a line per node count),
    never one left out because another cell had its GPU count."""
    figures = []
    monkeypatch.setattr(charts, "_png", lambda fig: figures.append(fig) or b"")
    runs = [windowed("caffe2", "fp32", g, [w * g * f for w in (990, 1000, 1010)], nodes=n)
            for n, g, f in ((1, 1, 1.0), (1, 2, 1.0), (1, 4, 1.0), (2, 2, 0.5))]
    assert charts.scaling(comparator.cells(runs)) is not None
    drawn = {(float(x), round(float(y))) for line in figures[0].axes[0].get_lines()
             if not line.get_label().endswith("ideal") and line.get_linestyle() != "--"
             for x, y in zip(line.get_xdata(), line.get_ydata())}
    assert (4.0, 4000) in drawn and (4.0, 1000) in drawn, drawn
