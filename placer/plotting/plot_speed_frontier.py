"""Speed frontiers of several platforms: aggregate efficiency against tokens/s per user."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.axes import Axes

__all__ = ["plot_speed_frontier"]

_LABELS = {"tokens_per_s_per_mw": "aggregate tokens/s per MW",
           "tokens_per_s_per_device": "aggregate tokens/s per device"}


def plot_speed_frontier(rows: Sequence[Mapping], ax: Axes | None = None, *, y: str = "tokens_per_s_per_mw",
                        speeds: Sequence[float] = (), title: str | None = None, legend: bool = True) -> Axes:
    """One curve per platform through its Pareto points (``pareto`` true): ``y`` (tokens/s per MW by
    default, or ``tokens_per_s_per_device``) against tokens/s per user, both on log axes; every
    other simulated point as a faint dot; ``speeds`` as dashed vertical floors. Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _fig, ax = plt.subplots(figsize=(7, 5), dpi=120)
    platforms = list(dict.fromkeys(r["platform"] for r in rows))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, p in enumerate(platforms):
        c = colours[i % len(colours)]
        pts = [r for r in rows if r["platform"] == p and r.get("per_user_tokens_per_s") and r.get(y)]
        ax.scatter([r["per_user_tokens_per_s"] for r in pts], [r[y] for r in pts], s=8, color=c, alpha=0.25,
                   linewidths=0)
        front = sorted((r for r in pts if r.get("pareto")), key=lambda r: r["per_user_tokens_per_s"])
        # the curve: the best y at each speed, from the fastest point down (a staircase of the set)
        curve, best = [], -1.0
        for r in reversed(front):
            if r[y] > best:
                best = r[y]
                curve.append(r)
        curve.reverse()
        ax.plot([r["per_user_tokens_per_s"] for r in curve], [r[y] for r in curve], "-o", color=c, ms=3.5, lw=1.6,
                label=f"{p} ({len(curve)} points)")
    for x in speeds:
        ax.axvline(x, color="0.3", ls="--", lw=0.9)
        ax.annotate(f"{x:,.0f} tok/s per user", (x, 1), xycoords=("data", "axes fraction"), rotation=90,
                    va="top", ha="right", fontsize=7, color="0.3")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _readable_log_ticks(ax.xaxis, ax.get_xlim())
    _readable_log_ticks(ax.yaxis, ax.get_ylim())
    ax.set_xlabel("tokens/s per user (mean of the requests' decode rates)")
    ax.set_ylabel(_LABELS.get(y, y))
    ax.grid(True, which="both", alpha=0.25)
    if title:
        ax.set_title(title, fontsize=9)
    if legend and platforms:
        from matplotlib.lines import Line2D

        lines, labels = ax.get_legend_handles_labels()
        extra = [Line2D([], [], ls="-", marker="o", color="0.4", ms=3.5, label="line: Pareto-optimal placements"),
                 Line2D([], [], ls="none", marker="o", color="0.4", alpha=0.25, ms=3,
                        label="faint dot: another simulated point")]
        if speeds:
            extra.append(Line2D([], [], ls="--", color="0.3", lw=0.9, label="dashed: a per-user speed floor"))
        ax.legend(handles=lines + extra, labels=labels + [h.get_label() for h in extra], fontsize=7)
    return ax


def _compact(value: float, _pos=None) -> str:
    """A tick label short enough to sit beside its neighbours: 500, 2k, 1.5M."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def _readable_log_ticks(axis, limits) -> None:
    """Labels on a log axis that never overlap: matplotlib labels the minor ticks of an axis spanning
    less than a decade or so (2x10^2, 3x10^2, ... side by side); here only chosen ticks are labelled,
    1-2-5 within a decade or two, 1-3 up to four decades, the powers of ten beyond, in compact form."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    lo, hi = (min(limits), max(limits))
    if not (lo > 0 and hi > lo):
        return
    decades = math.log10(hi / lo)
    subs = (1.0, 2.0, 5.0) if decades <= 2 else (1.0, 3.0) if decades <= 4 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    axis.set_major_formatter(FuncFormatter(_compact))
    axis.set_minor_formatter(NullFormatter())
