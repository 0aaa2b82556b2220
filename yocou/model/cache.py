"""The explicit KV cache of one batch of sequences (docs/design.md sections 4-5).

Shape suffixes as in :mod:`yocou.model` (B batch, N queries, K keys, S slot capacity, C chunk, H query heads, G
key/value heads, D the feature axis: d_model or the head dim, T flattened tokens, E experts).

Slot kinds, one per cache-writing :class:`~yocou.model.config.Application` of the plan:

* ``global``: a ``self`` application with global attention; capacity ``max_len``.
* ``window``: a ``self`` application with sliding window W; a ring buffer of W
  positions (position p lives at index ``p % W``). After :meth:`KVCache.record_window_history` it keeps every
  position from then on, as a global slot does, so that :meth:`KVCache.crop` can take tokens back.
* ``shared``: the K̂V̂ of a YOCO cross stage (one per stage, or one per loop with
  ``kv_per_loop``); capacity ``max_len``.

The bytes it holds are ``sum(k.nbytes + v.nbytes)`` over slots; they must equal
:func:`yocou.model.accounting.kv_cache_bytes` with ``seq_len = max_len`` exactly (while no window history is
recorded).

Beyond the fixed-size cache of :func:`yocou.model.generate.generate`, what a decoding library asks of a cache
(the exported model under transformers' ``generate``): :meth:`KVCache.grow` (a longer ``max_len``),
:meth:`KVCache.select` (rows, for beam search and for splitting a batch), :meth:`KVCache.record_window_history` and
:meth:`KVCache.crop` (taking back rejected draft tokens in assisted decoding).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .plan import Application, expand_plan

try:  # the type of ``cfg`` (an exported folder, which has no yocou package, reads a config by attribute)
    from yocou.model.config import ModelConfig
except ImportError:
    ModelConfig = Any


@dataclass
class Slot:
    """One cache slot: ``k_BGSD`` and ``v_BGSD`` of shape ``[B, G, S, D]``."""

    kind: str  # "global" | "window" | "shared"
    k_BGSD: torch.Tensor
    v_BGSD: torch.Tensor
    window: int | None = None
    ring: bool = True  # a window slot: a ring of W positions; False: position p at index p (recorded history)
    held_from: int = 0  # a recorded window slot: the first position it still holds


class KVCache:
    """Per-batch cache passed explicitly into :meth:`yocou.model.lm.LM.forward`.

    Args:
        cfg: the model's config (its plan decides the slots).
        batch_size: B.
        max_len: the longest total length (prompt + generated) in tokens.
        dtype: element dtype of cached K/V (bytes per element ``b`` in docs/design.md section 5).
        device: where to allocate.
        fill: value of fresh slots. Tests use ``float('nan')`` so that a read of an
            unwritten position shows up in the logits.

    Attributes:
        pos: number of tokens already written (next position to write).

    Raises:
        ValueError: ``batch_size`` or ``max_len`` below 1.
    """

    def __init__(self, cfg: ModelConfig, batch_size: int, max_len: int, *, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu", fill: float = 0.0) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        self.cfg = cfg
        self.batch_size = batch_size
        self.max_len = max_len
        self.fill = fill
        self.pos = 0
        self.slots: dict[int, Slot] = {}
        for a in expand_plan(cfg):
            if a.kind == "cross":
                continue
            if a.kind == "kv":
                kind, cap = "shared", max_len
            elif a.window is None:
                kind, cap = "global", max_len
            else:
                kind, cap = "window", a.window
            shape = (batch_size, cfg.n_kv_heads, cap, cfg.head_dim)
            self.slots[a.slot] = Slot(
                kind,
                torch.full(shape, fill, dtype=dtype, device=device),
                torch.full(shape, fill, dtype=dtype, device=device),
                a.window if kind == "window" else None,
            )

    def nbytes(self) -> int:
        """Bytes held by all K and V tensors of the cache."""
        return sum(s.k_BGSD.nbytes + s.v_BGSD.nbytes for s in self.slots.values())

    def nbytes_by_kind(self) -> dict[str, int]:
        """Bytes per slot kind (``global``, ``window``, ``shared``)."""
        out: dict[str, int] = {}
        for s in self.slots.values():
            out[s.kind] = out.get(s.kind, 0) + s.k_BGSD.nbytes + s.v_BGSD.nbytes
        return out

    def select(self, rows_B: torch.Tensor) -> "KVCache":
        """A new cache of the rows ``rows_B`` (``[B']`` int64 indices into this cache's rows, repeats allowed: beam
        search), the tensors copied; positions and history as this cache's."""
        out = KVCache.__new__(KVCache)
        out.__dict__.update(self.__dict__)
        out.batch_size = int(rows_B.shape[0])
        out.slots = {}
        for sid, sl in self.slots.items():
            idx = rows_B.to(sl.k_BGSD.device)
            out.slots[sid] = Slot(sl.kind, sl.k_BGSD.index_select(0, idx), sl.v_BGSD.index_select(0, idx), sl.window,
                                  sl.ring, sl.held_from)
        return out

    def _linear_slots(self) -> list[Slot]:
        """The slots indexed by position (global, shared, recorded window), whose capacity is ``max_len``."""
        return [sl for sl in self.slots.values() if sl.kind != "window" or not sl.ring]

    def grow(self, max_len: int) -> None:
        """Make room for ``max_len`` tokens in all (no-op when it is not more than now): the slots indexed by
        position are reallocated and copied; ring slots keep their W positions."""
        if max_len <= self.max_len:
            return
        for sl in self._linear_slots():
            B, G, S, D = sl.k_BGSD.shape
            k = sl.k_BGSD.new_full((B, G, max_len, D), self.fill)
            v = sl.v_BGSD.new_full((B, G, max_len, D), self.fill)
            k[:, :, :S], v[:, :, :S] = sl.k_BGSD, sl.v_BGSD
            sl.k_BGSD, sl.v_BGSD = k, v
        self.max_len = max_len

    def record_window_history(self) -> None:
        """From now on, keep every position of the sliding-window slots (each becomes ``max_len`` long, position p at
        index p, holding its last W positions and all that come), so that :meth:`crop` can take tokens back.
        Attention still reads the last W positions only. Bytes grow as a global slot's; no-op when recording."""
        for sl in self.slots.values():
            if sl.kind != "window" or not sl.ring:
                continue
            B, G, W, D = sl.k_BGSD.shape
            lo = max(0, self.pos - W)
            idx = torch.arange(lo, self.pos, device=sl.k_BGSD.device) % W
            k = sl.k_BGSD.new_full((B, G, self.max_len, D), self.fill)
            v = sl.v_BGSD.new_full((B, G, self.max_len, D), self.fill)
            k[:, :, lo:self.pos], v[:, :, lo:self.pos] = sl.k_BGSD[:, :, idx], sl.v_BGSD[:, :, idx]
            sl.k_BGSD, sl.v_BGSD, sl.ring, sl.held_from = k, v, False, lo

    def check_crop(self, pos: int) -> None:
        """Raise what :meth:`crop` would raise for ``pos``, changing nothing."""
        if not 0 <= pos <= self.pos:
            raise ValueError(f"crop({pos}): pos must be in 0..{self.pos} (the tokens cached)")
        for sl in self.slots.values():
            if sl.kind != "window":
                continue
            held_from = max(0, self.pos - sl.window) if sl.ring else sl.held_from
            need = max(0, pos - sl.window + 1)  # the keys before pos that the token at pos sees
            if held_from > need:
                raise ValueError(f"crop({pos}): a sliding-window slot holds positions from {held_from} only, and the "
                                 f"token at {pos} reads from {need}; record the window history "
                                 "(record_window_history) before generating tokens that may be taken back")

    def crop(self, pos: int) -> None:
        """Forget the tokens at positions ``pos`` and after (the next token written is at ``pos``). A ring can take
        back one token; a recorded window slot (:meth:`record_window_history`) every token since it began recording.

        Raises:
            ValueError: ``pos`` outside ``0 .. self.pos``, or a sliding-window slot no longer holds the positions
                ``pos - W + 1 .. pos - 1`` that the token at ``pos`` sees.
        """
        self.check_crop(pos)
        self.pos = pos

    def check_room(self, n_new: int) -> None:
        """Raise ValueError if ``n_new`` more tokens would not fit."""
        if self.pos + n_new > self.max_len:
            raise ValueError(
                f"KVCache full: {self.pos} tokens cached + {n_new} new > max_len {self.max_len}; "
                "allocate the cache with a larger max_len"
            )

    # -- reads and writes used by the attention modules ---------------------
    def positions(self, n: int, device: torch.device) -> torch.Tensor:
        """The positions of the next ``n`` tokens, ``[n]`` (every row at :attr:`pos`)."""
        return torch.arange(self.pos, self.pos + n, device=device)

    def advance(self, n: int) -> None:
        """``n`` tokens were written at :attr:`pos`."""
        self.pos += n

    def write_and_read(self, app: Application, k_BGCD: torch.Tensor, v_BGCD: torch.Tensor, pos: int
                       ) -> tuple[torch.Tensor, torch.Tensor, None]:
        """Global or shared slot: store a chunk's keys/values at positions ``pos .. pos+C-1`` and return what its
        queries see: ``(k_BHKD, v_BHKD, None)``, the keys and values at positions ``0 .. pos+C-1`` (K = pos+C; the
        third item is the key mask, which a sliced read does not need: :class:`StaticKVCache` returns one). Only
        written entries are returned, so an unread NaN-filled slot never enters the attention. Window slots go
        through :meth:`window_read`.

        Raises:
            ValueError: the application's slot is a window slot.
        """
        slot = self.slots[app.slot]
        if slot.kind not in ("global", "shared"):
            raise ValueError(f"write_and_read: slot {app.slot} is a {slot.kind} slot; window slots use window_read")
        C = k_BGCD.shape[2]
        slot.k_BGSD[:, :, pos:pos + C] = k_BGCD
        slot.v_BGSD[:, :, pos:pos + C] = v_BGCD
        return slot.k_BGSD[:, :, :pos + C], slot.v_BGSD[:, :, :pos + C], None

    def window_read(self, app: Application, k_BGCD: torch.Tensor, v_BGCD: torch.Tensor, pos: int
                    ) -> tuple[torch.Tensor, torch.Tensor, None]:
        """Sliding-window slot: store a chunk at positions ``pos .. pos+C-1``; return ``(k, v, None)``, what it
        attends over (the key mask: none, as :meth:`write_and_read`).

        A prefill chunk (``C > 1``) gets the ring's valid entries in position order (positions
        ``pos - n_hist .. pos - 1``, ``n_hist = min(pos, W)``) followed by the chunk, ``[B, G, n_hist + C, D]``,
        the keys ending at the last query as :func:`yocou.model.attention.attention` takes them; the chunk's last
        ``min(C, W)`` entries are then written into the ring. A decode step (``C == 1``) writes first
        and gets the ring's ``min(pos + 1, W)`` valid entries, which are exactly the W
        keys its query sees (in ring order: attention does not depend on key order). Only the last W positions
        are ever touched. A recorded slot (:meth:`record_window_history`) returns the same keys, in position order.
        """
        slot = self.slots[app.slot]
        W = slot.window
        assert slot.kind == "window" and W is not None
        C = k_BGCD.shape[2]
        if not slot.ring:  # recorded history: position p at index p
            slot.k_BGSD[:, :, pos:pos + C] = k_BGCD
            slot.v_BGSD[:, :, pos:pos + C] = v_BGCD
            if C == 1:
                n = min(pos + 1, W)
                return slot.k_BGSD[:, :, pos + 1 - n:pos + 1], slot.v_BGSD[:, :, pos + 1 - n:pos + 1], None
            n_hist = min(pos, W)
            return slot.k_BGSD[:, :, pos - n_hist:pos + C], slot.v_BGSD[:, :, pos - n_hist:pos + C], None
        if C == 1:
            i = pos % W
            slot.k_BGSD[:, :, i:i + 1] = k_BGCD
            slot.v_BGSD[:, :, i:i + 1] = v_BGCD
            n = min(pos + 1, W)
            return slot.k_BGSD[:, :, :n], slot.v_BGSD[:, :, :n], None
        n_hist = min(pos, W)
        if n_hist:
            start = (pos - n_hist) % W
            if start == 0:
                k_hist, v_hist = slot.k_BGSD[:, :, :n_hist], slot.v_BGSD[:, :, :n_hist]
            else:  # the ring wraps: oldest entry at index start
                k_hist = torch.cat([slot.k_BGSD[:, :, start:], slot.k_BGSD[:, :, :start]], dim=2)
                v_hist = torch.cat([slot.v_BGSD[:, :, start:], slot.v_BGSD[:, :, :start]], dim=2)
            k_all = torch.cat([k_hist.to(k_BGCD.dtype), k_BGCD], dim=2)
            v_all = torch.cat([v_hist.to(v_BGCD.dtype), v_BGCD], dim=2)
        else:
            k_all, v_all = k_BGCD, v_BGCD
        n_keep = min(C, W)
        first = pos + C - n_keep  # first position kept; it lands at ring index first % W
        i0 = first % W
        n_a = min(n_keep, W - i0)
        slot.k_BGSD[:, :, i0:i0 + n_a] = k_BGCD[:, :, C - n_keep:C - n_keep + n_a]
        slot.v_BGSD[:, :, i0:i0 + n_a] = v_BGCD[:, :, C - n_keep:C - n_keep + n_a]
        if n_a < n_keep:
            slot.k_BGSD[:, :, :n_keep - n_a] = k_BGCD[:, :, C - n_keep + n_a:]
            slot.v_BGSD[:, :, :n_keep - n_a] = v_BGCD[:, :, C - n_keep + n_a:]
        return k_all, v_all, None

    def write_shared(self, app: Application, k_BGCD: torch.Tensor, v_BGCD: torch.Tensor, pos: int) -> None:
        """Store K̂V̂ rows of a chunk at positions ``pos .. pos+C-1`` in a ``shared`` slot."""
        slot = self.slots[app.slot]
        C = k_BGCD.shape[2]
        slot.k_BGSD[:, :, pos:pos + C] = k_BGCD
        slot.v_BGSD[:, :, pos:pos + C] = v_BGCD

    def read_shared(self, slot_id: int, end: int) -> tuple[torch.Tensor, torch.Tensor, None]:
        """K̂V̂ of positions ``0 .. end-1`` (and no key mask, as :meth:`write_and_read`)."""
        slot = self.slots[slot_id]
        return slot.k_BGSD[:, :, :end], slot.v_BGSD[:, :, :end], None


class StaticKVCache(KVCache):
    """A cache for decode steps of fixed shapes, which a CUDA graph can replay (:class:`yocou.model.generate.
    StaticDecoder`): the slots of :class:`KVCache` (same layout, same bytes), each row at its own position
    ``pos_B`` (``[B]`` int64, on the cache's device), and reads that return the whole slot with a key mask
    ``[B, 1, 1, S]`` (True where the row's query may attend) instead of a slice that grows with the position.

    A decode step (one token per row) writes row b's keys at index ``pos_B[b]`` (a ring: ``pos_B[b] % W``) and sees
    the indices ``<= pos_B[b]`` (a ring: the same rule keeps its ``min(pos + 1, W)`` valid entries); nothing in it
    depends on a host value. Prompts are prefilled row by row through :meth:`row`, an ordinary :class:`KVCache` whose
    slots are views of one row.

    Raises:
        ValueError: a non-finite ``fill`` (a masked key still enters ``softmax(...) @ V`` as ``0 · value``).
    """

    def __init__(self, cfg: ModelConfig, batch_size: int, max_len: int, *, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu", fill: float = 0.0) -> None:
        if fill != fill or fill in (float("inf"), float("-inf")):
            raise ValueError(f"StaticKVCache: fill must be finite, got {fill}")
        super().__init__(cfg, batch_size, max_len, dtype=dtype, device=device, fill=fill)
        self.pos_B = torch.zeros(batch_size, dtype=torch.int64, device=device)

    def row(self, b: int, pos: int = 0) -> KVCache:
        """Row ``b`` as a batch-1 :class:`KVCache` at position ``pos`` whose slots are views of this cache's (what
        it writes lands here): prefill a prompt through it, then set ``pos_B[b]``."""
        out = KVCache.__new__(KVCache)
        out.__dict__.update(cfg=self.cfg, batch_size=1, max_len=self.max_len, fill=self.fill, pos=pos)
        out.slots = {sid: Slot(s.kind, s.k_BGSD[b:b + 1], s.v_BGSD[b:b + 1], s.window) for sid, s in self.slots.items()}
        return out

    def positions(self, n: int, device: torch.device) -> torch.Tensor:
        """Each row's position, ``[B, 1, 1]`` (RoPE's tables then broadcast over heads)."""
        return self.pos_B[:, None, None]

    def advance(self, n: int) -> None:
        self.pos_B.add_(n)

    def check_room(self, n_new: int) -> None:
        """A step takes one token per row; the room is the caller's (it knows the host-side lengths)."""
        if n_new != 1:
            raise ValueError(f"StaticKVCache takes decode steps of one token, got {n_new}; prefill through row()")

    def _write(self, slot: Slot, k_BGCD: torch.Tensor, v_BGCD: torch.Tensor, idx_B: torch.Tensor) -> None:
        i = idx_B.view(-1, 1, 1, 1).expand(-1, k_BGCD.shape[1], 1, k_BGCD.shape[3])
        slot.k_BGSD.scatter_(2, i, k_BGCD.to(slot.k_BGSD.dtype))
        slot.v_BGSD.scatter_(2, i, v_BGCD.to(slot.v_BGSD.dtype))

    def _mask(self, slot: Slot) -> torch.Tensor:
        idx = torch.arange(slot.k_BGSD.shape[2], device=self.pos_B.device)
        return (idx <= self.pos_B[:, None])[:, None, None, :]

    def write_and_read(self, app: Application, k_BGCD: torch.Tensor, v_BGCD: torch.Tensor, pos: int
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        slot = self.slots[app.slot]
        self._write(slot, k_BGCD, v_BGCD, self.pos_B)
        return slot.k_BGSD, slot.v_BGSD, self._mask(slot)

    def window_read(self, app: Application, k_BGCD: torch.Tensor, v_BGCD: torch.Tensor, pos: int
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        slot = self.slots[app.slot]
        if not slot.ring:
            raise ValueError("StaticKVCache: a recorded window history is not a static shape")
        self._write(slot, k_BGCD, v_BGCD, self.pos_B % slot.window)
        return slot.k_BGSD, slot.v_BGSD, self._mask(slot)

    def write_shared(self, app: Application, k_BGCD: torch.Tensor, v_BGCD: torch.Tensor, pos: int) -> None:
        self._write(self.slots[app.slot], k_BGCD, v_BGCD, self.pos_B)

    def read_shared(self, slot_id: int, end: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        slot = self.slots[slot_id]
        return slot.k_BGSD, slot.v_BGSD, self._mask(slot)
