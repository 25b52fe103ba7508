"""Screenshot the app's Batch size view showing the CPU result (for docs/benchmarks.md).

    python bench/screenshot_batch.py [--out docs/screenshots/batch-size.png] [--lang English|中文]

Starts ``python app.py --preset tiny``, opens the Batch size tab in headless Chromium, loads the
project's CPU result (docs/benchmarks/tiny-cpu/bench.json) and writes one PNG.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from app_driver import browser_page, missing_browser, open_app, open_tab, set_language, wait_for_plot  # noqa: E402
from app_server import running_app  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots" / "batch-size.png")
    parser.add_argument("--lang", default="English")
    args = parser.parse_args()
    reason = missing_browser()
    if reason:
        print(f"cannot take the screenshot: {reason}", file=sys.stderr)
        return 1
    with running_app("tiny") as url, browser_page() as page:
        open_app(page, url)
        set_language(page, args.lang)
        open_tab(page, "batch")
        page.click("#batch-example")
        wait_for_plot(page, "batch-plot", "p.data.some(t => t.name == 'ngram')")
        page.wait_for_timeout(800)
        page.screenshot(path=args.out, full_page=True)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
