"""Stage occupancy over time: one row per stage, one bar per micro-batch step on that stage."""

from __future__ import annotations

from pathlib import Path

__all__ = ["plot_gantt", "save_gantt"]


def plot_gantt(result, ax=None, *, max_intervals: int = 4000, title: str | None = None):
    """Draw ``result.trace`` (a :class:`~placer.simulate.des.SimResult` run with ``trace=True``) on
    ``ax`` (a new figure when None): stages top to bottom, a colour per micro-batch slot, prefill
    jobs hatched; the first ``max_intervals`` busy intervals. Returns the axes."""
    import matplotlib
    if ax is None:
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        n = len(result.stages)
        _fig, ax = plt.subplots(figsize=(11, max(2.5, min(0.18 * n + 1.5, 16))))
    if result.trace is None:
        raise ValueError("the simulation ran without trace=True: no occupancy to draw")
    cmap = matplotlib.colormaps["tab20"]
    shown = sorted(result.trace, key=lambda iv: iv.start)[:max_intervals]
    by_stage: dict[int, list] = {}
    for iv in shown:
        by_stage.setdefault(iv.stage, []).append(iv)
    for stage, ivs in by_stage.items():
        ax.broken_barh([(iv.start / 1e3, (iv.end - iv.start) / 1e3) for iv in ivs], (stage - 0.4, 0.8),
                       facecolors=[cmap(iv.slot % 20) for iv in ivs], hatch=None, linewidth=0)
        pre = [iv for iv in ivs if iv.prefill]
        if pre:
            ax.broken_barh([(iv.start / 1e3, (iv.end - iv.start) / 1e3) for iv in pre], (stage - 0.4, 0.8),
                           facecolors="none", edgecolors="black", hatch="//", linewidth=0.3)
    n = len(result.stages)
    ax.set_ylim(n - 0.5, -0.5)
    step = max(1, n // 30)
    ax.set_yticks(range(0, n, step))
    ax.set_yticklabels([f"{k} {result.stages[k]}" for k in range(0, n, step)], fontsize=7)
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("stage")
    util = sum(result.stage_utilization) / max(1, n)
    sched = (f"micro-batch {result.micro_batch}" if result.schedule == "micro-batch"
             else f"continuous batching, {result.batch_mean:,.1f} per step")
    ax.set_title(title or f"stage occupancy: {n} stages, {sched}, "
                          f"mean utilisation {util:.0%}, {result.aggregate_tokens_per_s:,.0f} tok/s aggregate",
                 fontsize=9)
    return ax


def save_gantt(result, path: str | Path, **kw) -> Path:
    """:func:`plot_gantt` to a PNG file at ``path`` (Agg backend, no display needed)."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    ax = plot_gantt(result, **kw)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ax.figure.tight_layout()
    ax.figure.savefig(path, dpi=120)
    plt.close(ax.figure)
    return path
