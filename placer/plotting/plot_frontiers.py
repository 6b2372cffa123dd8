"""The frontier of a sweep in one panel per mode, side by side on a shared device axis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from placer.plotting.plot_frontier import plot_frontier

__all__ = ["plot_frontiers"]


def plot_frontiers(rows: Sequence[Mapping], axes=None, *, references: Mapping[str, float] | None = None,
                   fleet_devices: int | None = None, title: str | None = None):
    """One :func:`plot_frontier` panel per mode in ``rows`` (in the order contiguous, free, split).

    ``axes``: a sequence of matplotlib axes, one per mode (default: a new row of panels sharing the
    device axis). Returns the figure.
    """
    import matplotlib.pyplot as plt

    known = ("contiguous", "free", "split")
    present = {r.get("mode") for r in rows}
    modes = [m for m in known if m in present] + sorted(m for m in present - set(known) if m)
    modes = modes or ["contiguous"]
    if axes is None:
        fig, axes = plt.subplots(1, len(modes), figsize=(6.2 * len(modes), 5), dpi=120, sharey=True,
                                 squeeze=False)
        axes = list(axes[0])
    else:
        axes = list(axes)
        fig = axes[0].figure
    if len(axes) != len(modes):
        raise ValueError(f"need {len(modes)} axes (one per mode: {', '.join(modes)}), got {len(axes)}")
    for ax, mode in zip(axes, modes):
        plot_frontier(rows, ax=ax, modes=(mode,), references=references, fleet_devices=fleet_devices,
                      title=f"{mode} placement")
    for ax in axes[1:]:
        ax.set_ylabel("")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
