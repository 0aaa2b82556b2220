"""Mechanism probe: can a model retrieve, and chain retrievals, over distances beyond YOCO's sliding window?

YOCO-U adds depth by looping the sliding-window self-decoder; the global KV cache that the cross-decoder reads is
made once. A fact farther back than the self-decoder can reach (window W, stacked over its T x L/2 windowed
applications: :func:`yocou.evaluation.probe.run.self_decoder_reach`) can only be found by global attention: in YOCO and YOCO-U
by the L/2 cross-decoder layers alone, in the Transformer and RINS by any layer. The probe measures that with two
synthetic tasks (:mod:`yocou.evaluation.probe.tasks`) whose every query sits farther from the context it needs than the deepest
self-decoder of the comparison reaches:

* multi-query associative recall (MQAR): one retrieval per query;
* k-hop pointer chasing, k = 1 .. 4: k retrievals in a row, each depending on the last.

Models (:data:`yocou.evaluation.probe.run.VARIANTS`), all at one shape, so with about the same parameters (a loop reuses
weights; YOCO's cross layers share one K/V projection, so YOCO has 3% fewer than the Transformer at the tiny shape):
Transformer, YOCO, YOCO-U at T = 1, 2, 3 (T = 1 is YOCO's architecture: trained with the same seed it is
bit-identical to YOCO, a check rather than a new model), RINS (r = 3), and YOCO trained for the FLOPs of YOCO-U at
T = 3 (the equal-compute control). Each trains on freshly generated batches of both tasks and is scored on one
fixed held-out set (:mod:`yocou.evaluation.probe.run`); :mod:`yocou.evaluation.probe.summarize` turns the results into a tidy CSV, a table
with 95% intervals across seeds and chance levels, and a figure of accuracy against k.
``python -m yocou.evaluation.probe train|summarize`` runs them (:mod:`yocou.evaluation.probe.__main__`).

How the setting differs from the published tasks it borrows from (the generators here are our own):

* MQAR, Arora et al., "Zoology" (arXiv 2312.04927) and its generator (HazyResearch/zoology,
  ``zoology/data/multiquery_ar.py``): there, key-value pairs open the sequence, keys and values come from the two
  halves of a large vocabulary (the paper argues for > 1k), each key is queried once at a gap drawn from a power law
  that favours short gaps, the token after a query key is not its value, and the rest of the sequence is random
  tokens of the whole vocabulary (so keys and values also appear as noise). Here every query is at least
  ``min_distance`` tokens after its pair (above the window and the self-decoder's reach: no short gaps at all), the
  queries fill the end of the sequence and each is followed by its answer (teacher forcing), filler comes from its
  own 16 ids (no key or value appears as noise), fewer queries than pairs are asked (8 of 16 at tiny) so that
  eliminating the values already answered is a weak shortcut (:func:`yocou.evaluation.probe.tasks.chance_level` reports
  its level as chance), and keys and values come from pools of 64 (smaller pools are a setting). Zoology's
  generator makes 100,000-example training sets by default; a tiny probe model sees 8,000 sequences.
* p-hop induction, Saunshi et al., "Reasoning with Latent Thoughts: On the Power of Looped Transformers" (ICLR 2025,
  arXiv 2502.17416), after Sanford et al. (2024): there the chain is implicit in a random sequence over a tiny
  alphabet (a hop goes from a token to the one after its previous occurrence), p is large (16 in their runs, as we
  read them) and fixed per model, and the comparison is a k-layer model looped L times against a kL-layer one with
  global attention throughout. Here the edges are explicit (``a b SEP``, shuffled), k = 1 .. 4 is mixed within
  every training batch and reported per k, the whole chain sits beyond the window, and the looped part of YOCO-U is
  the windowed self-decoder, which cannot see the chain at all: extra loops can only help through what they add to
  the state the cross-decoder reads at the query, not by taking hops. RINS loops global layers, as in their
  setting.
"""
