"""The model: configs and presets (``config``), layers (``layers``), attention kernels (``attention``), the
decoder and YOCO-U's loop (``lm``), the KV cache (``cache``), decoding (``generate``), parameter, FLOP and KV-byte
accounting (``accounting``), Llama parity (``hf``).

Shape suffixes, one meaning each in every module of the model (``x_BND``, ``q_BHND``, ``k_BGSD``): B batch, N
queries or tokens of the call, K keys attended, S a cache slot's capacity, C tokens of the chunk being written, H
query heads, G key/value heads, D the feature axis (``d_model`` in ``[B, N, D]``, the head dim in ``[B, H, N, D]``),
V vocabulary, T tokens of a flattened batch (B·N), E experts, k experts per token. Letters local to one kernel
(X, Q, J, M in ``attention``) are defined in its docstring.
"""
