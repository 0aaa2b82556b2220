"""Evaluation: held-out loss, n-gram baselines, lm-eval, long context, analysis, profiling, the probe."""
