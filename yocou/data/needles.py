"""Synthetic key-value needles mixed into training sequences (``train.needle_mix``): a labelled substitute protocol
for Table 4 at small scale, not the paper's.

The paper's 1.3B models learn retrieval from web-scale pre-training; the tiny models of this harness never do, so
Table 4's needle in a haystack (:mod:`yocou.evaluation.longctx.niah`) scores 0.00 for every one of them. With
``train.needle_mix.fraction = f > 0`` a fraction ``f`` of the training sequences carry one needle in the eval's
own text format (``eval/protocols.yaml``, ``niah``; tokenised with the run's tokenizer) and, at the end of the same
sequence, its question followed by the value, so the model is trained to retrieve. A row of ``seq_len + 1``
tokens (``x = row[:-1]``, ``y = row[1:]``) becomes::

    [prefix] haystack[:a] needle haystack[a:H] question answer

* ``prefix``: the eval's ``niah.prefix`` when ``needle_mix.prefix`` (default true), else nothing;
* ``needle``: ``niah.needle`` or ``niah.needle_book`` (each with probability 1/2, the formats of S-NIAH-1 and
  S-NIAH-2) with a key and a value;
* ``question`` and ``answer``: ``niah.question`` and ``niah.answer`` (``" <value>"``); the answer ends the row, so
  its tokens are predicted targets of the training loss;
* ``haystack``: the first ``H`` tokens of the window the stream drew for the row (real training text), cut where
  the needle goes; ``H`` is what remains of ``seq_len + 1`` after the template.

Placement: the *distance* ``answer_start - needle_start`` (tokens from the needle's first token to the answer's
first token, what attention must span to retrieve) is drawn uniformly from the integers of
``[min_distance, max_distance]`` that fit (``max_distance: null``: as far as fits), which fixes ``a``. With the
default range every needle depth in the haystack is equally likely (the needle at a uniform random depth, the query
at the end). The distance is never below the needle and question lengths together (about 65 tokens at vocabulary
2048); at ``seq_len`` 256 it reaches about 200, beyond a sliding window of 64 tokens, which is what separates YOCO's
global cross-attention from a sliding-window-only path.

Keys and values differ from the eval's, so Table 4 measures retrieval, not memorisation: a training key is an
adjective-noun pair from :data:`TRAIN_KEY_ADJECTIVES` x :data:`TRAIN_KEY_NOUNS`, lists disjoint from the eval's
``niah.key_adjectives`` and ``niah.key_nouns`` (checked at import), so no key word of a training needle is a key word
of an eval prompt; the value is a 7-digit number (the eval's format) from a generator of its own.

Determinism: which rows carry a needle and every draw for them come from ``numpy.random.default_rng([s,
NEEDLE_STREAM])``, ``s`` the initial seed of the step's batch generator (:func:`yocou.training.train.draw_batch`: ``seed *
1_000_003 + step``), so the batch of step ``s`` depends only on the run's seed and the step (not on a resume), and
the stream's own draws (the windows) are those of the run without the option. ``fraction = 0`` leaves every batch
unchanged (the option is not applied at all).
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from pydantic import Field

from yocou.results.evaldefs import protocol
from yocou.utils.validation import (
    Bool,
    Float,
    NonNegInt,
    PosInt,
    config_dataclass,
    from_mapping,
)

_P = protocol("niah")
PREFIX, NEEDLE, NEEDLE_BOOK = _P["prefix"], _P["needle"], _P["needle_book"]
QUESTION, ANSWER = _P["question"], _P["answer"]
VALUE_RANGE = (10 ** (int(_P["value_digits"]) - 1), 10 ** int(_P["value_digits"]))

# Training keys: words disjoint from the eval's key lists (eval/protocols.yaml niah.key_adjectives, key_nouns), so
# no eval key, and no eval key word, ever appears in a training needle (tests/test_needle_mix.py checks it too).
TRAIN_KEY_ADJECTIVES = ("amber", "bold", "brave", "brisk", "clever", "crisp", "dusty", "fancy", "fierce", "frozen",
                        "golden", "grumpy", "happy", "humble", "lazy", "loud", "merry", "nimble", "polite", "rusty",
                        "silent", "sleepy", "swift", "witty")
TRAIN_KEY_NOUNS = ("anchor", "badger", "barrel", "beacon", "candle", "canyon", "cherry", "desert", "dragon", "engine",
                   "feather", "forest", "glacier", "hammer", "island", "jacket", "lemon", "magnet", "marble", "nest",
                   "pepper", "rocket", "spider", "window")
_shared = (set(TRAIN_KEY_ADJECTIVES) | set(TRAIN_KEY_NOUNS)) & (set(_P["key_adjectives"]) | set(_P["key_nouns"]))
if _shared:
    raise ValueError(f"yocou.data.needles: training key words {sorted(_shared)} are also eval key words "
                     f"(eval/protocols.yaml niah.key_adjectives / key_nouns); the lists must be disjoint")

#: The second seed word of the needle generator (a stream of its own beside the batch generator's).
NEEDLE_STREAM = 0x6E656564  # "need"


@config_dataclass
class NeedleMix:
    """``train.needle_mix`` (see the module docstring).

    Attributes:
        fraction: the probability that a training sequence carries a needle, in [0, 1); 0 changes nothing.
        min_distance, max_distance: the range of ``answer_start - needle_start`` in tokens, drawn uniformly over
            the integers in it that fit; ``max_distance`` null: as far as fits.
        prefix: begin a needle sequence with the eval's prompt prefix (``niah.prefix``), as every eval prompt does.
    """

    fraction: Annotated[Float, Field(ge=0, lt=1)] = 0.0
    min_distance: NonNegInt = 0
    max_distance: PosInt | None = None
    prefix: Bool = True

    def __post_init__(self) -> None:
        if self.max_distance is not None and self.max_distance < max(1, self.min_distance):
            raise ValueError(f"NeedleMix.max_distance must be null or >= max(1, min_distance="
                             f"{self.min_distance}), got {self.max_distance}")

    @property
    def active(self) -> bool:
        return self.fraction > 0


def needle_mix_from_dict(d: Any) -> NeedleMix:
    """A :class:`NeedleMix` from its mapping (``train.needle_mix``).

    Raises:
        yocou.utils.validation.FieldError: not a mapping, an unknown key, a wrong type or a value out of range,
            naming the field.
    """
    return from_mapping(NeedleMix, d, "TrainConfig.needle_mix")


class NeedleMixer:
    """Puts needles into batches of ``seq_len``-token training windows (:meth:`apply`).

    Args:
        mix: the settings (``fraction > 0``).
        tok: the run's tokenizer (:class:`yocou.data.TokenizerAdapter`; ``encode``).
        seq_len: the training sequence length.
        vocab_size: the model's vocabulary; every template token must be below it.

    Raises:
        ValueError: the template leaves no room in ``seq_len + 1`` tokens, or no distance of the configured range
            fits, naming ``train.needle_mix`` and ``train.seq_len``.
    """

    def __init__(self, mix: NeedleMix, tok: Any, seq_len: int, vocab_size: int | None = None) -> None:
        self.mix, self.tok, self.seq_len, self.vocab_size = mix, tok, seq_len, vocab_size
        self.prefix_ids = list(tok.encode(PREFIX)) if mix.prefix else []
        # the longest key with the largest value: the template's worst case at this tokenizer
        worst = max(((self._pieces(f"{a}-{n}", str(VALUE_RANGE[1] - 1), fmt))
                     for a in TRAIN_KEY_ADJECTIVES for n in TRAIN_KEY_NOUNS for fmt in (NEEDLE, NEEDLE_BOOK)),
                    key=lambda p: len(p[0]) + len(p[1]) + len(p[2]))
        self._check_fits(*worst)

    def _pieces(self, key: str, value: str, fmt: str) -> tuple[list[int], list[int], list[int]]:
        enc = self.tok.encode
        return (list(enc(fmt.format(key=key, value=value))), list(enc(QUESTION.format(key=key))),
                list(enc(ANSWER.format(value=value))))

    def _range(self, nd: list[int], q: list[int], a: list[int]) -> tuple[int, int, int]:
        """(haystack tokens H, lowest, highest distance that fit the configured range) for these pieces."""
        H = self.seq_len + 1 - len(self.prefix_ids) - len(nd) - len(q) - len(a)
        lo = max(self.mix.min_distance, len(nd) + len(q))
        hi = len(nd) + len(q) + H
        if self.mix.max_distance is not None:
            hi = min(hi, self.mix.max_distance)
        return H, lo, hi

    def _check_fits(self, nd: list[int], q: list[int], a: list[int]) -> None:
        H, lo, hi = self._range(nd, q, a)
        n_tpl = len(self.prefix_ids) + len(nd) + len(q) + len(a)
        if H < 0:
            raise ValueError(f"train.needle_mix: the needle template takes up to {n_tpl} tokens with this tokenizer, "
                             f"more than a training row of train.seq_len + 1 = {self.seq_len + 1}; raise "
                             f"train.seq_len, set needle_mix.prefix: false or needle_mix.fraction: 0")
        if lo > hi:
            raise ValueError(f"train.needle_mix: no needle-to-answer distance in [min_distance="
                             f"{self.mix.min_distance}, max_distance={self.mix.max_distance}] fits: at train.seq_len "
                             f"{self.seq_len} it lies in [{len(nd) + len(q)}, {len(nd) + len(q) + H}] tokens")
        ids = self.prefix_ids + nd + q + a
        if self.vocab_size is not None and max(ids) >= self.vocab_size:
            raise ValueError(f"train.needle_mix: the tokenizer gives id {max(ids)} >= the model's vocab_size "
                             f"{self.vocab_size}")

    def make_row(self, rng: np.random.Generator, hay: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """One needle row of ``seq_len + 1`` tokens around the haystack ``hay`` (at least that many tokens), with
        its placement: ``key, value, needle_start, needle_len, question_start, answer_start, answer_len,
        distance``."""
        key = f"{TRAIN_KEY_ADJECTIVES[rng.integers(len(TRAIN_KEY_ADJECTIVES))]}-" \
              f"{TRAIN_KEY_NOUNS[rng.integers(len(TRAIN_KEY_NOUNS))]}"
        value = str(int(rng.integers(*VALUE_RANGE)))
        fmt = NEEDLE if rng.random() < 0.5 else NEEDLE_BOOK
        nd, q, a = self._pieces(key, value, fmt)
        H, lo, hi = self._range(nd, q, a)
        if H < 0 or lo > hi:
            self._check_fits(nd, q, a)  # raises, naming the setting
        dist = int(rng.integers(lo, hi + 1))
        gap = dist - len(nd) - len(q)  # haystack tokens between the needle and the question
        before = H - gap
        P = len(self.prefix_ids)
        row = np.concatenate([np.asarray(self.prefix_ids, dtype=np.int64), hay[:before], np.asarray(nd, np.int64),
                              hay[before:H], np.asarray(q + a, dtype=np.int64)])
        assert len(row) == self.seq_len + 1
        info = {"key": key, "value": value, "format": "needle" if fmt == NEEDLE else "needle_book",
                "needle_start": P + before, "needle_len": len(nd), "question_start": P + before + len(nd) + gap,
                "answer_start": self.seq_len + 1 - len(a), "answer_len": len(a), "distance": dist}
        assert info["answer_start"] - info["needle_start"] == dist
        return row, info

    def apply(self, x: Any, y: Any, seed: int) -> tuple[Any, Any, list[dict[str, Any]]]:
        """The batch ``x, y`` (``[B, seq_len]`` int64 tensors, ``y`` = ``x`` shifted by one) with needles in the rows
        that a generator seeded by ``[seed, NEEDLE_STREAM]`` picks (each with probability ``fraction``); returns
        ``(x, y, infos)``, ``infos`` one dict per needle row (:meth:`make_row`, plus ``row``)."""
        import torch

        rng = np.random.default_rng([int(seed), NEEDLE_STREAM])
        picked = np.flatnonzero(rng.random(x.shape[0]) < self.mix.fraction)
        if not len(picked):
            return x, y, []
        win = torch.cat([x, y[:, -1:]], dim=1).numpy().copy()
        infos = []
        for i in picked:
            win[i], info = self.make_row(rng, win[i])
            infos.append({"row": int(i), **info})
        w = torch.from_numpy(win)
        return w[:, :-1].contiguous(), w[:, 1:].contiguous(), infos


class NeedleMixStream:
    """A token stream whose :meth:`sample_batch` puts needles into the batches of ``stream`` (:class:`NeedleMixer`),
    seeded by the batch generator's initial seed; everything else is ``stream``'s."""

    def __init__(self, stream: Any, mixer: NeedleMixer) -> None:
        self.stream, self.mixer = stream, mixer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def __len__(self) -> int:
        return len(self.stream)

    def sample_batch(self, batch_size: int, seq_len: int, generator: Any) -> tuple[Any, Any]:
        x, y = self.stream.sample_batch(batch_size, seq_len, generator)
        x, y, _ = self.mixer.apply(x, y, generator.initial_seed())
        return x, y
