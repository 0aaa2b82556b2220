"""Inference: chunked prefill with early exit, then token-by-token decode (docs/design.md section 4).

Two decode paths, equal token for token (tests/test_static_decode.py): :func:`generate` over a :class:`KVCache` whose
reads grow with the position (every row at one position), and :class:`StaticDecoder` over a
:class:`~yocou.model.cache.StaticKVCache` (rows at their own positions, every step the same shapes), which on CUDA
captures the step as a CUDA graph and replays it (``torch.cuda.CUDAGraph``; PyTorch's "CUDA Graphs" notes).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from yocou.model.cache import KVCache, StaticKVCache
from yocou.model.limits import new_cache, require_cache_memory
from yocou.model.lm import LM


@torch.no_grad()
def prefill(model: LM, prompt_BN: torch.Tensor, cache: KVCache, *, chunk_size: int = 512) -> torch.Tensor:
    """Feed a prompt into ``cache`` in chunks; return the last position's logits ``[B, V]``.

    Non-final chunks stop after the last cache write; the final chunk runs the
    rest of the plan (YOCO's cross-decoder) for its last position only, so the
    YOCO family's prefill is linear in N (paper Table 1).

    Raises:
        ValueError: empty prompt, ``chunk_size < 1`` or a prompt longer than the cache.
    """
    N = prompt_BN.shape[1]
    if N < 1:
        raise ValueError("prefill needs a prompt of at least one token")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    cache.check_room(N)
    out = None
    for s in range(0, N, chunk_size):
        final = s + chunk_size >= N
        out = model(prompt_BN[:, s:s + chunk_size], cache=cache, last_only=True, compute_logits=final)
    assert out is not None and out.logits_BNV is not None
    return out.logits_BNV[:, -1]


@torch.no_grad()
def decode_step(model: LM, token_B: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """One decode step at position ``cache.pos``: ``[B]`` token ids -> ``[B, V]`` logits."""
    return model(token_B[:, None], cache=cache).logits_BNV[:, -1]


@torch.no_grad()
def generate(model: LM, prompt_BN: torch.Tensor, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, generator: torch.Generator | None = None, chunk_size: int = 512,
             eos_id: int | None = None, cache_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Greedy (``temperature == 0``) or sampled generation with the KV cache.

    Args:
        prompt_BN: prompt ids ``[B, N]`` (int64), the same length for every row (no padding mask).
        max_new_tokens: how many tokens to return per row.
        eos_id: optional end-of-sequence id. A row that has produced it is finished: every later
            position of that row holds ``eos_id`` (padding), and generation stops early once every
            row has finished; the result keeps the full width.

    Returns:
        The generated ids ``[B, max_new_tokens]`` (int64), always that shape. Without ``eos_id``
        every position is generated; with it, positions after a row's first ``eos_id`` are ``eos_id``.

    Raises:
        ValueError: negative ``max_new_tokens`` or ``temperature``, ``top_k`` < 1 (one above ``vocab_size`` keeps
            the whole vocabulary, as in transformers); ``prompt_BN`` not a 2-D integer tensor, or an id
            outside ``[0, vocab_size)``.
    """
    if not isinstance(prompt_BN, torch.Tensor) or prompt_BN.ndim != 2 or prompt_BN.dtype.is_floating_point \
            or prompt_BN.dtype == torch.bool:
        got = (f"a {prompt_BN.ndim}-D {prompt_BN.dtype} tensor" if isinstance(prompt_BN, torch.Tensor)
               else type(prompt_BN).__name__)
        raise ValueError(f"prompt_BN must be a 2-D integer tensor [B, N] of token ids, got {got}")
    if prompt_BN.numel() and (int(prompt_BN.min()) < 0 or int(prompt_BN.max()) >= model.cfg.vocab_size):
        raise ValueError(f"prompt_BN holds token ids outside [0, vocab_size={model.cfg.vocab_size}): min "
                         f"{int(prompt_BN.min())}, max {int(prompt_BN.max())}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1 (or None: the whole vocabulary), got {top_k}")
    B, N = prompt_BN.shape
    out_BT = prompt_BN.new_full((B, max_new_tokens), eos_id if eos_id is not None else 0)
    if max_new_tokens == 0:
        return out_BT
    cache = new_cache(model, B, N + max_new_tokens, dtype=cache_dtype)
    logits = prefill(model, prompt_BN, cache, chunk_size=chunk_size)
    done_B = torch.zeros(B, dtype=torch.bool, device=prompt_BN.device)
    for i in range(max_new_tokens):
        tok_B = _pick(logits, temperature, top_k, generator)
        if eos_id is not None:
            tok_B = tok_B.masked_fill(done_B, eos_id)  # a finished row is padded with EOS
            done_B |= tok_B == eos_id
        out_BT[:, i] = tok_B
        if eos_id is not None and bool(done_B.all()):
            break  # the rest of out_BT already holds eos_id
        if i + 1 < max_new_tokens:
            logits = decode_step(model, tok_B, cache)
    return out_BT


def _pick(logits_BV: torch.Tensor, temperature: float, top_k: int | None, generator: torch.Generator | None
          ) -> torch.Tensor:
    if temperature == 0:
        return logits_BV.argmax(-1)
    logits = logits_BV.float() / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


class StaticDecoder:
    """Batched greedy-or-sampled decode at fixed shapes: prompts of different lengths prefilled row by row, then one
    step for all rows that reads each slot whole under a key mask (:class:`~yocou.model.cache.StaticKVCache`).

    On CUDA the step is captured once as a CUDA graph (after a warm-up step whose writes the first real step
    overwrites) and replayed: one launch per token instead of one per kernel. :attr:`mode` says ``"graphs"`` or
    ``"eager"``, :attr:`why_eager` why not graphs (not CUDA, ``graphs=False``, or the capture's error).

    Args:
        model: the LM, in eval mode, on its device.
        batch_size: B, the rows decoded together.
        max_len: the longest row (prompt + generated) in tokens; the cache is allocated to it.
        cache_dtype: K/V dtype (default: the model's).
        graphs: capture a CUDA graph (default: on CUDA).

    Raises:
        yocou.utils.memory.MemoryRefusal: the cache does not fit.
        ValueError: ``batch_size`` or ``max_len`` below 1; ``graphs=True`` off CUDA.
    """

    def __init__(self, model: LM, batch_size: int, max_len: int, *, cache_dtype: torch.dtype | None = None,
                 graphs: bool | None = None) -> None:
        p = next(model.parameters())
        if graphs and p.device.type != "cuda":
            raise ValueError(f"StaticDecoder: graphs=True needs a CUDA model, this one is on {p.device}")
        dtype = cache_dtype or p.dtype
        require_cache_memory(model.cfg, batch_size, max_len, dtype=dtype, device=p.device)
        self.model = model
        self.cache = StaticKVCache(model.cfg, batch_size, max_len, dtype=dtype, device=p.device)
        self.lengths = [0] * batch_size  # host-side mirror of cache.pos_B (no device sync to check room)
        self.token_B = torch.zeros(batch_size, dtype=torch.int64, device=p.device)
        self.want_graphs = p.device.type == "cuda" if graphs is None else graphs
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits_BV: torch.Tensor | None = None
        self.why_eager = None if self.want_graphs else (
            "graphs=False" if p.device.type == "cuda" else f"CUDA graphs need CUDA, the model is on {p.device.type}")

    @property
    def mode(self) -> str:
        return "graphs" if self.graph is not None else "eager"

    @torch.no_grad()
    def prefill(self, prompts: Sequence[torch.Tensor], *, chunk_size: int = 512) -> torch.Tensor:
        """Prefill row b with ``prompts[b]`` (``[N_b]`` int64, lengths may differ) through the ordinary chunked
        prefill (:func:`prefill`); return each row's last logits ``[B, V]``.

        Raises:
            ValueError: not one prompt per row, an empty prompt, or one longer than ``max_len``.
        """
        B = self.cache.batch_size
        if len(prompts) != B:
            raise ValueError(f"StaticDecoder.prefill: {len(prompts)} prompts for batch_size {B}")
        out = []
        for b, ids_N in enumerate(prompts):
            out.append(prefill(self.model, ids_N.view(1, -1), self.cache.row(b), chunk_size=chunk_size)[0])
            self.lengths[b] = int(ids_N.numel())
        self.cache.pos_B.copy_(torch.tensor(self.lengths))
        return torch.stack(out)

    def _step(self) -> torch.Tensor:
        return self.model(self.token_B[:, None], cache=self.cache).logits_BNV[:, -1]

    @torch.no_grad()
    def capture(self) -> None:
        """Capture the step as a CUDA graph now (after :meth:`prefill`; else the first :meth:`step` does): a warm-up
        step whose writes the first replay overwrites, then the capture; positions unchanged. A no-op when graphs are
        off or captured; a failed capture leaves :attr:`mode` ``"eager"`` and says why in :attr:`why_eager`."""
        if not self.want_graphs or self.graph is not None:
            return
        pos = self.cache.pos_B.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up (lazy inits, autotuning) outside the capture, as PyTorch's notes ask
            self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.cache.pos_B.copy_(pos)  # its writes were at each row's next position: the first replay overwrites them
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.logits_BV = self._step()
        except Exception as e:  # noqa: BLE001 (any capture failure falls back to eager, and says why)
            self.why_eager = f"CUDA graph capture failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            self.want_graphs = False
            self.cache.pos_B.copy_(pos)
            return
        self.graph = graph

    @torch.no_grad()
    def step(self, token_B: torch.Tensor) -> torch.Tensor:
        """Feed ``token_B`` (``[B]`` int64, one per row, at each row's next position); return logits ``[B, V]``.

        Raises:
            ValueError: a row's next position is ``max_len`` (the cache is full).
        """
        if max(self.lengths) >= self.cache.max_len:
            raise ValueError(f"StaticDecoder: a row holds {max(self.lengths)} tokens = max_len {self.cache.max_len}; "
                             "allocate a longer max_len")
        self.token_B.copy_(token_B)
        self.capture()
        if self.graph is not None:
            self.graph.replay()
            out = self.logits_BV.clone()
        else:
            out = self._step()
        self.lengths = [n + 1 for n in self.lengths]
        return out

    @torch.no_grad()
    def generate(self, prompts: Sequence[torch.Tensor], max_new_tokens: int, *, temperature: float = 0.0,
                 top_k: int | None = None, generator: torch.Generator | None = None, chunk_size: int = 512
                 ) -> torch.Tensor:
        """Prefill ``prompts`` (one per row), then ``max_new_tokens`` per row, as :func:`generate` picks them
        (without ``eos_id``); returns ``[B, max_new_tokens]`` int64.

        Raises:
            ValueError: negative ``max_new_tokens``, and as :meth:`prefill` and :meth:`step`.
        """
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        logits = self.prefill(prompts, chunk_size=chunk_size)
        out = []
        for i in range(max_new_tokens):
            tok_B = _pick(logits, temperature, top_k, generator)
            out.append(tok_B)
            if i + 1 < max_new_tokens:
                logits = self.step(tok_B)
        return torch.stack(out, 1) if out else torch.zeros(len(prompts), 0, dtype=torch.int64, device=self.token_B.device)
