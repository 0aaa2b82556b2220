"""Open every item of a ``snakemake --report`` page in headless Chromium, screenshot it and check it is not blank.

The single-file report (``snakemake --report report.html``) is a page whose items are ``data:`` URLs shown in an
``<img>`` (figures) or an ``<iframe>`` (HTML pages); Chromium shows nothing for a URL over 2 MiB. For each item of
the page's ``results`` this script writes a copy of the report that opens that item on load (the report's own
view manager, as a click in its menu does), screenshots it with ``chromium --headless``, and measures the share of
non-white pixels in the content pane (right of the menu). Markdown and CSV items are downloads in the report, not
views: for those it checks that the same item has its HTML page (``<folder>/html/<stem>.html``). Every item's
``data:`` URL length is checked against the limit. Writes the screenshots to ``--shots`` and a summary (JSON with
provenance, and Markdown) to ``--out``; exits 1 when an item is blank, too large or lacks its page.

Run (the README's command; Debian's ``chromium`` package)::

    snakemake --cores 2 --report report.html
    python benchmarks/report_screenshots.py --report report.html --shots report_shots \\
        --out benchmarks/results/report_screenshots_tiny.json
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from yocou.results.render.pages import DATA_URL_LIMIT  # noqa: E402
from yocou.utils.entry import run_main  # noqa: E402
from yocou.utils.io import atomic_write_json, atomic_write_text, provenance  # noqa: E402

WIDTH, HEIGHT = 1400, 1000
MENU_PX = 330  # the report's menu column at this width; the content pane is to its right
VIEWS = {"image/png": "img", "image/svg+xml": "img", "image/jpeg": "img", "text/html": "html",
         "application/pdf": "pdf"}


def report_results(page: str) -> dict[str, Any]:
    """The report's ``var results = {...};`` (path -> entry with ``data_uri``, ``mime_type``, ``caption``).

    Raises:
        ValueError: the page is not a Snakemake report.
    """
    m = re.search(r"^\s*var results = (\{.*\});\s*$", page, re.M)
    if not m:
        raise ValueError("--report: no 'var results' in the page (not a snakemake --report HTML file)")
    return json.loads(m.group(1))


def non_white_share(png: Path, x0: int) -> float:
    """Share of pixels right of column ``x0`` that are not (near) white."""
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(str(png))[:, x0:, :3]
    return float((np.abs(1.0 - img).max(axis=-1) > 0.06).mean())


def screenshot(chromium: str, page: str, path: str, out: Path, tmp: Path, timeout: float = 600) -> None:
    """Open ``page`` with item ``path`` selected and write its screenshot to ``out``; a Chromium that has not
    finished after ``timeout`` seconds (a loaded machine) fails naming the item and the limit."""
    i = page.rindex("</body>")
    opener = (f"<script>setTimeout(() => new ToggleViewManager(app).handleSelectedResult({json.dumps(path)}), 400);"
              "</script>")
    copy = tmp / "open.html"
    copy.write_text(page[:i] + opener + page[i:], encoding="utf-8")
    try:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--window-size={WIDTH},{HEIGHT}", "--virtual-time-budget=4000", f"--screenshot={out}",
                        copy.as_uri()], check=True, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"{path}: Chromium took more than --timeout {timeout:g} s (a loaded machine? raise it)") \
            from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="report_screenshots.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--report", required=True, help="the single-file report (snakemake --report report.html)")
    ap.add_argument("--shots", required=True, help="folder for the screenshots (created)")
    ap.add_argument("--out", required=True, help="summary JSON (a .md beside it)")
    ap.add_argument("--min-share", type=float, default=0.005, help="non-white share below which a view is blank")
    ap.add_argument("--timeout", type=float, default=600, help="seconds one screenshot may take (default 600)")
    a = ap.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise FileNotFoundError("chromium: not on PATH (Debian: apt-get install chromium)")
    page = Path(a.report).read_text(encoding="utf-8")
    results = report_results(page)
    shots = Path(a.shots)
    shots.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path, entry in sorted(results.items()):
            mime = entry.get("mime_type", "")
            n = len(entry["data_uri"])
            row: dict[str, Any] = {"item": path, "mime": mime, "data_url_chars": n, "fits": n <= DATA_URL_LIMIT}
            if mime in VIEWS:
                png = shots / (path.replace("/", "__") + ".png")
                screenshot(chromium, page, path, png, Path(tmp), a.timeout)
                row["view"] = VIEWS[mime]
                row["non_white_share"] = round(non_white_share(png, MENU_PX), 4)
                row["ok"] = row["fits"] and row["non_white_share"] >= a.min_share
                row["screenshot"] = str(png)
            else:
                folder, name = path.rsplit("/", 1)
                twin = f"{folder}/html/{name.rsplit('.', 1)[0]}.html"
                row["view"] = "download"
                row["html_page"] = twin if twin in results else None
                row["ok"] = row["fits"] and row["html_page"] is not None
            rows.append(row)
            print(f"{'ok  ' if row['ok'] else 'FAIL'} {path} ({row['view']}, {n} chars"
                  + (f", {row['non_white_share']:.3f} non-white" if "non_white_share" in row else "") + ")")
    bad = [r["item"] for r in rows if not r["ok"]]
    version = subprocess.run([chromium, "--version"], capture_output=True, text=True).stdout.strip()
    out = {"report": a.report, "chromium": version, "data_url_limit": DATA_URL_LIMIT, "min_share": a.min_share,
           "n_items": len(rows), "n_views": sum(r["view"] != "download" for r in rows), "failing": bad, "items": rows,
           "provenance": provenance({"report_screenshots": vars(a)}, None)}
    atomic_write_json(a.out, out)
    lines = [f"# The report's items in headless Chromium ({version})", "",
             f"{len(rows)} items; {out['n_views']} shown in the page (figures, HTML pages), the rest downloads with "
             f"an HTML page beside them. Failing: {', '.join(bad) if bad else 'none'}.", "",
             "| item | view | data: URL chars | non-white share | ok |", "|---|---|---:|---:|---|"]
    lines += [f"| `{r['item']}` | {r['view']} | {r['data_url_chars']:,} | {r.get('non_white_share', '')} | "
              f"{'yes' if r['ok'] else 'NO'} |" for r in rows]
    atomic_write_text(Path(a.out).with_suffix(".md"), "\n".join(lines) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog="report_screenshots.py"))
