"""Efficiency measurements: inference profiling (Figure 7, Tables 1, 8-10) and the peer benchmark."""
