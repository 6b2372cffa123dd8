"""Stage occupancy over time: drawn by :func:`placer.plotting.plot_gantt` (kept here for callers)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["plot_gantt", "save_gantt"]


def plot_gantt(result, ax=None, **kw):
    """:func:`placer.plotting.plot_gantt`."""
    from ..plotting import plot_gantt as draw

    return draw(result, ax, **kw)


def save_gantt(result, path: str | Path, **kw) -> Path:
    """:func:`plot_gantt` written to exactly ``path`` (PNG unless its suffix names another format);
    returns the path written."""
    from ..plotting import plot_gantt as draw
    from ..plotting import save

    return save(draw(result, **kw).figure, path)
