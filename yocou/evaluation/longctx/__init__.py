"""Long-context evaluation (docs/design.md section 7): needle in a haystack (paper Table 4) and
perplexity against input length (paper Figure 4).

* :mod:`yocou.evaluation.longctx.niah`: S-NIAH-1 / S-NIAH-2 prompt generators after RULER's definitions,
  greedy and teacher-forced scoring through the cached prefill and decode.
* :mod:`yocou.evaluation.longctx.longppl`: per-token NLL of long documents in one cached pass, and the
  curves derived from it.
"""
