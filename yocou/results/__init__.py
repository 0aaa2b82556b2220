"""Results: tidy tables, summaries, renderers, the audit, the paper's reported numbers."""
