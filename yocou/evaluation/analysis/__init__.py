"""Analyses of trained models: angular distance between consecutive layer applications (Figure 8)."""
