"""Synthetic retrieval tasks of the mechanism probe: multi-query associative recall (MQAR) and k-hop pointer
chasing, with every retrieved fact placed farther from its query than a chosen distance.

Both generators are pure torch, draw every random number from the ``torch.Generator`` they are given, and return
``(input_ids, targets)``, each ``[B, N]`` int64. ``targets[b, i]`` is the label of the prediction made at position
``i`` (next-token convention: where scored it equals ``input_ids[b, i + 1]``) and ``IGNORE`` (-100, what
``torch.nn.functional.cross_entropy`` skips) elsewhere. Only answer tokens are scored.

The probe has its own vocabulary (:data:`VOCAB_SIZE` = 256 ids), independent of the text tokenizer:

==============  ==========  ==========================================================
ids             name        use
==============  ==========  ==========================================================
0               ``SEP``     ends each edge ``a b SEP`` of a k-hop context
1 .. 8          ``HOP``     ``HOP + k - 1``: "follow k edges" (k = 1 .. :data:`MAX_HOPS`)
9 .. 15         unused
16 .. 31        filler      random filler between the context and the queries
32 .. 95        keys        MQAR keys
96 .. 159       values      MQAR values
160 .. 255      nodes       k-hop nodes
==============  ==========  ==========================================================

MQAR (:func:`mqar`): ``n_pairs`` key-value pairs ``k v`` (distinct keys, distinct values, fresh for every
sequence), random filler, then ``n_queries`` queries ``k v`` at the end of the sequence, each a different key of
the context, in random order. Scored: the value after each query key (one answer per query). Distance of a query:
position of its query key minus position of the value token of its pair in the context; every distance is at
least ``min_distance``.

k-hop pointer chasing (:func:`khop`): ``n_chains`` disjoint chains of ``chain_len`` edges over distinct nodes
(fresh for every sequence), ``x0 -> x1 -> ... -> x_chain_len``. The context lists every edge as ``a b SEP``, all
edges of all chains shuffled together, so following a chain means finding an edge by its source again and again.
Then random filler, then ``n_queries`` queries ``HOP_k s t`` at the end, each from a different chain (so no query
can read another's answer as a shortcut): start node ``s`` at a random place of its chain with at least k edges
after it, answer ``t = f^k(s)``, ``k`` drawn uniformly from ``hops`` for each query (mixed k in one sequence and one
training run; evaluation groups the answers by k, :func:`hops_of`). Scored: one answer per query, at the position
of ``s``. Distance of a query: position of ``s`` minus the position of the last token (``SEP``) of the latest
edge its walk uses; every distance is at least ``min_distance``.

Placement (both tasks): the context is one block at a random offset in ``[0, slack]``, the queries fill the last
positions of the sequence, and filler fills the rest; ``slack`` is what is left once the context, the queries and
the distance fit. The smallest distance of a sequence is therefore that of its first query.

Chance levels (:func:`chance_level`): a model that reads no binding but knows the answer is one of the context's
candidates (MQAR: its values; k-hop: the nodes some edge points to), and that distinct queries have distinct
answers, guesses uniformly among the candidates not yet given as an answer earlier in the query block. When every
pair is asked, the last answer follows by elimination from the others, so this level is above ``1 / candidates``;
asking fewer queries than pairs (the tiny default: 8 of 16) keeps it close. Guessing uniformly over the whole
vocabulary is lower still.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import torch
from pydantic import Field

from yocou.utils.validation import Float, Int, config_dataclass, from_mapping

__all__ = [
    "FILLER",
    "HOP",
    "IGNORE",
    "KEYS",
    "MAX_HOPS",
    "NODES",
    "SEP",
    "TASKS",
    "VALUES",
    "VOCAB_SIZE",
    "TaskConfig",
    "chance_level",
    "hops_of",
    "khop",
    "make_batch",
    "mqar",
    "task_config_from_dict",
]

#: Label of an unscored position (``F.cross_entropy``'s default ``ignore_index``).
IGNORE = -100
#: Ids of the probe's vocabulary: 0 .. VOCAB_SIZE - 1.
VOCAB_SIZE = 256
SEP = 0
#: ``HOP + k - 1`` is the hop token of k.
HOP = 1
MAX_HOPS = 8
#: ``(first id, count)`` of each token range.
FILLER = (16, 16)
KEYS = (32, 64)
VALUES = (96, 64)
NODES = (160, 96)

Task = Literal["mqar", "khop"]
TASKS: tuple[Task, ...] = ("mqar", "khop")


def _check_positive(**values: int) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")


def _slack(seq_len: int, n_context: int, n_queries: int, q_width: int, q_offset: int, min_distance: int,
           what: str) -> int:
    """Free positions for the context's offset: the first query's scored token sits ``q_offset`` tokens into the
    query block of ``n_queries * q_width`` tokens at the end; its distance to the last context token must be at
    least ``min_distance``.

    Raises:
        ValueError: naming ``seq_len`` and the length needed.
    """
    need = n_context + n_queries * q_width - q_offset - 1 + min_distance
    if seq_len < need:
        raise ValueError(f"seq_len {seq_len} is too short for {what}: the context ({n_context} tokens), "
                         f"{n_queries} queries ({q_width} tokens each) and min_distance {min_distance} need "
                         f"seq_len >= {need}")
    return seq_len - need


def _filler(batch_size: int, seq_len: int, n_filler: int, generator: torch.Generator) -> torch.Tensor:
    """``[B, N]`` filler drawn uniformly from the first ``n_filler`` filler ids (one id: a constant filler).

    Raises:
        ValueError: ``n_filler`` not in 1 .. 16.
    """
    _check_positive(n_filler=n_filler)
    if n_filler > FILLER[1]:
        raise ValueError(f"n_filler must be <= {FILLER[1]} (the probe's filler range), got {n_filler}")
    return torch.randint(FILLER[0], FILLER[0] + n_filler, (batch_size, seq_len), generator=generator)


def mqar(batch_size: int, seq_len: int, *, n_pairs: int, n_queries: int, min_distance: int,
         generator: torch.Generator, n_keys: int = KEYS[1], n_values: int = VALUES[1],
         n_filler: int = FILLER[1]) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-query associative recall with every query at least ``min_distance`` tokens after its pair.

    Args:
        batch_size: B sequences.
        seq_len: N tokens per sequence.
        n_pairs: key-value pairs in the context (at most ``n_keys`` and ``n_values``).
        n_queries: queries at the end, each a different key of the context (at most ``n_pairs``).
        min_distance: smallest distance in tokens from a query key to the value token of its pair (>= 1).
        generator: the source of every random number.
        n_keys, n_values: the pools the keys and values are drawn from, without replacement (the first ids of
            the key and value ranges; at most 64 each). Small pools make every key and value appear in most
            sequences, so only their pairing is new.
        n_filler: filler ids drawn from (the first of the filler range; 1 to 16).

    Returns:
        ``(input_ids, targets)``, each ``[B, N]`` int64; ``targets`` holds the value at each query key's
        position and :data:`IGNORE` elsewhere (``n_queries`` scored positions per row).

    Raises:
        ValueError: a count below 1 or a pool above 64 (naming it), ``n_pairs`` above a pool (naming
            ``n_pairs``), ``n_queries > n_pairs`` (naming ``n_queries``), or ``seq_len`` too short to place the
            pairs, queries and distance (naming ``seq_len``), ``n_filler`` outside 1 .. 16 (naming it).
    """
    _check_positive(batch_size=batch_size, seq_len=seq_len, n_pairs=n_pairs, n_queries=n_queries,
                    min_distance=min_distance, n_keys=n_keys, n_values=n_values)
    for name, pool, rng in (("n_keys", n_keys, KEYS), ("n_values", n_values, VALUES)):
        if pool > rng[1]:
            raise ValueError(f"{name} must be <= {rng[1]} (the probe's range), got {pool}")
    if n_pairs > min(n_keys, n_values):
        raise ValueError(f"n_pairs ({n_pairs}) must be <= n_keys ({n_keys}) and n_values ({n_values})")
    if n_queries > n_pairs:
        raise ValueError(f"n_queries ({n_queries}) must be <= n_pairs ({n_pairs}): each query asks a different key")
    slack = _slack(seq_len, 2 * n_pairs, n_queries, 2, 0, min_distance, "mqar")
    ids = _filler(batch_size, seq_len, n_filler, generator)
    tgt = torch.full((batch_size, seq_len), IGNORE, dtype=torch.int64)
    q0 = seq_len - 2 * n_queries
    for b in range(batch_size):
        keys = KEYS[0] + torch.randperm(n_keys, generator=generator)[:n_pairs]
        values = VALUES[0] + torch.randperm(n_values, generator=generator)[:n_pairs]
        start = int(torch.randint(0, slack + 1, (1,), generator=generator))
        ids[b, start:start + 2 * n_pairs:2] = keys
        ids[b, start + 1:start + 2 * n_pairs:2] = values
        asked = torch.randperm(n_pairs, generator=generator)[:n_queries]
        ids[b, q0::2] = keys[asked]
        ids[b, q0 + 1::2] = values[asked]
        tgt[b, q0::2] = values[asked]
    return ids, tgt


def khop(batch_size: int, seq_len: int, *, n_chains: int, chain_len: int, n_queries: int,
         hops: tuple[int, ...] = (1, 2, 3, 4), min_distance: int,
         generator: torch.Generator, n_nodes: int = NODES[1], n_filler: int = FILLER[1]
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """k-hop pointer chasing over shuffled edges, every query at least ``min_distance`` tokens after the edges
    its walk uses.

    Args:
        batch_size: B sequences.
        seq_len: N tokens per sequence.
        n_chains: disjoint chains in the context; ``n_chains * (chain_len + 1)`` nodes, at most ``n_nodes``.
        chain_len: edges per chain, at least ``max(hops)``.
        n_queries: queries at the end, each from a different chain (at most ``n_chains``).
        hops: the k a query may ask, each in 1 .. :data:`MAX_HOPS`; every query draws one uniformly.
        min_distance: smallest distance in tokens from a query's start node to the ``SEP`` of any edge its walk
            uses (>= 1).
        generator: the source of every random number.
        n_nodes: the pool the nodes are drawn from, without replacement (the first ids of the node range; at
            most 96).
        n_filler: filler ids drawn from (the first of the filler range; 1 to 16).

    Returns:
        ``(input_ids, targets)``, each ``[B, N]`` int64; ``targets`` holds ``f^k(s)`` at each query's start
        node ``s`` (``n_queries`` scored positions per row) and :data:`IGNORE` elsewhere. The k of a scored
        position is the hop token just before it (:func:`hops_of`).

    Raises:
        ValueError: a count below 1 (naming it), an empty ``hops`` or a k outside 1 .. 8 (naming ``hops``),
            ``chain_len < max(hops)`` (naming ``chain_len``), ``n_nodes`` above 96 (naming it), more chain nodes
            than ``n_nodes`` (naming ``n_chains``), ``n_queries > n_chains`` (naming ``n_queries``), ``seq_len`` too
            short (naming it), or ``n_filler`` outside 1 .. 16 (naming it).
    """
    _check_positive(batch_size=batch_size, seq_len=seq_len, n_chains=n_chains, chain_len=chain_len,
                    n_queries=n_queries, min_distance=min_distance, n_nodes=n_nodes)
    if n_nodes > NODES[1]:
        raise ValueError(f"n_nodes must be <= {NODES[1]} (the probe's node range), got {n_nodes}")
    hops = tuple(hops)
    if not hops or any(isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_HOPS for k in hops):
        raise ValueError(f"hops must be a non-empty tuple of integers in 1..{MAX_HOPS}, got {hops!r}")
    if chain_len < max(hops):
        raise ValueError(f"chain_len ({chain_len}) must be >= max(hops) ({max(hops)}): a walk of k hops needs k edges")
    if n_chains * (chain_len + 1) > n_nodes:
        raise ValueError(f"n_chains ({n_chains}) x (chain_len + 1) ({chain_len + 1}) nodes exceed n_nodes "
                         f"({n_nodes})")
    if n_queries > n_chains:
        raise ValueError(f"n_queries ({n_queries}) must be <= n_chains ({n_chains}): each query walks its own chain")
    n_edges = n_chains * chain_len
    slack = _slack(seq_len, 3 * n_edges, n_queries, 3, 1, min_distance, "khop")
    ids = _filler(batch_size, seq_len, n_filler, generator)
    tgt = torch.full((batch_size, seq_len), IGNORE, dtype=torch.int64)
    hop_t = torch.tensor(hops, dtype=torch.int64)
    q0 = seq_len - 3 * n_queries
    for b in range(batch_size):
        nodes = NODES[0] + torch.randperm(n_nodes, generator=generator)[:n_chains * (chain_len + 1)]
        chains = nodes.view(n_chains, chain_len + 1)
        src, dst = chains[:, :-1].reshape(-1), chains[:, 1:].reshape(-1)
        order = torch.randperm(n_edges, generator=generator)
        start = int(torch.randint(0, slack + 1, (1,), generator=generator))
        ctx = ids[b, start:start + 3 * n_edges]
        ctx[0::3], ctx[1::3], ctx[2::3] = src[order], dst[order], SEP
        which = torch.randperm(n_chains, generator=generator)[:n_queries]
        k = hop_t[torch.randint(0, len(hops), (n_queries,), generator=generator)]
        # start place in [0, chain_len - k]: floor(u * (chain_len - k + 1)) for u uniform in [0, 1)
        u = torch.rand(n_queries, generator=generator, dtype=torch.float64)
        place = (u * (chain_len - k + 1).double()).floor().long()
        ids[b, q0::3] = HOP + k - 1
        ids[b, q0 + 1::3] = chains[which, place]
        ids[b, q0 + 2::3] = chains[which, place + k]
        tgt[b, q0 + 1::3] = chains[which, place + k]
    return ids, tgt


def hops_of(input_ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The k of every scored k-hop answer: ``[B, N]`` int64, k where ``targets`` is scored and the token before is a
    hop token, 0 elsewhere (every MQAR position, every unscored position).

    Raises:
        ValueError: ``input_ids`` and ``targets`` differ in shape or are not 2-D.
    """
    if input_ids.shape != targets.shape or input_ids.ndim != 2:
        raise ValueError(f"input_ids and targets must be [B, N] of the same shape, got {tuple(input_ids.shape)} "
                         f"and {tuple(targets.shape)}")
    prev = torch.full_like(input_ids, -1)
    prev[:, 1:] = input_ids[:, :-1]
    is_hop = (prev >= HOP) & (prev < HOP + MAX_HOPS) & (targets != IGNORE)
    return torch.where(is_hop, prev - HOP + 1, torch.zeros_like(prev))


@config_dataclass
class TaskConfig:
    """The probe's task settings: one sequence length for both tasks.

    Attributes:
        seq_len: N tokens per sequence.
        min_distance: smallest distance from a query to the context it needs, in tokens (set it above the
            self-decoder's reach, :func:`yocou.evaluation.probe.run.self_decoder_reach`).
        n_pairs, mqar_queries, n_keys, n_values: MQAR's pairs and queries per sequence and the pools of keys and
            values (:func:`mqar`).
        n_chains, chain_len, khop_queries, hops, n_nodes: k-hop's chains, edges per chain, queries per sequence,
            the k asked and the pool of nodes (:func:`khop`).
        n_filler: filler ids (both tasks; 1: a constant filler).
        mqar_fraction: the share of each training batch that is MQAR (the rest is k-hop; rounded, first rows).
    """

    seq_len: Int
    min_distance: Int
    n_pairs: Int = 16
    mqar_queries: Int = 16
    n_keys: Int = KEYS[1]
    n_values: Int = VALUES[1]
    n_chains: Int = 8
    chain_len: Int = 4
    khop_queries: Int = 8
    hops: tuple[Int, ...] = (1, 2, 3, 4)
    n_nodes: Int = NODES[1]
    n_filler: Int = FILLER[1]
    mqar_fraction: Annotated[Float, Field(ge=0, le=1)] = 0.5

    def __post_init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.batch("mqar", 1, g)  # raises the generators' ValueError for impossible settings
        self.batch("khop", 1, g)

    def batch(self, task: Task, batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch_size`` sequences of one task (``"mqar"`` or ``"khop"``): ``(input_ids, targets)``, ``[B, N]``.

        Raises:
            ValueError: an unknown task (naming ``task``), or the generator's.
        """
        if task == "mqar":
            return mqar(batch_size, self.seq_len, n_pairs=self.n_pairs, n_queries=self.mqar_queries,
                        min_distance=self.min_distance, generator=generator, n_keys=self.n_keys,
                        n_values=self.n_values, n_filler=self.n_filler)
        if task == "khop":
            return khop(batch_size, self.seq_len, n_chains=self.n_chains, chain_len=self.chain_len,
                        n_queries=self.khop_queries, hops=self.hops, min_distance=self.min_distance,
                        generator=generator, n_nodes=self.n_nodes, n_filler=self.n_filler)
        raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")


def make_batch(tc: TaskConfig, batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A training batch: the first ``round(batch_size * mqar_fraction)`` rows MQAR, the rest k-hop;
    ``(input_ids, targets)``, ``[B, N]`` int64.

    Raises:
        ValueError: ``batch_size < 1`` (naming it).
    """
    _check_positive(batch_size=batch_size)
    n_m = round(batch_size * tc.mqar_fraction)
    parts = []
    if n_m:
        parts.append(tc.batch("mqar", n_m, generator))
    if batch_size - n_m:
        parts.append(tc.batch("khop", batch_size - n_m, generator))
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def chance_level(tc: TaskConfig, task: Task) -> float:
    """Accuracy of an informed guess that reads no binding: uniform among the context's candidate answers (MQAR: its
    ``n_pairs`` values; k-hop: its ``n_chains * chain_len`` edge targets) less the answers already given earlier in
    the query block (distinct for distinct queries), averaged over the queries: ``mean over i < Q of 1 / (M - i)``
    with ``M`` candidates and ``Q`` queries. It is the level of the elimination shortcut, above ``1 / M`` when
    ``Q`` is close to ``M``.

    Raises:
        ValueError: an unknown task.
    """
    if task == "mqar":
        m, q = tc.n_pairs, tc.mqar_queries
    elif task == "khop":
        m, q = tc.n_chains * tc.chain_len, tc.khop_queries
    else:
        raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")
    return sum(1.0 / (m - i) for i in range(q)) / q


def task_config_from_dict(d: Mapping[str, Any]) -> TaskConfig:
    """Build a :class:`TaskConfig` from a plain mapping (JSON / YAML: ``hops`` may be a list).

    Raises:
        yocou.utils.validation.FieldError: not a mapping, an unknown or missing key, a wrong type or an impossible
            setting (the generators' message), naming the field.
    """
    return from_mapping(TaskConfig, d, "task config")
