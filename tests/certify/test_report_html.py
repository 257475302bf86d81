"""The certificate an assessor reads (certify/report_html.py, report.py): one self-contained HTML
page, verdict first, rendered in a real headless browser (Debian's chromium) whose screenshot is
checked, nothing cut off; plot titles inside their figures and the budget line always drawn."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from markupsafe import escape

from tickformer.certify import decision as D
from tickformer.certify import report as R
from tickformer.certify.measurement import conditions

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
VERDICT_RGB = {"PASS": (0x2E, 0x7D, 0x32), "FAIL": (0xC6, 0x28, 0x28), "INCONCLUSIVE": (0xEF, 0x8F, 0x00)}


def _report(budget_ns: float = 1_000_000.0, n: int = 5_000) -> tuple[dict, np.ndarray]:
    rng = np.random.default_rng(5)
    x = np.round(40_000 + rng.exponential(2_000, size=n))  # i.i.d., exponential tail
    r = D.analyze(x, budget_ns=budget_ns, evt_config=D.EvtConfig(n_boot=20))
    cond = conditions(backend="c", artifact="ART", cpu=0, artifact_id="ab" * 32)
    cond["command_line"] = "tickformer certify ART --backend c --budget-us 1000 --out DIR"
    cond["isolation"] = {"cpu_affinity": {"requested": True, "granted": True, "detail": "pinned to CPU 0"}}
    campaign = {"samples": n, "warmup": 100, "timed_positions": [0, 15], "wall_s": 1.0}
    return {
        "format": "tickformer-latency-certificate",
        "version": 1,
        **r,
        "conditions": cond,
        "campaign": campaign,
    }, x


def test_the_page_is_self_contained_and_says_the_verdict_first(tmp_path) -> None:
    report, x = _report()
    R.write_report(tmp_path / "rep", report, x)
    page = (tmp_path / "rep" / "report.html").read_text()
    assert not re.search(r"(src|href)=\"(https?:|//)", page)  # nothing fetched: plots are data: URIs
    assert page.count("data:image/png;base64,") == 2
    body = re.sub(r"<[^>]+>", " ", page.split("<body>", 1)[1])
    first = body.split()[0]
    assert first == report["verdict"]
    order = [
        body.index(h)
        for h in ("budget", "Statistics", "static bound", "Tail", "Extreme value", "Environment")
    ]
    assert order == sorted(order)
    for t in report["evt"]["tests"]:
        assert t["name"] in page and escape(R.report_html.TESTS_CHECK[t["name"]]) in page  # what it checked
    assert "tickformer certify ART --backend c --budget-us 1000 --out DIR" in page
    assert "tickformer certify --check" in page and report["reach"]["text"] in page


def test_values_are_escaped(tmp_path) -> None:
    report, x = _report()
    report["conditions"]["artifact"] = "<script>alert(1)</script>"
    page = R.report_bytes(report, x)["report.html"].decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page


def _titles_inside(fig) -> bool:
    fig.canvas.draw()
    box = fig.bbox
    for ax in fig.axes:
        t = ax.title.get_window_extent()
        if t.x0 < box.x0 or t.x1 > box.x1 or t.y1 > box.y1:
            return False
    return True


def test_plot_titles_are_not_cut_off_and_the_budget_line_is_always_drawn(tmp_path, monkeypatch) -> None:
    report, x = _report(budget_ns=5_000_000.0)  # a budget 50x the data's max
    report["pwcet"] = {
        **report["pwcet"],
        "estimated": False,
        "text": "not estimated (" + "a long reason, " * 12 + ")",
    }
    figures = {}
    monkeypatch.setattr(R, "_savefig", lambda fig, path: figures.__setitem__(path.name, fig))
    monkeypatch.setattr(R._pyplot(), "close", lambda fig: None)
    R.plot_histogram(report, tmp_path / "latency_hist.png")
    R.plot_exceedance(report, x, tmp_path / "exceedance.png")
    for name, fig in figures.items():
        assert _titles_inside(fig), name
        ax = fig.axes[0]
        assert R.pwcet_text(report) in ax.get_title().replace("\n", " "), name  # wrapped, not truncated
        budget = [line for line in ax.get_lines() if line.get_label().startswith("budget")]
        assert budget, name
        lo, hi = ax.get_xlim()
        assert lo < budget[0].get_xdata()[0] < hi, name  # the budget line is inside the drawn range


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium; `make system-packages`)")
    return path


CHECK_SCRIPT = """<script>
window.addEventListener('load', () => {
  const wide = [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 1);
  const broken = [...document.images].filter(i => !(i.complete && i.naturalWidth > 0));
  document.body.setAttribute('data-page-width', document.documentElement.scrollWidth + '/' + innerWidth);
  document.body.setAttribute('data-wide', wide.length);
  document.body.setAttribute('data-broken-images', broken.length);
});
</script></body>"""


@pytest.mark.slow  # two Chromium starts, ~6 s on the shared 2-core machine
def test_the_report_in_a_headless_browser(tmp_path) -> None:
    """Chromium renders the page: nothing wider than the window, every plot decoded; the
    screenshot's top is the verdict's colour (verdict first) and the page is not blank."""
    from matplotlib import image

    chromium = _chromium()
    report, x = _report()
    R.write_report(tmp_path / "rep", report, x)
    page = tmp_path / "rep" / "report.html"
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", CHECK_SCRIPT))
    args = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1100,3000"]
    dom = subprocess.run(
        [*args, "--virtual-time-budget=3000", "--dump-dom", probe.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', dom.stdout.split("<body", 1)[1].split(">", 1)[0]))
    width, window = (int(v) for v in attrs["page-width"].split("/"))
    assert width <= window and attrs["wide"] == "0" and attrs["broken-images"] == "0", attrs
    shot = tmp_path / "report.png"
    done = subprocess.run(
        [*args, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and shot.stat().st_size > 10_000, done.stderr[-2000:]
    pixels = image.imread(str(shot))[..., :3]  # [H, W, 3] in [0, 1]
    top = np.round(pixels[40, 60] * 255).astype(int)
    assert np.abs(top - VERDICT_RGB[report["verdict"]]).max() <= 8, top
    assert pixels.std() > 0.1  # text, tables and plots, not a blank page
    json.dumps(attrs)
