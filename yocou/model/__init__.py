"""The model: its config, layers, KV cache, generation and accounting (docs/design.md sections 3-5)."""
