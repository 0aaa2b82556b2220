"""lm-eval model class for yocou checkpoints (``lm_eval.api.model.TemplateLM``).

Usable as an instance (``lm_eval.simple_evaluate(model=YocouLM(...), ...)``) or by name once this module is
imported (``model="yocou"``, ``model_args="model=runs/tiny/models/yocou/model.pt,tokenizer=runs/tiny/tokenizer.json"``).

Tokenization of a (context, continuation) pair: trailing whitespace of the context is moved to the front of
the continuation (as lm-eval does), then the two are encoded SEPARATELY, so the scored tokens are exactly
``encode(continuation)`` and always decode to the continuation. lm-eval 0.4.13's ``TemplateLM._encode_pair``
(which its HF model uses too) encodes ``context + continuation`` and cuts at ``len(encode(context))``; when
the BPE merges a token across the join ("Ans" + "wer", "hello wor" + "ld" with cl100k_base) that gives an
empty continuation, which would end the whole run, or continuation tokens that cover part of the context
or miss part of the continuation. The price of the separate encoding is that ``encode(context) +
encode(continuation)`` may not be the canonical tokenization of the joined text at the join; this is the
rule lm-eval itself uses for seq2seq models and for an empty context. A context that is empty after moving
its whitespace is replaced by the prefix token (EOS), as lm-eval does for an empty context.

Scoring (docs/design.md section 7): a continuation's log-likelihood is the sum over its tokens of
``log_softmax(logits)[token]`` given the context; ``is_greedy`` says whether every continuation token is the
argmax. Requests that share a context (the choices of one multiple-choice item, the rolling windows of one
document with their one-token context) are grouped: the context is prefilled once into a KV cache of batch 1,
the cache is repeated along the batch, and all continuations of the group run in one right-padded batch on
top of it. Groups are processed longest first (lm-eval's order), so a memory error shows up at once.
Right padding is exact here: attention is causal, so a padded position is never seen by a real one.

Generation (``generate_until``) is greedy on the KV-cached decoder (:mod:`yocou.model.generate`: chunked prefill
with early exit, then one token per step), one request at a time (the decoder has no padding mask, so
prompts of different lengths are not batched), stopping at the first ``until`` string, at EOS or after
``max_gen_toks`` tokens; the text is cut before the stop string as lm-eval expects.

Length (lm-eval's HF convention, ``HFLM._loglikelihood_tokens``): with ``max_length`` M (default: the
``seq_len`` the checkpoint was trained with) the model is fed the last M tokens of ``context +
continuation[:-1]``, i.e. the context is cut from the left, per request, to ``M + 1 - len(continuation)``
tokens; requests whose cut contexts are equal share a group. A continuation of more than M tokens cannot
be scored whole and is an error naming the task and item (it is never cut).
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

import lm_eval.models  # noqa: F401 - lm-eval fills its built-in registry (hf, ...) only while it is empty: before ours
import torch
import torch.nn.functional as F
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
from tqdm import tqdm

from yocou.model.cache import KVCache
from yocou.model.generate import decode_step, prefill
from yocou.model.limits import new_cache
from yocou.model.lm import LM

__all__ = ["YocouLM"]

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def _repeat_cache(model: LM, cache: KVCache, n: int, max_len: int) -> KVCache:
    """A new cache of batch ``n`` holding ``n`` copies of the batch-1 ``cache`` (same ``pos``)."""
    big = new_cache(model, n, max_len, dtype=next(iter(cache.slots.values())).k_BGSD.dtype
                          if cache.slots else None)
    for sid, s in cache.slots.items():
        t = big.slots[sid]
        S = min(s.k_BGSD.shape[2], t.k_BGSD.shape[2])
        t.k_BGSD[:, :, :S].copy_(s.k_BGSD[:, :, :S].expand(n, -1, -1, -1))
        t.v_BGSD[:, :, :S].copy_(s.v_BGSD[:, :, :S].expand(n, -1, -1, -1))
    big.pos = cache.pos
    return big


@register_model("yocou")
class YocouLM(TemplateLM):
    """A yocou :class:`~yocou.model.lm.LM` behind lm-eval's interface.

    Args:
        model: a loaded :class:`~yocou.model.lm.LM` or the path of a ``model.pt`` (``yocou.training.train.load_model``).
        tokenizer: a :class:`~yocou.data.tokenizer.TokenizerAdapter` or a path/name for ``load_tokenizer``.
        batch_size: most continuations scored in one forward (a larger group is split).
        max_length: most tokens fed to the model per request (the last ``max_length`` of context +
            continuation[:-1]); ``None``: the checkpoint's training ``seq_len`` (falls back to 2048 for an
            in-memory model without one).
        dtype: ``fp32`` or ``bf16`` (autocast; the KV cache is kept in the same dtype; on CUDA bf16 weights too).
        device: torch device string (a model given loaded stays where it is).

    Raises:
        ValueError: an unknown ``dtype``, ``batch_size < 1`` or ``max_length < 2``.
        FileNotFoundError: a path that does not exist.
    """

    def __init__(self, model: LM | str | os.PathLike, tokenizer: Any, *, batch_size: int | str = 32,
                 max_length: int | None = None, dtype: str = "fp32", device: str = "cpu") -> None:
        super().__init__()
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
        batch_size = int(batch_size)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        trained_len = None
        if not isinstance(model, LM):
            path = str(model)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"model checkpoint {path} not found")
            from yocou.training.train import load_model, read_checkpoint

            ck = read_checkpoint(path)
            trained_len = (ck.get("train_config") or {}).get("seq_len")
            del ck
            model = load_model(path, device, dtype)
        if isinstance(tokenizer, (str, os.PathLike)):
            from yocou.data.tokenizer import load_tokenizer

            tokenizer = load_tokenizer(tokenizer)
        self.lm = model.eval()
        self.tok = tokenizer
        self._max_length = int(max_length or trained_len or 2048)
        if self._max_length < 2:
            raise ValueError(f"max_length must be >= 2, got {self._max_length}")
        from yocou.model.limits import plan_eval_batch

        # continuations per forward: the cap, lowered to what the memory holds at max_length (the longest request)
        self.batch_size_per_gpu = plan_eval_batch(model, batch_size, seq_len=self._max_length, dtype=dtype)
        self.dtype = dtype
        self._device = torch.device(device)
        if tokenizer.vocab_size > model.cfg.vocab_size:
            raise ValueError(f"tokenizer has {tokenizer.vocab_size} ids but the model's vocab_size is "
                             f"{model.cfg.vocab_size}")

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None) -> "YocouLM":
        """``model=PATH,tokenizer=PATH[,batch_size=N,max_length=N,dtype=fp32]`` (lm-eval's ``model_args``)."""
        from lm_eval.utils import simple_parse_args_string

        args = simple_parse_args_string(arg_string)
        extra = {k: v for k, v in (additional_config or {}).items() if k in ("batch_size", "device") and v}
        args.update(extra)
        for key in ("model", "tokenizer"):
            if key not in args:
                raise ValueError(f"model_args needs {key}=..., got {arg_string!r}")
        return cls(args.pop("model"), args.pop("tokenizer"), **args)

    # -- TemplateLM interface ------------------------------------------------
    @property
    def eot_token_id(self) -> int:
        return self.tok.eos_id

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def device(self) -> torch.device:
        return self._device

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs: Any) -> list[int]:
        return self.tok.encode(string)

    def tok_decode(self, tokens: list[int]) -> str:
        return self.tok.decode(tokens)

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Token ids ``(context_ids, continuation_ids)`` of a pair with a non-empty ``context``.

        Trailing whitespace of ``context`` moves to the front of ``continuation``; then each part is encoded on
        its own, so ``tok_decode(continuation_ids)`` is that (whitespace-prefixed) continuation exactly, even
        where the tokenizer would merge a token across the join (module docstring). A context that is empty
        after the move becomes ``[prefix_token_id]``. ``continuation_ids`` is empty only for an empty
        continuation string (``loglikelihood`` then raises).
        """
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces:
            context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
        return self.tok_encode(context) or [self.prefix_token_id], self.tok_encode(continuation)

    def _amp(self):
        return torch.autocast(self._device.type, dtype=torch.bfloat16, enabled=self.dtype == "bf16")

    @torch.no_grad()
    def _score_group(self, ctx: list[int], conts: list[list[int]]) -> list[tuple[float, bool]]:
        """Score continuations ``conts`` after one shared context ``ctx`` (both token lists, ctx non-empty)."""
        L = max(len(c) for c in conts)
        cache_dtype = _DTYPES[self.dtype]
        out: list[tuple[float, bool]] = []
        with self._amp():
            small = new_cache(self.lm, 1, len(ctx) + L, dtype=cache_dtype)
            first_V = prefill(self.lm, torch.tensor([ctx], device=self._device), small,
                              chunk_size=max(len(ctx), 1)).float()[0]
            for b in range(0, len(conts), self.batch_size_per_gpu):
                part = conts[b:b + self.batch_size_per_gpu]
                n = len(part)
                Lp = max(len(c) for c in part)
                logp_first = F.log_softmax(first_V, -1)
                if Lp > 1:
                    cache = _repeat_cache(self.lm, small, n, len(ctx) + Lp)
                    x = torch.zeros(n, Lp - 1, dtype=torch.long)
                    for i, c in enumerate(part):
                        x[i, :len(c) - 1] = torch.tensor(c[:-1], dtype=torch.long)
                    logits = self.lm(x.to(self._device), cache=cache).logits_BNV.float()
                    logp = F.log_softmax(logits, -1)
                for i, c in enumerate(part):
                    tgt = torch.tensor(c, device=self._device)
                    rows = logp_first[None]
                    if len(c) > 1:
                        rows = torch.cat([rows, logp[i, :len(c) - 1]], 0)
                    ll = rows.gather(1, tgt[:, None])[:, 0].sum()
                    greedy = bool((rows.argmax(-1) == tgt).all())
                    out.append((float(ll), greedy))
        return out

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """``(log-likelihood, is_greedy)`` of each request's ``(context, continuation)`` (``Instance.args``).

        Encoding as in :meth:`_encode_pair`; an empty context is lm-eval's rule (the prefix token, EOS).
        Every request is checked before anything is scored.

        Raises:
            ValueError: a continuation that encodes to no tokens or to more than ``max_length`` tokens
                (one line naming the task, the doc id and the request's position).
        """
        new_reqs = []
        for i, req in enumerate(tqdm(requests, desc="Tokenizing inputs", disable=disable_tqdm)):
            context, continuation = req.args
            if context == "":
                cont = self.tok_encode(continuation)
                ctx, cont = ((cont[:1], cont[1:]) if cont and cont[0] == self.prefix_token_id
                             else ([self.prefix_token_id], cont))
            else:
                ctx, cont = self._encode_pair(context, continuation)
            if not cont or len(cont) > self._max_length:
                where = (f"task {getattr(req, 'task_name', None)!r} doc {getattr(req, 'doc_id', None)} "
                         f"(request {i} of {len(requests)}, continuation {continuation[:40]!r})")
                raise ValueError(f"{where}: {self._cont_problem(cont)}")
            new_reqs.append(((context, continuation), ctx, cont))
        return self._loglikelihood_tokens(new_reqs, disable_tqdm=disable_tqdm)

    def _cont_problem(self, cont: list[int]) -> str:
        if not cont:
            return "empty continuation (nothing to score)"
        return (f"continuation is {len(cont)} tokens, more than max_length={self._max_length}; it cannot be "
                "scored whole (raise max_length or leave the item out)")

    def _loglikelihood_tokens(self, requests: list[tuple[tuple[str, str], list[int], list[int]]],
                              disable_tqdm: bool = False, **kwargs: Any) -> list[tuple[float, bool]]:
        """Score ``(key, context_tokens, continuation_tokens)`` requests; see the module docstring.

        Each request's model input is the last ``max_length`` tokens of ``context + continuation[:-1]``.

        Raises:
            ValueError: an empty context, or a continuation that is empty or longer than ``max_length``.
        """
        cut: dict[tuple[int, ...], list[tuple[int, list[int]]]] = defaultdict(list)
        for idx, (_, ctx, cont) in enumerate(requests):
            if not ctx:
                raise ValueError(f"request {idx}: empty context (lm-eval puts the prefix token there)")
            if not cont or len(cont) > self._max_length:
                raise ValueError(f"request {idx}: {self._cont_problem(cont)}")
            # keep M + 1 - len(cont) context tokens: the input ctx + cont[:-1] is then at most M tokens.
            # Requests of one context that fit unchanged stay one group; cut ones group by what is left.
            cut[tuple(ctx[-(self._max_length + 1 - len(cont)):])].append((idx, cont))
        order = sorted(cut.items(), key=lambda kv: -(len(kv[0]) + max(len(c) for _, c in kv[1])))
        res: list[tuple[float, bool] | None] = [None] * len(requests)
        for ctx, items in tqdm(order, disable=disable_tqdm, desc="loglikelihood groups"):
            scores = self._score_group(list(ctx), [c for _, c in items])
            for (idx, _), s in zip(items, scores):
                res[idx] = s
                if requests[idx][0] is not None and hasattr(self, "cache_hook"):
                    self.cache_hook.add_partial("loglikelihood", requests[idx][0], s)
        assert all(r is not None for r in res)
        return res  # type: ignore[return-value]

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        """Summed log-likelihood of whole texts, in disjoint windows of ``max_length`` tokens (lm-eval's
        ``get_rolling_token_windows`` with ``context_len=1``; the first token is conditioned on EOS).

        Equals ``-sum(yocou.evaluation.ppl.token_nll([eos] + tokens, seq_len=max_length))`` when the text is a whole
        number of windows (tested); a final partial window differs only in that lm-eval slides its context
        back to ``max_length`` tokens where ``token_nll`` starts a fresh window.
        """
        windows, owner = [], []
        for i, req in enumerate(requests):
            (string,) = req.args
            toks = self.tok_encode(string)
            for w in map(make_disjoint_window, get_rolling_token_windows(
                    token_list=toks, prefix_token=self.prefix_token_id, max_seq_len=self._max_length,
                    context_len=1)):
                windows.append((None, w[0], w[1]))
                owner.append(i)
        scores = self._loglikelihood_tokens(windows, disable_tqdm=disable_tqdm) if windows else []
        totals = [0.0] * len(requests)
        for i, (ll, _) in zip(owner, scores):
            totals[i] += ll
        for req, t in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", req.args, t)
        return totals

    @torch.no_grad()
    def _generate_one(self, context: str, until: list[str], max_gen_toks: int) -> str:
        ids = self.tok_encode(context) or [self.eot_token_id]
        room = self._max_length - max_gen_toks
        if room < 1:
            raise ValueError(f"max_gen_toks={max_gen_toks} leaves no room for a prompt in max_length="
                             f"{self._max_length}")
        ids = ids[-room:]
        out: list[int] = []
        with self._amp():
            cache = new_cache(self.lm, 1, len(ids) + max_gen_toks, dtype=_DTYPES[self.dtype])
            logits = prefill(self.lm, torch.tensor([ids], device=self._device), cache, chunk_size=len(ids))
            for step in range(max_gen_toks):
                tok = int(logits.float().argmax(-1)[0])
                if tok == self.eot_token_id:
                    break
                out.append(tok)
                text = self.tok_decode(out)
                if any(u and u in text for u in until):
                    break
                if step + 1 < max_gen_toks:
                    logits = decode_step(self.lm, torch.tensor([tok], device=self._device), cache)
        text = self.tok_decode(out)
        for u in until:
            if u:
                text = text.split(u)[0]
        return text

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        """Greedy generation per request, honouring ``until`` and ``max_gen_toks`` (default 256)."""
        res = []
        for req in tqdm(requests, disable=disable_tqdm, desc="generate_until"):
            context, gen_kwargs = req.args
            kw = dict(gen_kwargs or {})
            until = kw.pop("until", None) or []
            if isinstance(until, str):
                until = [until]
            max_gen = int(kw.pop("max_gen_toks", 256))
            if kw.get("do_sample") or float(kw.get("temperature", 0.0) or 0.0) > 0:
                raise ValueError("YocouLM.generate_until supports greedy decoding only (do_sample=False)")
            text = self._generate_one(context, list(until), max_gen)
            res.append(text)
            self.cache_hook.add_partial("generate_until", (context, gen_kwargs), text)
        return res
