"""HTML pages of the result tables, for ``snakemake --report``.

Snakemake's report shows an HTML item inline (in a frame) and offers Markdown and CSV items only as downloads, so
every table the workflow marks for the report also gets a small self-contained page (``<folder>/html/<stem>.html``,
the rule ``report_pages``): a Markdown table through Python-Markdown (its ``tables`` extension: headings, pipe
tables, lists, inline code; an image link becomes its name), a CSV through pandas. No images and no scripts: a page stays far below the 2 MiB
that Chromium allows a ``data:`` URL, which is how the report's single-file form embeds it (:data:`DATA_URL_LIMIT`;
:func:`check_embeddable`).

Run::

    python -m yocou.results.render.pages results/tiny/table2.md=results/tiny/html/table2.html ...
"""

from __future__ import annotations

import argparse
import base64
import html
import os
import re
import sys
from pathlib import Path

from yocou.utils.io import atomic_write_text

__all__ = ["DATA_URL_LIMIT", "check_embeddable", "data_url_length", "page_html", "write_page"]

#: Chromium's limit on a URL's length (``url::kMaxURLChars``, 2 MiB), which a report item's ``data:`` URL must fit.
DATA_URL_LIMIT = 2 * 1024 * 1024

_STYLE = ("body{font-family:system-ui,sans-serif;margin:1em;font-size:13px}"
          "table{border-collapse:collapse;margin:0.5em 0 1.2em 0}"
          "td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top;text-align:left}"
          "th{background:#f3f3f3}code{background:#f3f3f3;padding:0 2px}sub{color:#666}")


def page_html(source: str | os.PathLike) -> str:
    """The HTML page of the table file ``source`` (``.md`` or ``.csv``).

    Raises:
        FileNotFoundError: no such file.
        ValueError: another suffix, an empty file, or a CSV pandas cannot read (naming the file).
    """
    import markdown
    import pandas as pd

    src = Path(source)
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no such table file")
    text = src.read_text(encoding="utf-8")
    if not text.strip():
        raise ValueError(f"{src}: empty table file")
    if src.suffix == ".md":
        body = markdown.markdown(text, extensions=["tables", "fenced_code", "sane_lists"])
        # an image link of the Markdown (the audit's figures) would point out of the page: name it instead
        body = re.sub(r"<img\s[^>]*?alt=\"([^\"]*)\"[^>]*>",
                      lambda m: f"<em>[figure: {m.group(1)}; in the report, its own item]</em>", body)
    elif src.suffix == ".csv":
        try:
            df = pd.read_csv(src, keep_default_na=False)
        except (ValueError, pd.errors.ParserError) as e:
            raise ValueError(f"{src}: not a readable CSV table ({str(e).splitlines()[0]})") from None
        body = (f"<p><code>{html.escape(src.name)}</code>: {len(df)} rows, {len(df.columns)} columns</p>"
                + df.to_html(index=False, border=0, escape=True))
    else:
        raise ValueError(f"{src}: expected a .md or .csv table, got {src.suffix or 'no suffix'}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(src.name)}</title>"
            f"<style>{_STYLE}</style></head><body>{body}</body></html>\n")


def data_url_length(data: bytes, mime: str = "text/html", filename: str = "x.html") -> int:
    """Characters of the ``data:`` URL that Snakemake's single-file report builds for a file of ``data``
    (``data:<mime>;charset=utf8;filename=<name>;base64,<base64>``)."""
    return len(f"data:{mime};charset=utf8;filename={filename};base64,") + len(base64.b64encode(data))


def check_embeddable(path: str | os.PathLike) -> int:
    """The ``data:`` URL length of the file ``path`` as a report item; raises when it would exceed
    :data:`DATA_URL_LIMIT`, which a browser would show as a blank item.

    Raises:
        ValueError: naming the file, its size and the limit.
    """
    import mimetypes

    p = Path(path)
    mime = mimetypes.guess_type(p.name)[0] or "text/plain"
    n = data_url_length(p.read_bytes(), mime, p.name)
    if n > DATA_URL_LIMIT:
        raise ValueError(f"{p}: {p.stat().st_size} bytes make a {n}-character data: URL, over the "
                         f"{DATA_URL_LIMIT} that Chromium allows: the report would show it blank (shrink or split it)")
    return n


def write_page(source: str | os.PathLike, page: str | os.PathLike) -> Path:
    """Write the page of ``source`` to ``page`` (atomically) and check it fits a ``data:`` URL."""
    out = Path(page)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, page_html(source))
    check_embeddable(out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m yocou.results.render.pages", description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", metavar="TABLE=PAGE", help="a table (.md or .csv) and the page to write")
    a = ap.parse_args(argv)
    pairs = []
    for pair in a.pairs:
        src, sep, page = pair.partition("=")
        if not sep or not src or not page:
            raise ValueError(f"TABLE=PAGE: expected a table and a page joined by '=', got {pair!r}")
        pairs.append((src, page))
    pages = [p for _s, p in pairs]
    if len(set(pages)) != len(pages):
        raise ValueError(f"TABLE=PAGE: a page is named twice ({sorted({p for p in pages if pages.count(p) > 1})})")
    from yocou.utils.guard import IOPaths, check_args

    # TABLE=PAGE is two paths in one word: declared here, numbered from 1
    check_args(a, IOPaths({f"TABLE {i}": s for i, (s, _p) in enumerate(pairs, 1)},
                          {f"PAGE {i}": p for i, (_s, p) in enumerate(pairs, 1)}))
    for src, page in pairs:
        write_page(src, page)
        print(f"{src} -> {page}")
    return 0


if __name__ == "__main__":
    from yocou.utils.entry import run_main

    sys.exit(run_main(main, prog="python -m yocou.results.render.pages"))
