"""The claims registry and the paper's tables as one source of numbers for the audit.

Source: the paper, "Universal YOCO for Efficient Depth Scaling" (arXiv 2604.01220). Prose and caption claims
live in ``claims.yaml`` beside this module; table cells are read from ``yocou/results/reported/tableNN.csv`` (or from a
copy of those CSVs, ``reported_dir``) and expanded into one claim per printed cell, so the registry enumerates
every number of the paper's tables and prose without duplicating any.

Cell references (used by checks, tests and the report) are ``T<n>:<row>|<column>``:

- Table 1: row = model, column = quantity (``T1:YOCO|KV Cache Memory``);
- Tables 2-5: row = model, column = printed column (``T3:YOCO|Avg.``);
- Table 6: row = param, column ``value`` (``T6:Layers|value``); Table 7: row = size, column = field
  (``T7:1.3B|d_model``);
- Tables 8-10: row = model, column = sequence length in tokens (``T10:YOCO-U|8192``).

A prose claim's own value is referenced as ``C:<claim id>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["Sources", "load_sources", "load_registry", "load_claims", "CLAIM_FIELDS", "TABLE_LAYOUT", "cell_ref"]

CLAIM_FIELDS = ("id", "location", "value", "unit", "compares", "printed", "quote", "testable_at_small_scale")
TABLE_FIELDS = ("table", "location", "csv", "unit", "compares")

# Table -> (row key column, column key column or None for Table 7's wide layout, value column).
TABLE_LAYOUT: dict[int, tuple[str, str | None, str]] = {
    1: ("model", "quantity", "expression"),
    2: ("model", "column", "value"), 3: ("model", "column", "value"),
    4: ("model", "column", "value"), 5: ("model", "column", "value"),
    6: ("param", None, "value"),
    7: ("size", None, ""),
    8: ("model", "seq_len", "value"), 9: ("model", "seq_len", "value"), 10: ("model", "seq_len", "value"),
}


def cell_ref(n: int, row: Any, col: Any) -> str:
    """The reference string of one printed cell, ``T<n>:<row>|<col>``."""
    return f"T{n}:{row}|{col}"


def _registry_path() -> Path:
    return Path(str(resources.files(__package__).joinpath("claims.yaml")))


def load_registry(path: str | Path | None = None) -> dict:
    """Read and validate the registry YAML (default: ``yocou/results/audit/claims.yaml``).

    Returns the parsed mapping with keys ``tables`` (list) and ``claims`` (list).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the YAML does not parse, a required field is missing, a table number is repeated, or a
            claim id is repeated; the message names the file and the field.
    """
    import yaml

    p = Path(path) if path is not None else _registry_path()
    if not p.is_file():
        raise FileNotFoundError(f"claims registry {p} not found")
    from yocou.utils.yamlio import (
        load_yaml,  # libyaml's parser when available; a duplicated key is an error
    )

    try:
        data = load_yaml(p)
    except yaml.YAMLError as e:
        raise ValueError(f"{p}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p}: expected a mapping with keys 'tables' and 'claims'")
    for key in ("tables", "claims"):
        if not isinstance(data.get(key), list):
            raise ValueError(f"{p}: '{key}' must be a list")

    def entries(key: str, fields: tuple[str, ...]):  # noqa: ANN202
        """(index, entry) of ``data[key]``, each a mapping holding every one of ``fields``."""
        for i, e in enumerate(data[key]):
            if not isinstance(e, dict):
                raise ValueError(f"{p}: {key}[{i}] must be a mapping")
            for f in fields:
                if f not in e:
                    ident = f" ({e.get('id', '?')})" if key == "claims" else ""
                    raise ValueError(f"{p}: {key}[{i}]{ident} lacks field '{f}'")
            yield i, e

    seen_tables: set[int] = set()
    for i, t in entries("tables", TABLE_FIELDS):
        if not isinstance(t["table"], int) or t["table"] in seen_tables:
            raise ValueError(f"{p}: tables[{i}].table must be a unique int, got {t['table']!r}")
        seen_tables.add(t["table"])
    seen: set[str] = set()
    for i, c in entries("claims", CLAIM_FIELDS):
        if not isinstance(c["id"], str) or c["id"] in seen or c["id"].startswith("T"):
            raise ValueError(f"{p}: claims[{i}].id must be a unique string not starting with 'T', got {c['id']!r}")
        if not isinstance(c["printed"], bool):
            raise ValueError(f"{p}: claims[{i}] ({c['id']}).printed must be true or false")
        seen.add(c["id"])
    data["_path"] = str(p)
    return data


def _read_table_csv(path: Path) -> pd.DataFrame:
    """A reported table's CSV as printed strings (the options of :func:`yocou.results.reported.load_table`)."""
    if not path.is_file():
        raise FileNotFoundError(f"reported table {path} not found")
    from yocou.results.reported import read_reported_csv

    return read_reported_csv(path, str(path))


@dataclass
class Sources:
    """Everything the consistency checks read: the printed tables and the registry's prose claims.

    Attributes:
        tables: table number -> tidy DataFrame of strings exactly as printed (``yocou.results.reported`` layout).
        claims: prose-claim id -> registry entry (mapping with ``value``, ``unit``, ...).
        registry: the parsed registry (``tables`` entries and ``claims``).
        origin: where the tables were read from (package or a directory), for messages.
    """

    tables: dict[int, pd.DataFrame]
    claims: dict[str, dict]
    registry: dict
    origin: str = "yocou/results/reported"
    _index: dict[str, tuple[int, int, str]] = field(default_factory=dict, repr=False)

    def _build_index(self) -> None:
        self._index = {}
        for n, df in self.tables.items():
            rkey, ckey, vcol = TABLE_LAYOUT[n]
            for i, r in df.iterrows():
                if n == 7:
                    for c in df.columns[1:]:
                        self._index[cell_ref(n, r[rkey], c)] = (n, i, c)
                else:
                    col = r[ckey] if ckey else "value"
                    self._index[cell_ref(n, r[rkey], col)] = (n, i, vcol)

    def refs(self, n: int | None = None) -> list[str]:
        """Every cell reference (of Table ``n``, or of all tables), in the printed order."""
        if not self._index:
            self._build_index()
        return [r for r, (t, _, _) in self._index.items() if n is None or t == n]

    def text(self, ref: str) -> str:
        """The printed text of a cell (``T..``) or the stated value of a prose claim (``C:<id>``).

        Raises:
            ValueError: unknown reference (a row or column missing from a table copy), naming it.
        """
        if ref.startswith("C:"):
            cid = ref[2:]
            if cid not in self.claims:
                raise ValueError(f"no claim {cid!r} in the registry {self.registry.get('_path')}")
            return str(self.claims[cid]["value"])
        if not self._index:
            self._build_index()
        if ref not in self._index:
            raise ValueError(f"no cell {ref!r} in the reported tables ({self.origin})")
        n, i, col = self._index[ref]
        return str(self.tables[n].at[i, col])

    def num(self, ref: str) -> float:
        """A cell or claim value as a float.

        Raises:
            ValueError: unknown reference, or the value is not a number, naming the cell and source.
        """
        s = self.text(ref)
        try:
            return float(s)
        except ValueError:
            raise ValueError(f"{ref} ({self.origin}): expected a number, got {s!r}") from None

    def rows(self, n: int) -> list[str]:
        """Row labels of Table ``n`` in the printed order."""
        rkey = TABLE_LAYOUT[n][0]
        return list(dict.fromkeys(self.tables[n][rkey]))

    def columns(self, n: int) -> list[str]:
        """Column labels of Table ``n`` in the printed order (strings; sequence lengths in tokens)."""
        rkey, ckey, _ = TABLE_LAYOUT[n]
        if n == 7:
            return list(self.tables[n].columns[1:])
        if ckey is None:
            return ["value"]
        return list(dict.fromkeys(self.tables[n][ckey]))


def load_sources(reported_dir: str | Path | None = None, registry_path: str | Path | None = None) -> Sources:
    """Load the reported tables (package CSVs, or ``tableNN.csv`` in ``reported_dir``) and the registry.

    Raises:
        FileNotFoundError: a table CSV named by the registry, or the registry, is missing.
        ValueError: the registry is malformed (see :func:`load_registry`) or a CSV lacks its layout's columns.
    """
    reg = load_registry(registry_path)
    tables: dict[int, pd.DataFrame] = {}
    for t in reg["tables"]:
        n = t["table"]
        if n not in TABLE_LAYOUT:
            raise ValueError(f"{reg['_path']}: table {n} has no known layout (known: {sorted(TABLE_LAYOUT)})")
        if reported_dir is not None:
            path = Path(reported_dir) / f"table{n:02d}.csv"
        else:
            path = Path(str(resources.files("yocou.results.reported").joinpath(f"table{n:02d}.csv")))
        df = _read_table_csv(path)
        rkey, ckey, vcol = TABLE_LAYOUT[n]
        need = [c for c in (rkey, ckey, vcol) if c]
        missing = [c for c in need if c not in df.columns]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing} of Table {n}'s layout {need}")
        tables[n] = df
    claims = {c["id"]: c for c in reg["claims"]}
    origin = str(reported_dir) if reported_dir is not None else "yocou/results/reported"
    return Sources(tables=tables, claims=claims, registry=reg, origin=origin)


def load_claims(sources: Sources | None = None) -> pd.DataFrame:
    """Every claim as one row: prose/caption claims of the registry plus one claim per printed table cell.

    Columns: ``id, kind (prose|table_cell), table (int or <NA>), location, value, unit, compares, printed,
    testable_at_small_scale, quote``. Table cells take ``unit`` and ``compares`` from their table entry.
    """
    src = sources or load_sources()
    rows: list[dict] = []
    for c in src.registry["claims"]:
        rows.append({"id": c["id"], "kind": "prose", "table": pd.NA, "location": c["location"],
                     "value": str(c["value"]), "unit": c["unit"], "compares": c["compares"],
                     "printed": c["printed"], "testable_at_small_scale": c["testable_at_small_scale"],
                     "quote": c["quote"]})
    for t in src.registry["tables"]:
        n = t["table"]
        for ref in src.refs(n):
            row, col = ref.split(":", 1)[1].split("|", 1)
            rows.append({"id": ref, "kind": "table_cell", "table": n,
                         "location": f"{t['location']}, row {row!r}, column {col!r}",
                         "value": src.text(ref), "unit": t["unit"], "compares": f"{row} / {col}: {t['compares']}",
                         "printed": True, "testable_at_small_scale": n not in (6, 7),
                         "quote": f"printed cell of Table {n}"})
    out = pd.DataFrame(rows)
    out["table"] = out["table"].astype("Int64")
    return out
