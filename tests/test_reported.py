"""Tests of yocou.results.reported: the paper's tables transcribed exactly, and the arithmetic they must satisfy.

Most tests need only the package's CSVs. The ones that compare the CSVs with the paper's own text (arXiv
2604.01220 as a plain-text page, tables tab-separated) read that page from
../shared/paper/000_c190a1253fdf94ee.txt (beside the repository root), or from $YOCOU_SHARED/paper/... (or
$YOCOU_SHARED/...) when that variable is set; they skip when it is absent.
"""

from __future__ import annotations

import os
import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from yocou.results.reported import available_tables, load_table, table_meta, wide

PAGE_NAME = "000_c190a1253fdf94ee.txt"


def _page_path() -> Path | None:
    candidates = [Path(__file__).resolve().parents[1].parent / "shared" / "paper" / PAGE_NAME]
    env = os.environ.get("YOCOU_SHARED")
    if env:
        candidates += [Path(env) / "paper" / PAGE_NAME, Path(env) / PAGE_NAME]
    for cand in candidates:
        if cand.is_file():
            return cand
    return None


@pytest.fixture(scope="module")
def page() -> str:
    path = _page_path()
    if path is None:
        pytest.skip(
            f"paper page {PAGE_NAME} not found: put the paper's page at ../shared/paper/{PAGE_NAME} (beside the "
            f"repository) or set YOCOU_SHARED to a folder holding paper/{PAGE_NAME}; without it the CSVs cannot be "
            "compared with the printed tables"
        )
    return path.read_text(encoding="utf-8")


def _page_tables(text: str) -> dict[int, dict]:
    """Tab-separated blocks of the page, keyed by the "Table N:" caption that follows each block.

    Returns {n: {"rows": [[cell, ...], ...], "groups": {row_index: label}, "caption": first line}}.
    A line without tabs inside a block is a group label when the next non-blank line has tabs again.
    """
    lines = text.splitlines()
    tables: dict[int, dict] = {}
    rows: list[list[str]] = []
    groups: dict[int, str] = {}
    for i, line in enumerate(lines):
        if "\t" in line:
            rows.append(line.split("\t"))
            continue
        s = line.strip()
        if not s or s == "Appendix":
            continue
        m = re.match(r"Table (\d+):\s*(.*)", s)
        if m:
            if rows:
                tables[int(m.group(1))] = {"rows": rows, "groups": groups, "caption": m.group(2)}
            rows, groups = [], {}
            continue
        nxt = next((x for x in lines[i + 1 :] if x.strip()), "")
        if rows and "\t" in nxt:
            groups[len(rows)] = s
            continue
        rows, groups = [], {}
    return tables


def _half_up(x: Decimal, like: Decimal) -> Decimal:
    return x.quantize(like, rounding=ROUND_HALF_UP)


def _latex_float(s: str) -> float:
    m = re.fullmatch(r"\$(\d+(?:\.\d+)?)\\times 10\^\{(-?\d+)\}\$", s.strip())
    assert m, f"unexpected LR cell {s!r}"
    return float(f"{m.group(1)}e{m.group(2)}")


# --------------------------------------------------------------------------- the page vs the CSVs


def test_every_table_on_page_has_a_csv(page):
    numbers = sorted({int(n) for n in re.findall(r"Table (\d+):", page) if 1 <= int(n) <= 10})
    assert numbers == list(range(1, 11)), f"page lists tables {numbers}"
    assert available_tables() == numbers, "one CSV per printed table, and no others"


def test_one_csv_per_table_of_the_paper():
    """arXiv 2604.01220 prints Tables 1 to 10; one CSV each, and no others."""
    assert available_tables() == list(range(1, 11))


def test_meta_cites_the_paper_and_has_units_and_caption():
    for n in available_tables():
        meta = table_meta(n)
        assert meta["source"] == f"arXiv 2604.01220 (Universal YOCO), Table {n}"
        assert meta["units"], f"Table {n} has no units line"
        assert meta["caption"], f"Table {n} has no caption line"


def test_captions_match_page(page):
    parsed = _page_tables(page)
    for n in available_tables():
        # The page breaks Table 1's and 4's captions at inline math; the first line must match.
        assert table_meta(n)["caption"].startswith(parsed[n]["caption"]), n


@pytest.mark.parametrize("n", range(1, 11))
def test_printed_cells_match_page(page, n):
    tab = _page_tables(page)[n]
    rows = tab["rows"]
    header = rows[0]
    body = rows[1:]
    metric_row = None
    if body and body[0][0] == "":  # Tables 3 and 5: second header row with metric labels
        metric_row, body = body[0], body[1:]
    w = wide(n, as_printed=True)
    w_num = wide(n)
    n_cells = sum(len(r) - 1 for r in body)

    if n in (6, 7):
        assert list(w.index) == [r[0] for r in body]
        assert len(w.columns) == len(header) - 1
        for i, r in enumerate(body):
            for j, cell in enumerate(r[1:]):
                if n == 7 and header[j + 1] == "LR":
                    assert w_num.iloc[i, j] == _latex_float(cell), (n, r[0], header[j + 1])
                else:
                    assert w.iloc[i, j] == cell, (n, r[0], header[j + 1])
                    assert float(w_num.iloc[i, j]) == float(cell)
        assert len(load_table(n)) == len(body)
        return

    assert list(w.index) == [r[0] for r in body], f"Table {n}: model names or order differ"
    assert len(load_table(n)) == n_cells, f"Table {n}: CSV has rows the page does not print"
    for j, h in enumerate(header[1:]):
        col = w.columns[j]
        if n in (8, 9, 10):
            assert int(col) == int(h.rstrip("K")) * 1024, (n, h, col)
        elif n in (3, 5):
            assert str(col).startswith(h), (n, h, col)
        else:
            assert col == h, (n, h, col)
    for i, r in enumerate(body):
        assert len(r) == len(header), (n, r)
        for j, cell in enumerate(r[1:]):
            got = w.iloc[i, j]
            assert got == cell, f"Table {n}, {r[0]!r}, {header[j + 1]!r}: CSV {got!r} != page {cell!r}"
            if n != 1:
                assert float(w_num.iloc[i, j]) == float(cell)

    if metric_row is not None:
        tidy = load_table(n)
        labels = [re.sub(r"\s*\$.*\$", "", c).strip() for c in metric_row[1:]]
        first_model = body[0][0]
        assert list(tidy[tidy.model == first_model].metric) == labels
        assert set(tidy.groupby("column").metric.nunique()) == {1}
    if tab["groups"]:
        tidy = load_table(n)
        group = ""
        for k, r in enumerate(rows):
            group = tab["groups"].get(k, group)
            if r[0] in w.index:
                assert set(tidy[tidy.model == r[0]].group) == {group}, (n, r[0])


def test_csv_data_lines_have_no_comment_char():
    """load_table reads with comment="#"; a '#' inside a data line would silently truncate it."""
    from importlib import resources

    for n in available_tables():
        text = resources.files("yocou.results.reported").joinpath(f"table{n:02d}.csv").read_text("utf-8")
        data = [ln for ln in text.splitlines() if not ln.startswith("#")]
        assert all("#" not in ln for ln in data), n


# --------------------------------------------------------------------------- averages (docs/design.md section 8)


def _row_cells(n: int) -> dict[str, dict[str, Decimal]]:
    t = load_table(n, as_printed=True)
    out: dict[str, dict[str, Decimal]] = {}
    for r in t.itertuples():
        out.setdefault(r.model, {})[r.column] = Decimal(r.value)
    return out


def test_table2_average_is_mean_of_8_columns():
    for model, cells in _row_cells(2).items():
        avg = cells.pop("Average")
        assert len(cells) == 8
        mean = sum(cells.values()) / 8
        assert _half_up(mean, avg) == avg, f"Table 2 {model}: mean {mean} vs printed {avg}"


ACC_COLUMNS = ["LMB. acc", "PIQA", "OBQA", "Hella.", "Wino.", "ARC-E", "ARC-C"]
# Table 3 YOCO: mean of the printed (1-decimal) cells is 46.943, printed Avg. is 47.0 = Table 5's 46.95
# rounded. Kept as a documented discrepancy; the test fails if the CSV is "corrected".
KNOWN_AVG_MISMATCH = {(3, "YOCO")}


@pytest.mark.parametrize("n", [3, 5])
def test_table3_table5_avg_is_mean_of_acc_columns(n):
    tidy = load_table(n)
    acc_cols = list(dict.fromkeys(tidy[(tidy.metric != "ppl") & (tidy.column != "Avg.")].column))
    assert acc_cols == ACC_COLUMNS
    for model, cells in _row_cells(n).items():
        avg = cells["Avg."]
        mean = sum(cells[c] for c in ACC_COLUMNS) / len(ACC_COLUMNS)
        strict = _half_up(mean, avg) == avg
        if (n, model) in KNOWN_AVG_MISMATCH:
            assert not strict, f"Table {n} {model}: expected the known mismatch, got a match"
            # cells rounded to 0.1 (mean error <= 0.05) + average rounded to 0.1 (<= 0.05)
            assert abs(mean - avg) <= Decimal("0.1")
        else:
            assert strict, f"Table {n} {model}: mean {mean} vs printed {avg}"


def test_table3_yoco_is_table5_yoco_rounded():
    t3 = _row_cells(3)["YOCO"]
    t5 = _row_cells(5)["YOCO"]
    assert t3.keys() == t5.keys()
    for col, v3 in t3.items():
        assert _half_up(t5[col], v3) == v3, (col, t5[col], v3)
    assert t3["Avg."] == _half_up(t5["Avg."], Decimal("0.1")) == Decimal("47.0")


# --------------------------------------------------------------------------- Table 10 (docs/design.md section 5)


def test_table10_equals_kv_cache_formulas():
    L, d_kv, b, W, T, rins_apps = 20, 512, 2, 512, 3, 40
    L_s = L // 2
    formulas = {
        "Transformer": lambda N: 2 * b * L * d_kv * N,
        "RINS": lambda N: 2 * b * rins_apps * d_kv * N,
        "YOCO": lambda N: 2 * b * d_kv * N + 2 * b * L_s * W * d_kv,
        "YOCO-U": lambda N: 2 * b * d_kv * N + 2 * b * T * L_s * W * d_kv,
    }
    t = load_table(10)
    assert len(t) == 24
    assert sorted(set(t.seq_len)) == [8192 * 2**k for k in range(6)]
    for r in t.itertuples():
        assert formulas[r.model](int(r.seq_len)) == int(r.value) * 2**20, (r.model, r.seq_len, r.value)
    meta = table_meta(10)
    assert "MiB" in meta["units"] and "MB" in meta["units"]


# --------------------------------------------------------------------------- API


@pytest.mark.parametrize("bad", [0, 11, -1])
def test_missing_table_raises_value_error(bad):
    with pytest.raises(ValueError, match=str(bad)):
        load_table(bad)
    with pytest.raises(ValueError, match=str(bad)):
        table_meta(bad)


def test_layouts_and_types():
    for n in (2, 3, 4, 5):
        t = load_table(n)
        assert list(t.columns) == ["model", "group", "column", "metric", "value"]
        assert t.value.dtype.kind == "f"
        assert not t.group.isna().any() and not t.metric.isna().any()
        assert not t.duplicated(["model", "column"]).any()
    for n in (8, 9, 10):
        t = load_table(n)
        assert list(t.columns) == ["model", "seq_len", "value"]
        assert t.seq_len.dtype.kind == "i" and t.value.dtype.kind == "i"
    t7 = load_table(7)
    assert list(t7.columns) == ["size", "d_model", "n_layers", "n_heads", "lr"]
    assert t7.lr.dtype.kind == "f" and set(t7.lr) == {6e-4, 3e-4}
    assert (t7.d_model / t7.n_heads == 128).all()
    assert list(load_table(1).columns) == ["model", "quantity", "expression"]
    for n in available_tables():
        meta = table_meta(n)
        assert set(meta) == {"table", "source", "caption", "units", "notes"}
    assert any("RINS" in x and "YOCO-U" in x for x in table_meta(3)["notes"])
    assert any("Upper Loop" in x for x in table_meta(5)["notes"])
