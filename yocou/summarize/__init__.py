"""Summarize steps: raw results -> tidy tables (yocou.tidy), one module per area."""
