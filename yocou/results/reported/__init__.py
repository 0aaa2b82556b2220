"""Numbers reported in the paper, transcribed exactly as printed.

Source: "Universal YOCO for Efficient Depth Scaling" (Sun, Dong, Ye, Huang, Wang, Wei; arXiv 2604.01220),
Tables 1 to 10. See docs/design.md sections 5, 6 and 8.

One CSV per table, ``tableNN.csv`` beside this module. Each starts with ``#`` comment lines::

    # source: arXiv 2604.01220 (Universal YOCO), Table N
    # caption: <caption as printed>
    # units: <units of the value cells>
    # note: <anything odd about the printed table; one line per note>

Layouts (tidy, one row per printed cell, rows in the paper's order):

- Table 1: ``model, quantity, expression`` (LaTeX strings as printed).
- Tables 2-5: ``model, group, column, metric, value``; ``group`` is the printed section label
  (Non-Recursive / Recursive) or blank, ``metric`` the header's metric label (ppl, acc, acc_n) or blank
  when the page prints none. Tables 3 and 5 print "LMB." twice; the columns are named "LMB. ppl" and
  "LMB. acc" (and "Wiki. ppl") so that names are unique.
- Table 6: ``param, value``. Table 7: ``size, d_model, n_layers, n_heads, lr`` (lr as float).
- Tables 8-10: ``model, seq_len, value`` with seq_len in tokens (8K = 8192, ..., 256K = 262144);
  Table 10 is in MiB although the page says "MB" (docs/design.md section 5).
"""

from __future__ import annotations

from importlib import resources

import pandas as pd

__all__ = ["load_table", "table_meta", "available_tables", "wide"]

_TIDY_RESULT_TABLES = {2, 3, 4, 5}
_SEQ_TABLES = {8, 9, 10}


def _path(n: int):
    """Return the resource path of Table ``n``'s CSV, or raise ValueError naming ``n``."""
    if isinstance(n, bool) or not isinstance(n, int) or n not in available_tables():
        raise ValueError(
            f"no reported table {n!r} in yocou.results.reported; available tables: {available_tables()}"
        )
    return resources.files(__name__).joinpath(f"table{n:02d}.csv")


def available_tables() -> list[int]:
    """Table numbers with a transcribed CSV (``tableNN.csv``), sorted."""
    out = []
    for entry in resources.files(__name__).iterdir():
        name = entry.name
        if name.startswith("table") and name.endswith(".csv") and name[5:-4].isdigit():
            out.append(int(name[5:-4]))
    return sorted(out)


def load_table(n: int, as_printed: bool = False) -> pd.DataFrame:
    """Load Table ``n`` of the paper (arXiv 2604.01220) as a tidy DataFrame.

    With ``as_printed=True`` every column is returned as the string in the CSV, which keeps the printed
    precision of each number (e.g. "46.50", "18.30"); otherwise numeric columns are parsed. Blank text
    cells (``group``, ``metric``) are empty strings, never NaN. Raises ValueError naming ``n`` if the table
    does not exist.
    """
    p = _path(n)
    with p.open("r", encoding="utf-8") as fh:
        return read_reported_csv(fh, str(p), as_printed=as_printed)


def read_reported_csv(source, name: str, *, as_printed: bool = True) -> pd.DataFrame:
    """A reported table's CSV (``#`` comment lines, then a header and rows) from a path or an open file.

    Raises:
        ValueError: naming ``name``: not UTF-8 text, no header or no rows (a file cut short), a row with the wrong
            number of fields, a last line without its newline (cut mid-row), or a cell that reads as a number but
            is not finite (``nan``, ``inf``, ``-1e400``: a paper prints none of these).
    """
    try:
        text = source.read() if hasattr(source, "read") else open(source, encoding="utf-8").read()  # noqa: SIM115
    except UnicodeDecodeError as e:
        raise ValueError(f"reported table {name}: not UTF-8 text (byte {e.start}); expected a CSV file") from None
    if text and not text.endswith("\n"):
        raise ValueError(f"reported table {name}: the last line has no newline (the file is cut short)")
    import io

    try:
        df = pd.read_csv(io.StringIO(text), comment="#", keep_default_na=False,
                         dtype=str if as_printed else None)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise ValueError(f"reported table {name}: cannot read as CSV ({str(e).strip().splitlines()[0]}); "
                         "expected '#' comment lines, a header and one row per printed cell group") from None
    if df.empty:
        raise ValueError(f"reported table {name}: a header but no rows (the file is cut short)")
    import math

    for col in df.columns:
        for i, cell in enumerate(df[col].astype(str)):
            try:
                v = float(cell)
            except ValueError:
                continue
            if not math.isfinite(v):
                raise ValueError(f"reported table {name}: row {i + 1}, column {col!r}: {cell!r} is not a finite "
                                 "number (a printed table holds none)")
    return df


def table_meta(n: int) -> dict:
    """Parsed ``#`` comment lines of Table ``n``'s CSV.

    Returns ``{"table": n, "source": str, "caption": str, "units": str, "notes": [str, ...]}``; ``source``
    names the paper and the table (``"arXiv 2604.01220 (Universal YOCO), Table N"``). Raises ValueError
    naming ``n`` if the table does not exist.
    """
    meta: dict = {"table": n, "source": "", "caption": "", "units": "", "notes": []}
    with _path(n).open("r", encoding="utf-8") as fh:
        for line in fh:
            if not line.startswith("#"):
                break
            key, _, value = line[1:].strip().partition(":")
            key, value = key.strip(), value.strip()
            if key == "note":
                meta["notes"].append(value)
            elif key in ("source", "caption", "units"):
                meta[key] = value
            else:  # unkeyed comment line: keep it as a note
                meta["notes"].append(line[1:].strip())
    return meta


def _ordered(values) -> list:
    """Unique values in order of first appearance (the paper's order)."""
    return list(dict.fromkeys(values))


def wide(n: int, as_printed: bool = False) -> pd.DataFrame:
    """Table ``n`` pivoted back to the paper's layout (arXiv 2604.01220, Table ``n``).

    Rows and columns are in the order printed on the page:

    - Table 1: index model, columns the three complexity quantities, cells LaTeX expressions.
    - Tables 2-5: index model, columns the (unique) column names, cells the values (the row groups of
      Tables 3 and 5 are in :func:`load_table`'s ``group`` column).
    - Table 6: index param, one column ``value``. Table 7: index size, columns d_model..lr.
    - Tables 8-10: index model, columns seq_len in tokens (8192 ... 262144).
    """
    df = load_table(n, as_printed=as_printed)
    if n == 1:
        index, columns, values = "model", "quantity", "expression"
    elif n in _TIDY_RESULT_TABLES:
        index, columns, values = "model", "column", "value"
    elif n in _SEQ_TABLES:
        index, columns, values = "model", "seq_len", "value"
    else:  # Tables 6 and 7 are already in the paper's layout
        return df.set_index(df.columns[0])
    out = df.pivot(index=index, columns=columns, values=values)
    out = out.loc[_ordered(df[index]), _ordered(df[columns])]
    out.columns.name = None
    return out
