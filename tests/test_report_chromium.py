"""report.html as a browser shows it: headless Chromium renders the sample's report.

Marked ``chromium`` and skipped where no Chromium binary is installed (``.ci/run`` installs
Debian's ``chromium`` when it is missing and it runs as root). To refresh the README's
screenshot from a run's output::

    python tests/test_report_chromium.py out/report.html docs/images/report.png
"""

from __future__ import annotations

import json
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

from pipeline import report  # noqa: E402

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
#: The README's screenshot: wide enough for two charts a row, tall enough for the tables.
WINDOW = (1200, 2500)


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


def rendered_dom(page: Path) -> str:
    done = _chromium("--dump-dom", page.resolve().as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


pytestmark = [
    pytest.mark.chromium,
    pytest.mark.slow,  # a headless browser per test
    pytest.mark.skipif(browser() is None, reason="no chromium binary (apt-get install chromium)"),
]


@pytest.fixture(scope="module")
def sample_report(sample_run):
    """The session's one run of the bundled sample (tests/conftest.py), report included."""
    pytest.importorskip("matplotlib")
    assert sample_run.status == 0
    return sample_run.out


def _pixels_of(png: Path, hex_color: str) -> int:
    import numpy  # numpy and pillow come with matplotlib
    from PIL import Image

    wanted = [int(hex_color[i : i + 2], 16) for i in (1, 3, 5)]
    pixels = numpy.asarray(Image.open(png).convert("RGB"))
    return int((pixels == wanted).all(axis=-1).sum())


def test_chromium_draws_the_charts(sample_report, tmp_path):
    png = tmp_path / "report.png"
    screenshot(sample_report / report.REPORT_FILE, png)
    # Solid bars in the chart colours: drops (blue), dead letters (red), messages (green).
    for color in (report.BAR_COLOR, report.ALERT_COLOR, report.OK_COLOR):
        assert _pixels_of(png, color) > 2000, f"no bars of colour {color} on the rendered page"


def test_the_rendered_page_holds_the_numbers_of_summary_json(sample_report):
    dom = parse(rendered_dom(sample_report / report.REPORT_FILE))
    summary = json.loads((sample_report / "summary.json").read_text())
    expected = {key: shown(value) for key, value in flat(summary).items()}
    assert {key: dom.values.get(key) for key in expected} == expected
    # drops, dead letters, the histogram, messages, and the ledger (the sample has discarded fields)
    assert all(dom.charts.values()) and len(dom.charts) == 5


if __name__ == "__main__":
    if len(sys.argv) != 3 or browser() is None:
        sys.exit("usage (needs chromium): python tests/test_report_chromium.py REPORT.html OUT.png")
    screenshot(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"wrote {sys.argv[2]}")
