"""Figure 6: :func:`yocou.results.render.scaling.fig6_render` under the figure's name (``workflows/scripts/fig6.py``)."""

from yocou.results.render.scaling import fig6_render as render

__all__ = ["render"]
