"""A yocou language model for Hugging Face transformers (``trust_remote_code``): a thin wrapper around yocou's own
model code.

Copied, unchanged, into every folder that ``yocou export-hf`` writes for a variant other than the plain
Transformer (YOCO, YOCO-U, RINS, Loop, Upper Loop with or without shared KV, their MoE forms), beside
``configuration_yocou.py`` and yocou's model code, copied unchanged from ``yocou/model/``: ``lm.py`` (the blocks and
``LM.forward``, YOCO-U's loop), ``attention.py``, ``cache.py`` (the KV cache), ``layers.py`` and ``plan.py``. They
import only torch, so the folder loads with transformers alone::

    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)

There is one forward pass: ``yocou.model.lm.LM``. What this file adds is what transformers asks of a model and
yocou's model does not do itself (docs/design.md, "The Hugging Face export"):

- **Padding.** yocou's model runs rows of real tokens. With an ``attention_mask`` (1 = token, 0 = padding) the rows
  are grouped by how many real tokens they hold, each group's real tokens run as one batch, and the logits go back
  to their padded places (padding gets zero logits). So every real token gets exactly the logits it has unpadded,
  with its positions counted from the row's first real token, wherever the padding sits.
- **A cache that transformers' ``generate`` can drive** (:class:`YocouCache`): per group of rows one of yocou's
  :class:`KVCache` (each application of a self-attention layer its own slot, a sliding-window one a ring of W
  positions; each cross stage its K̂V̂, made once), grown when full (``KVCache.grow``), its rows selected for beam
  search (``KVCache.select``), and, for assisted decoding, recording the sliding-window history so that rejected
  drafts can be cropped (``KVCache.record_window_history``, ``KVCache.crop``). A call with the cache runs only the
  tokens it has not seen; a call with ``logits_to_keep=1`` runs YOCO's early exit (``LM.forward(last_only=True)``).

Weights are yocou's state dict behind a ``model.`` prefix (``model.stages.0.1.wqkv.weight``,
``model.lm_head.weight``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_yocou import YocouConfig

try:  # in an exported folder: yocou's model code, copied beside this file unchanged
    from .cache import KVCache
    from .layers import RMSNorm, rope_inv_freq
    from .lm import LM
except ImportError:  # imported from the yocou package itself (transformers ignores imports inside try blocks)
    from yocou.model.cache import KVCache
    from yocou.model.layers import RMSNorm, rope_inv_freq
    from yocou.model.lm import LM

__all__ = ["ModelShape", "YocouCache", "YocouConfig", "YocouForCausalLM", "YocouPreTrainedModel"]


@dataclass(frozen=True)
class StageShape:
    """One entry of ``YocouConfig.stages``, read by attribute as yocou's model reads ``Stage``."""

    kind: str
    n_layers: int
    n_loops: int = 1
    window: int | None = None
    kv_per_loop: bool = False


@dataclass(frozen=True)
class ModelShape:
    """The fields of yocou's ``ModelConfig`` that its model code reads, from a :class:`YocouConfig` (which
    validated them)."""

    vocab_size: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    stages: tuple[StageShape, ...]
    rope_theta: float
    cross_rope: bool
    norm_eps: float
    init_std: float
    n_experts: int
    top_k: int
    d_expert: int
    d_shared_expert: int
    init_scaled_out: bool = True
    name: str = "yocou"

    @property
    def d_kv(self) -> int:
        return self.n_kv_heads * self.head_dim

    @classmethod
    def from_config(cls, config: YocouConfig) -> "ModelShape":
        return cls(vocab_size=config.vocab_size, d_model=config.hidden_size, n_heads=config.num_attention_heads,
                   n_kv_heads=config.num_key_value_heads, head_dim=config.head_dim, d_ff=config.intermediate_size,
                   stages=tuple(StageShape(**s) for s in config.stages), rope_theta=config.rope_theta,
                   cross_rope=config.cross_rope, norm_eps=config.rms_norm_eps, init_std=config.initializer_range,
                   n_experts=config.num_experts, top_k=config.num_experts_per_tok,
                   d_expert=config.expert_intermediate_size, d_shared_expert=config.shared_expert_intermediate_size)


class YocouCache:
    """What the model keeps between calls: ``seq_len`` tokens seen per row (padding included, one count for every
    row), which of them are real, and the rows in groups that have seen the same number of real tokens, each group
    with one of yocou's :class:`KVCache` (module docstring)."""

    #: transformers' generation utilities read these (a Python cache, not a static one; softmax attention only)
    is_compileable = False
    is_croppable = True

    def __init__(self, max_len: int = 0) -> None:
        self.seq_len = 0
        self.max_len = max_len  # the first allocation's length (generate's max_length); caches grow past it
        self.recording = False
        self.groups: list[tuple[list[int], KVCache]] = []  # (batch rows, their KVCache in that row order)
        self._ok: torch.Tensor | None = None  # [B, seq_len] bool: which tokens seen are real

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Tokens seen per row (transformers' ``Cache`` name)."""
        return self.seq_len

    @property
    def is_linear(self) -> list[bool]:
        """No layer keeps a recurrent state (transformers slices a continued generation's inputs by
        :meth:`get_seq_length` when none does)."""
        return [False]

    def regroup(self, source: list[int], key: list[Any]) -> None:
        """New row ``b`` continues old row ``source[b]``; new rows from the same old group with the same ``key`` share
        a group. A group kept whole and in order keeps its cache; otherwise the rows are copied
        (:meth:`KVCache.select`)."""
        where = {r: (g, i) for g, (rows, _) in enumerate(self.groups) for i, r in enumerate(rows)}
        buckets: dict[tuple[int, Any], list[int]] = {}
        for b, (src, k) in enumerate(zip(source, key)):
            buckets.setdefault((where[src][0], k), []).append(b)
        per_group = [g for g, _ in buckets]
        groups = []
        for (g, _), rows in buckets.items():
            old_rows, kv = self.groups[g]
            idx = [where[source[b]][1] for b in rows]
            if idx != list(range(len(old_rows))) or per_group.count(g) > 1:
                kv = kv.select(torch.tensor(idx))
            groups.append((rows, kv))
        self.groups = groups

    def reorder_cache(self, beam_idx: torch.Tensor) -> None:
        """Keep the rows ``beam_idx`` ``[B]`` (beam search): new row b continues old row ``beam_idx[b]``."""
        src = beam_idx.tolist()
        if not self.groups:
            return  # nothing cached yet
        n = sum(len(rows) for rows, _ in self.groups)
        if any(not 0 <= b < n for b in src):
            raise ValueError(f"reorder_cache: beam_idx {src} names rows outside the cache's {n}")
        self.regroup(src, [0] * len(src))
        if self._ok is not None:
            self._ok = self._ok.index_select(0, beam_idx.to(self._ok.device))

    def activate_past_recording(self) -> None:
        """Keep the sliding-window history from now on, so that :meth:`crop` can take tokens back (transformers
        calls it before assisted and prompt-lookup decoding)."""
        self.recording = True
        for _, kv in self.groups:
            kv.record_window_history()

    def crop(self, tokens_to_remove: int) -> None:
        """Forget the last ``-tokens_to_remove`` tokens of every row (transformers' convention: 0 or negative).

        Raises:
            ValueError: a positive argument, more tokens than seen, or a sliding-window layer that no longer holds
                what the window needs after the removal (crop without :meth:`activate_past_recording`).
        """
        if tokens_to_remove > 0:
            raise ValueError(f"crop({tokens_to_remove}): pass 0 or a negative number of tokens to remove")
        n = -tokens_to_remove
        if n > self.seq_len:
            raise ValueError(f"crop({tokens_to_remove}): the cache has seen only {self.seq_len} tokens")
        if n == 0 or self._ok is None:
            return
        keep = self.seq_len - n
        real = self._ok[:, :keep].sum(-1).tolist()
        for rows, kv in self.groups:
            for r in rows:
                try:
                    kv.check_crop(real[r])
                except ValueError as e:
                    raise ValueError(f"crop({tokens_to_remove}): {e}; on this cache, activate_past_recording() before "
                                     "generating what is cropped") from None
        self.regroup(list(range(len(real))), real)
        for rows, kv in self.groups:
            kv.crop(real[rows[0]])
        self._ok, self.seq_len = self._ok[:, :keep], keep

    def nbytes(self) -> int:
        """Bytes of the cached keys and values (every group's :meth:`KVCache.nbytes`)."""
        return sum(kv.nbytes() for _, kv in self.groups)


class YocouPreTrainedModel(PreTrainedModel):
    """Weights init and config class of the yocou model."""

    config_class = YocouConfig
    base_model_prefix = "model"
    _no_split_modules = ["SelfLayer", "CrossLayer"]

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Normal(0, ``initializer_range``) matrices and unit norms (only weights missing from a checkpoint); RoPE's
        inverse frequencies (not in the weights) recomputed."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.normal_(0.0, self.config.initializer_range)
        elif isinstance(module, RMSNorm):
            module.weight.fill_(1.0)
        elif isinstance(module, LM):
            module.rope_inv_freq = rope_inv_freq(module.cfg.head_dim, module.cfg.rope_theta,
                                                 module.embed.weight.device)


#: config.json key -> the export record's ``model_config`` key: what the exported weights were trained as.
_RECORD_KEYS = {"vocab_size": "vocab_size", "hidden_size": "d_model", "intermediate_size": "d_ff",
                "num_attention_heads": "n_heads", "num_key_value_heads": "n_kv_heads", "head_dim": "head_dim",
                "stages": "stages", "rope_theta": "rope_theta", "cross_rope": "cross_rope", "rms_norm_eps": "norm_eps",
                "num_experts": "n_experts", "num_experts_per_tok": "top_k"}


def check_export_record(folder: Any, config: YocouConfig) -> None:
    """Refuse a folder whose ``config.json`` no longer describes the model its ``yocou_export.json`` records (an
    edited ``n_loops`` loads the same weights as another model without any error); no record: nothing to check.

    Raises:
        ValueError: naming the first field that differs, both values and what to do.
    """
    import json
    import os

    path = os.path.join(str(folder), "yocou_export.json")
    if not os.path.isfile(path):
        return
    try:
        with open(path, encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not readable JSON ({e}); export the run again") from None
    if not isinstance(record, dict) or not isinstance(record.get("model_config") or {}, dict):
        raise ValueError(f"{path}: expected a mapping with a model_config mapping (yocou export-hf writes one); "
                         "export the run again")
    if getattr(config, "tie_word_embeddings", False):
        raise ValueError(f"{folder}: config.json says tie_word_embeddings = true, but the exported model's LM head is "
                         "its own matrix (yocou_export.json); export the run again")
    recorded = record.get("model_config") or {}
    for ours, theirs in _RECORD_KEYS.items():
        if theirs not in recorded:
            continue
        want, got = recorded[theirs], getattr(config, ours, None)
        if ours == "stages":
            got = [{k: st.get(k) for k in ("kind", "n_layers", "n_loops", "window", "kv_per_loop")} for st in got]
            want = [{k: st.get(k) for k in ("kind", "n_layers", "n_loops", "window", "kv_per_loop")} for st in want]
        if got != want:
            raise ValueError(f"{folder}: config.json says {ours} = {got!r}, but yocou_export.json records {want!r} "
                             "for the exported weights: the folder was edited; export the run again")


class YocouForCausalLM(YocouPreTrainedModel, GenerationMixin):
    """yocou's ``LM`` (embedding, stages, final norm, LM head): ``[B, N]`` ids -> ``[B, N, V]`` logits.

    ``generate`` decodes with a :class:`YocouCache` (``use_cache=True``, the default) or reruns the whole prefix
    at each step (``use_cache=False``).
    """

    def __init__(self, config: YocouConfig) -> None:
        super().__init__(config)
        self.model = LM(ModelShape.from_config(config))
        self.post_init()

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: Any, *args: Any, **kwargs: Any) -> "YocouForCausalLM":
        """transformers' loader (RoPE's inverse frequencies, a buffer outside the weights, are made by
        :meth:`_init_weights`), then :func:`check_export_record` on a local folder."""
        import os

        model = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        check_export_record(pretrained_model_name_or_path, model.config)
        if os.path.isdir(str(pretrained_model_name_or_path)):
            model._export_folder = str(pretrained_model_name_or_path)
        return model

    def save_pretrained(self, save_directory: Any, *args: Any, **kwargs: Any) -> None:
        """transformers' ``save_pretrained``, then the export's ``yocou_export.json`` and model card (``README.md``)
        copied from the folder the model was loaded from, so the saved folder keeps the load-time check
        (:func:`check_export_record`) and its provenance; neither is copied where the model no longer matches the
        record (a resized vocabulary, say): it is not the exported model any more."""
        import os

        super().save_pretrained(save_directory, *args, **kwargs)
        src = getattr(self, "_export_folder", None)
        if src is None or os.path.realpath(src) == os.path.realpath(str(save_directory)):
            return
        try:
            check_export_record(src, self.config)
        except ValueError:
            return
        for name in ("yocou_export.json", "README.md"):
            if os.path.isfile(os.path.join(src, name)):
                with open(os.path.join(src, name), "rb") as fin, \
                        open(os.path.join(str(save_directory), name), "wb") as fout:
                    fout.write(fin.read())

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.embed = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.model.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.model.lm_head = value

    def _run_rows(self, input_ids: torch.Tensor, ok_BN: torch.Tensor | None, cache: YocouCache | None,
                  last_only: bool) -> torch.Tensor:
        """Logits ``[B, N, V]`` (``[B, 1, V]`` with ``last_only``) of the real tokens (``ok_BN``; None: all real),
        each group of rows with the same number of real tokens (and, with a cache, the same cache group) run as
        one batch of yocou's ``LM.forward``; padding gets zero logits."""
        B, N = input_ids.shape
        lm = self.model
        if ok_BN is None or bool(ok_BN.all()):
            if cache is None:
                return lm(input_ids, last_only=last_only).logits_BNV
            ok_BN = torch.ones(B, N, dtype=torch.bool, device=input_ids.device)
        real = ok_BN.sum(-1).tolist()
        if cache is not None:
            held = sum(len(rows) for rows, _ in cache.groups)
            if cache.groups and held != B:
                raise ValueError(f"input_ids has {B} rows, but the cache holds {held}: pass the rows the cache was "
                                 "built with (or a fresh cache)")
            if not cache.groups:
                kv = lm.new_cache(B, max(cache.max_len, N, 1))
                if cache.recording:
                    kv.record_window_history()
                cache.groups = [(list(range(B)), kv)]
            cache.regroup(list(range(B)), real)
            groups = [(rows, kv) for rows, kv in cache.groups]
        else:
            by_n: dict[int, list[int]] = {}
            for b, n in enumerate(real):
                by_n.setdefault(n, []).append(b)
            groups = [(rows, None) for rows in by_n.values()]
        last_only = last_only and bool(ok_BN[:, -1].all())
        V = lm.lm_head.weight.shape[0]  # the head's rows (resize_token_embeddings changes them)
        out = torch.zeros(B, 1 if last_only else N, V, dtype=lm.lm_head.weight.dtype, device=input_ids.device)
        for rows, kv in groups:
            n = real[rows[0]]
            if n == 0:
                continue
            ids = torch.stack([input_ids[b][ok_BN[b]] for b in rows])
            if kv is not None and kv.pos + n > kv.max_len:
                kv.grow(max(2 * kv.max_len, kv.pos + n))
            logits = lm(ids, cache=kv, last_only=last_only).logits_BNV
            for i, b in enumerate(rows):
                if last_only:
                    out[b] = logits[i]
                else:
                    out[b, ok_BN[b]] = logits[i]
        return out

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                logits_to_keep: int | torch.Tensor = 0, use_cache: bool | None = None, cache: object = None,
                past_key_values: object = None, return_dict: bool | None = None,
                inputs_embeds: torch.Tensor | None = None, output_hidden_states: bool | None = None,
                output_attentions: bool | None = None, **kwargs: object) -> CausalLMOutputWithPast | tuple:
        """Logits ``[B, N, V]`` (the last ``logits_to_keep`` positions when > 0) and, with ``labels``
        ``[B, N]``, the mean next-token cross-entropy (labels shifted inside; -100 ignored).

        Positions count each row's real tokens from 0; a ``position_ids`` that says otherwise at a real token (packed
        sequences, an offset) is refused, not ignored. With ``use_cache=True`` or a
        :class:`YocouCache` (``cache`` or ``past_key_values``; a fresh one when none), ``input_ids`` are the tokens
        after those the cache has seen, ``attention_mask`` covers all of them, and the cache is returned in
        ``cache``. Otherwise ``input_ids`` is the whole sequence and no cache is returned.

        Args:
            input_ids: token ids ``[B, N]``.
            attention_mask: ``[B, seq_len + N]``, 1 for a token, 0 for padding (default all ones).

        ``logits_to_keep``: an int (the last that many positions; 0: all) or a 1-D tensor of positions.
        ``return_dict=False``: the tuple ``(loss, logits, cache)`` without its None entries.

        Raises:
            ValueError: a cache that is not a :class:`YocouCache` (a transformers ``DynamicCache``, say), an
                ``attention_mask`` whose shape is not the rows and the cached plus new tokens, rows that are not the
                cache's, ``inputs_embeds``, ``output_hidden_states`` or ``output_attentions`` (not supported: the
                model's forward is yocou's, which takes token ids and returns logits), a ``position_ids`` other than
                the positions the model uses (see above).
        """
        if inputs_embeds is not None or input_ids is None:
            raise ValueError("YocouForCausalLM takes input_ids (token ids [B, N]); inputs_embeds is not supported")
        for name, flag in (("output_hidden_states", output_hidden_states), ("output_attentions", output_attentions)):
            if flag:
                raise ValueError(f"YocouForCausalLM: {name}=True is not supported (the exported model is yocou's "
                                 "LM, which returns logits only)")
        cache = cache if cache is not None else past_key_values
        if cache is not None and not isinstance(cache, YocouCache):
            raise ValueError(f"YocouForCausalLM keeps its own cache (YocouCache), got {type(cache).__name__}: pass "
                             "the cache it returned, or none")
        if cache is None and use_cache:
            cache = YocouCache()
        B, N = input_ids.shape
        past = cache.seq_len if cache is not None else 0
        ok = None
        if attention_mask is not None:
            m = attention_mask.to(input_ids.device).bool()
            if m.ndim != 2 or m.shape[0] != B:
                raise ValueError(f"attention_mask has shape {tuple(m.shape)}; expected [{B}, {past + N}] (the rows of "
                                 "input_ids, the cached and the new tokens)")
            if m.shape[1] != past + N:
                raise ValueError(f"attention_mask covers {m.shape[1]} tokens; the cache has {past} and {N} are new")
            ok = m[:, past:]
        if position_ids is not None:
            self._check_positions(position_ids, ok, cache, B, N, past)
        keep_positions = isinstance(logits_to_keep, torch.Tensor) and logits_to_keep.ndim == 1
        last_only = not keep_positions and int(logits_to_keep) == 1 and labels is None
        logits = self._run_rows(input_ids, ok, cache, last_only)
        if cache is not None:
            new_ok = ok if ok is not None else torch.ones(B, N, dtype=torch.bool, device=input_ids.device)
            cache._ok = new_ok if cache._ok is None else torch.cat([cache._ok, new_ok], 1)
            cache.seq_len += N
        if keep_positions:
            logits = logits[:, logits_to_keep.to(logits.device)]
        elif int(logits_to_keep) and not last_only:
            logits = logits[:, -int(logits_to_keep):]
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                   labels[:, 1:].reshape(-1).to(logits.device), ignore_index=-100)
        out = CausalLMOutputWithPast(loss=loss, logits=logits, cache=cache)
        return out if return_dict is not False else out.to_tuple()

    @staticmethod
    def _check_positions(position_ids: torch.Tensor, ok: torch.Tensor | None, cache: YocouCache | None, B: int,
                         N: int, past: int) -> None:
        """Refuse ``position_ids`` ``[B or 1, N]`` unless it equals, at every real token, the positions the model
        uses: each row's real tokens (cached and new) counted from 0."""
        dev = position_ids.device
        new = ok.to(dev) if ok is not None else torch.ones(B, N, dtype=torch.bool, device=dev)
        seen = cache._ok if cache is not None and cache._ok is not None else torch.ones(B, past, dtype=torch.bool)
        want = torch.cat([seen.to(dev), new], 1).long().cumsum(1)[:, past:] - 1
        if position_ids.ndim != 2 or position_ids.shape[1] != N or position_ids.shape[0] not in (1, B):
            raise ValueError(f"position_ids has shape {tuple(position_ids.shape)}; expected [{B}, {N}] (or [1, {N}])")
        if not torch.equal(position_ids.long().expand(B, N)[new], want[new]):
            raise ValueError("position_ids: YocouForCausalLM counts each row's real tokens from 0 (from "
                             "attention_mask and the cache); other positions (packed sequences, an offset) are not "
                             "supported: pass none")

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        """No transformers ``DynamicCache``: the model keeps a :class:`YocouCache`."""
        return False

    def _prepare_cache_for_generation(self, generation_config: Any, model_kwargs: dict, *args: Any,
                                      **kwargs: Any) -> None:
        """A fresh :class:`YocouCache` in ``model_kwargs["cache"]``, sized for ``generation_config.max_length``, when
        ``generate`` decodes with a cache and was given none (beam search reorders it, assisted decoding crops it); a
        given cache is checked and kept."""
        super()._prepare_cache_for_generation(generation_config, model_kwargs, *args, **kwargs)
        given = model_kwargs.get("cache")
        if given is not None and not isinstance(given, YocouCache):
            raise ValueError(f"YocouForCausalLM keeps its own cache (YocouCache), got {type(given).__name__}")
        if given is None and generation_config.use_cache is not False:
            model_kwargs["cache"] = YocouCache(max_len=generation_config.max_length or 0)
            if generation_config.is_assistant:  # an assistant's drafts are cropped: record from the start
                model_kwargs["cache"].activate_past_recording()

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, cache: YocouCache | None = None,
                                      attention_mask: torch.Tensor | None = None, use_cache: bool | None = None,
                                      **kwargs: object) -> dict:
        """The tokens the cache has not seen (all of them without a cache), the whole attention mask, the cache
        and ``use_cache``; other keyword arguments pass through (``position_ids`` and ``cache_position`` are
        dropped: positions come from the attention mask)."""
        cache = cache if cache is not None else kwargs.pop("past_key_values", None)
        if cache is not None:
            input_ids = input_ids[:, cache.seq_len:]
        for k in ("position_ids", "cache_position", "past_key_values"):
            kwargs.pop(k, None)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "cache": cache, "use_cache": use_cache,
                **kwargs}
