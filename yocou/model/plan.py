"""The plan: a model's stages expanded into the ordered layer applications that the model, the cache and the
analytic accounting all walk (docs/design.md sections 3-4).

Imports the standard library alone: ``yocou export-hf`` copies it, with the rest of the model's code, into every
exported folder (no pydantic there). It reads a config's ``stages`` by attribute (``kind``, ``n_layers``,
``n_loops``, ``window``, ``kv_per_loop``), which :class:`yocou.model.config.Stage` validates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["AppKind", "Application", "early_exit_index", "expand_plan"]

AppKind = Literal["self", "kv", "cross"]


@dataclass(frozen=True)
class Application:
    """One step of the forward pass.

    ``kind``: ``self`` (a self-attention layer), ``kv`` (make the shared K̂V̂ of a
    cross stage from the current hidden state) or ``cross`` (a cross-decoder
    layer). ``slot`` names the cache slot written (``self``, ``kv``) or read
    (``cross``); ``window`` is the slot's ring size (``None``: grows with N).
    """

    kind: AppKind
    stage: int
    loop: int
    layer: int
    slot: int
    window: int | None


def expand_plan(cfg: Any) -> tuple[Application, ...]:
    """Expand stages into the ordered layer applications (docs/design.md sections 3-4).

    Each ``self`` application of each loop gets its own cache slot (its inputs
    differ per loop: Table 10). A cross stage gets one ``kv`` application (one
    shared slot) or one per loop when ``kv_per_loop``. ``cfg``: anything with ``stages`` (a
    :class:`yocou.model.config.ModelConfig`).
    """
    apps: list[Application] = []
    slot = 0
    for si, st in enumerate(cfg.stages):
        kv_slot = -1
        for t in range(st.n_loops):
            if st.kind == "cross" and (t == 0 or st.kv_per_loop):
                kv_slot = slot
                apps.append(Application("kv", si, t, -1, slot, None))
                slot += 1
            for li in range(st.n_layers):
                if st.kind == "self":
                    apps.append(Application("self", si, t, li, slot, st.window))
                    slot += 1
                else:
                    apps.append(Application("cross", si, t, li, kv_slot, None))
    return tuple(apps)


def early_exit_index(plan: tuple[Application, ...]) -> int:
    """Index of the first application after the last cache write.

    During prefill, applications from this index on only matter at the last
    prompt position, because nothing after them is cached: YOCO's early exit
    (docs/design.md section 4). For a Transformer it is ``len(plan)`` (only the head is
    skipped at non-final positions).
    """
    last = -1
    for i, a in enumerate(plan):
        if a.kind in ("self", "kv"):
            last = i
    return last + 1
