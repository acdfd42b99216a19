"""report.html as a browser shows it: headless Chromium renders the sample's report at 1,400 and
600 pixels wide.

Marked ``chromium`` and skipped where no Chromium binary is installed (``.ci/run`` installs
Debian's ``chromium`` when it is missing and it runs as root). Chromium runs headless, without
sandbox or GPU, with background networking off and a fresh profile each time; the page loads
nothing (tests/test_report.py checks it has no URL). To refresh the README's screenshot from a
run's output::

    python tests/test_report_chromium.py out/report.html docs/images/report.png
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from report_page import flat, parse, shown  # noqa: E402

from pipeline.finished import charts, report  # noqa: E402

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
#: The README's screenshot: wide enough for two charts a row, tall enough for the tables.
WINDOW = (1200, 2500)
#: The widths the page must work at: a desktop window, and a phone held sideways.
WIDTHS = (1400, 600)

#: Appended to a copy of the page under test: after load, records on <body> the viewport's
#: width, the document's scroll width and any element that sticks out past the viewport.
PROBE = (
    "<script>window.addEventListener('load',function(){var w=window.innerWidth,out=[];"
    "document.querySelectorAll('body *').forEach(function(e){var r=e.getBoundingClientRect();"
    "if(r.right>w+0.5)out.push(e.tagName.toLowerCase()+'.'+e.className)});"
    "document.body.setAttribute('data-width',w);"
    "document.body.setAttribute('data-scroll-width',document.documentElement.scrollWidth);"
    "document.body.setAttribute('data-outside',out.slice(0,10).join(' '))});</script>"
)


def browser() -> str | None:
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def _chromium(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    binary = browser()
    with tempfile.TemporaryDirectory(prefix="convnorm-chromium-") as profile:
        return subprocess.run(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--hide-scrollbars",
                "--no-first-run",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def screenshot(page: Path, png: Path, window: tuple[int, int] = WINDOW) -> None:
    done = _chromium(f"--window-size={window[0]},{window[1]}", f"--screenshot={png}", page.resolve().as_uri())
    if not png.exists():
        raise RuntimeError(f"chromium wrote no screenshot (exit {done.returncode}): {done.stderr[-2000:]}")


def rendered_dom(page: Path, width: int = WINDOW[0]) -> str:
    done = _chromium(f"--window-size={width},2000", "--dump-dom", page.resolve().as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


pytestmark = [
    pytest.mark.chromium,
    pytest.mark.slow,
    pytest.mark.skipif(browser() is None, reason="no chromium binary (apt-get install chromium)"),
]


@pytest.fixture(scope="module")
def sample_report(sample_run):
    """The session's one run of the bundled sample (tests/conftest.py), report included."""
    assert sample_run.status == 0
    return sample_run.out


def _pixels_of(png: Path, hex_color: str) -> int:
    from PIL import Image

    wanted = tuple(int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    colors = Image.open(png).convert("RGB").getcolors(maxcolors=1 << 24) or []
    return sum(count for count, color in colors if color == wanted)


@pytest.mark.parametrize("width", WIDTHS)
def test_chromium_draws_the_charts(sample_report, tmp_path, width):
    png = tmp_path / "report.png"
    screenshot(sample_report / report.REPORT_FILE, png, (width, 3000))
    # Solid bars in the chart colours: drops (blue), dead letters (red), messages (green).
    for color in (charts.BAR_COLOR, charts.ALERT_COLOR, charts.OK_COLOR):
        assert _pixels_of(png, color) > 1000, f"no bars of colour {color} on the page rendered {width} px wide"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_rendered_page_holds_the_numbers_of_summary_json(sample_report, width):
    dom = parse(rendered_dom(sample_report / report.REPORT_FILE, width))
    summary = json.loads((sample_report / "summary.json").read_text())
    expected = {key: shown(value) for key, value in flat(summary).items()}
    assert {key: dom.values.get(key) for key in expected} == expected
    # messages in and out, drops, dead letters, the histogram, and the ledger (the sample has discarded fields)
    assert all(dom.charts.values()) and len(dom.charts) == 5


@pytest.mark.parametrize("width", WIDTHS)
def test_everything_fits_the_window_even_with_every_example_open(sample_report, tmp_path, width):
    page = (sample_report / report.REPORT_FILE).read_text()
    assert "<details>" in page
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("<details>", "<details open>").replace("</body>", PROBE + "</body>"))
    body = re.search(r"<body[^>]*>", rendered_dom(probe, width)).group(0)
    attributes = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body))
    assert int(attributes["width"]) == width
    assert int(attributes["scroll-width"]) <= width, body
    assert attributes["outside"] == "", body


if __name__ == "__main__":
    if len(sys.argv) != 3 or browser() is None:
        sys.exit("usage (needs chromium): python tests/test_report_chromium.py REPORT.html OUT.png")
    screenshot(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"wrote {sys.argv[2]}")
