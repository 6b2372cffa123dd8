"""A speed frontier in two panels: tokens/s per MW and tokens/s per device against tokens/s per user."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from placer.plotting.plot_speed_frontier import plot_speed_frontier

__all__ = ["plot_speed_frontiers"]


def plot_speed_frontiers(rows: Sequence[Mapping], axes=None, *, speeds: Sequence[float] = (),
                         title: str | None = None):
    """Two :func:`plot_speed_frontier` panels (per MW, per device) side by side; ``axes`` a pair of
    matplotlib axes (default: a new figure). Returns the figure."""
    import matplotlib.pyplot as plt

    if axes is None:
        _fig, axes = plt.subplots(1, 2, figsize=(13, 5), dpi=120)
    plot_speed_frontier(rows, axes[0], y="tokens_per_s_per_mw", speeds=speeds, title="tokens/s per MW against "
                        "per-user speed")
    plot_speed_frontier(rows, axes[1], y="tokens_per_s_per_device", speeds=speeds,
                        title="tokens/s per device against per-user speed", legend=False)
    fig = axes[0].figure
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
