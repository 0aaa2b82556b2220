"""Paper-facing names, in one place: display labels of roles and runs, colours, the paper's length
grid and the row labels the paper prints for each study role.

Nothing here is parsed back: renderers turn identifiers into these strings; the audit maps study roles to the
paper's printed rows through :data:`PAPER_ROWS`, never by reading a label.
"""

from __future__ import annotations

__all__ = ["LABELS", "COLORS", "label", "PAPER_LENGTHS", "len_label", "PAPER_ROWS", "paper_row", "NIAH_TASKS"]

# display label of a run or role (the default configs name runs after their roles)
LABELS = {"transformer": "Transformer", "yoco": "YOCO", "rins": "RINS", "yocou": "YOCO-U", "loop": "Loop/Universal TRM",
          "upper_loop": "Upper Loop", "upper_loop_nokv": "Upper Loop w/o Shared KV",
          "yoco_deep": "YOCO, Deep (Instead of Wide)", "yoco_deep9": "YOCO, 9 unshared self layers", "yocou_deep": "YOCO-U, Deep (Instead of Wide)",
          "yocou_t2": "YOCO-U (T=2)", "yocou_t5": "YOCO-U (T=5)",
          "yoco_moe": "YOCO (MoE)", "yocou_moe": "YOCO-U (MoE, Equal Steps)",
          "yocou_moe_eqflops": "YOCO-U (MoE, Equal FLOPS)",
          "equal_steps": "YOCO-U (Equal Steps)", "equal_flops": "YOCO-U (Equal FLOPS)",
          "T1": "T=1 (YOCO)", "T2": "T=2", "T3": "T=3", "T5": "T=5"}
COLORS = {"transformer": "#7f7f7f", "yoco": "#1f77b4", "rins": "#2ca02c", "yocou": "#d62728", "loop": "#9467bd",
          "yoco_deep9": "#ff7f0e"}


def label(name: str) -> str:
    """Display label of a run or role name (the name itself when it has none)."""
    return LABELS.get(name, name)


# Tables 8-10 columns (tokens): 8K ... 256K
PAPER_LENGTHS = [8192 * 2 ** k for k in range(6)]


def len_label(n: int | float) -> str:
    """``8192`` → ``"8K"``; a length that is not a multiple of 1024 as itself."""
    n = int(n)
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


# study role -> the row label the paper prints for it (yocou/results/reported/table<NN>.csv `model`), per paper table
PAPER_ROWS = {
    "table2": {"yoco": "YOCO", "equal_steps": "YOCO-U (Equal Steps)", "equal_flops": "YOCO-U (Equal FLOPS)"},
    "table3": {"transformer": "Transformer", "yoco": "YOCO", "loop": "Loop/Universal TRM"},
    "table5": {"yoco": "YOCO", "yoco_deep": "Deep (Instead of Wide)", "yocou": "YOCO-U"},
    "table4": {"transformer": "Transformer", "yoco": "YOCO", "rins": "RINS", "yocou": "YOCO-U"},
    "table8": {"transformer": "Transformer", "yoco": "YOCO", "rins": "RINS", "yocou": "YOCO-U"},
    "table9": {"transformer": "Transformer", "yoco": "YOCO", "rins": "RINS", "yocou": "YOCO-U"},
    "table10": {"transformer": "Transformer", "yoco": "YOCO", "rins": "RINS", "yocou": "YOCO-U"},
    "table1": {"transformer": "Transformer", "yoco": "YOCO", "yocou": "YOCO-U", "rins": "Loop / Universal Transformer"},
}


def paper_row(table: str, role: str) -> str | None:
    """The paper's printed row label for ``role`` in ``table``, or ``None`` when the paper prints no such row."""
    return PAPER_ROWS.get(table, {}).get(role)


NIAH_TASKS = {"s_niah_1": "S-NIAH-1", "s_niah_2": "S-NIAH-2"}
