"""Stage occupancy over time from a traced simulation: one row per stage, one bar per step."""

from __future__ import annotations

__all__ = ["plot_gantt", "occupancy_window"]

SLOT_LEGEND_LIMIT = 12      # up to this many batch slots get a legend entry each; more get a colour bar
IDLE_COLOR = "white"


def occupancy_window(trace, max_intervals: int) -> tuple[float, float]:
    """``(shown_end_us, total_end_us)``: the window from 0 that holds at most ``max_intervals`` busy
    intervals (all of them when there are fewer), and the end of the whole trace."""
    if not trace:
        return 0.0, 0.0
    total = max(iv.end for iv in trace)
    starts = sorted(iv.start for iv in trace)
    if len(starts) <= max_intervals:
        return total, total
    return starts[max_intervals], total


def plot_gantt(result, ax=None, *, max_intervals: int = 4000, title: str | None = None):
    """Draw ``result.trace`` (a :class:`~placer.simulate.des.SimResult` run with ``trace=True``) on
    ``ax`` (a new figure when None): stages top to bottom, time in ms left to right, one colour
    per batch slot (a legend entry each, or a colour bar when there are many), prefill steps
    hatched, idle time white. When the trace has more than ``max_intervals`` busy intervals, the
    window from 0 that holds that many is drawn and the title says which window of how long a
    simulation it is. Returns the axes."""
    import matplotlib
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from placer.specs.units import format_duration_us

    if result.trace is None:
        raise ValueError("the simulation ran without trace=True: no occupancy to draw")
    n = len(result.stages)
    if ax is None:
        _fig, ax = plt.subplots(figsize=(11, max(3.0, min(0.18 * n + 2.2, 16))), dpi=110)
    shown_end, total_end = occupancy_window(result.trace, max_intervals)
    shown = [iv for iv in result.trace if iv.start < shown_end or shown_end == total_end]
    slots = sorted({iv.slot for iv in shown})
    many = len(slots) > SLOT_LEGEND_LIMIT
    if many:
        cmap = matplotlib.colormaps["viridis"]
        norm = matplotlib.colors.Normalize(vmin=min(slots), vmax=max(slots))

        def colour(slot):
            return cmap(norm(slot))
    else:
        cmap = matplotlib.colormaps["tab20" if len(slots) > 10 else "tab10"]
        rank = {s: i for i, s in enumerate(slots)}

        def colour(slot):
            return cmap(rank[slot])
    by_stage: dict[int, list] = {}
    for iv in shown:
        by_stage.setdefault(iv.stage, []).append(iv)

    def bars(ivs):
        return [(iv.start / 1e3, (min(iv.end, shown_end) - iv.start) / 1e3) for iv in ivs]

    for stage, ivs in by_stage.items():
        ax.broken_barh(bars(ivs), (stage - 0.4, 0.8), facecolors=[colour(iv.slot) for iv in ivs], linewidth=0)
        pre = [iv for iv in ivs if iv.prefill]
        if pre:
            ax.broken_barh(bars(pre), (stage - 0.4, 0.8), facecolors="none", edgecolors="black", hatch="//",
                           linewidth=0.3)
    ax.set_xlim(0, shown_end / 1e3)
    ax.set_ylim(n - 0.5, -0.5)
    step = max(1, n // 30)
    ax.set_yticks(range(0, n, step))
    ax.set_yticklabels([f"{k} {result.stages[k]}" for k in range(0, n, step)], fontsize=7)
    ax.set_xlabel("time since the first request (ms)")
    ax.set_ylabel("stage (device)")
    handles = [] if many else [Patch(facecolor=colour(s), label=f"batch slot {s}") for s in slots]
    if any(iv.prefill for iv in shown):
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="prefill"))
    handles.append(Patch(facecolor=IDLE_COLOR, edgecolor="#999", label="idle"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    if many:
        from matplotlib.ticker import MaxNLocator

        bar = ax.figure.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, pad=0.1,
                                 fraction=0.03, shrink=0.6)
        bar.locator = MaxNLocator(integer=True)
        bar.update_ticks()
        bar.set_label("batch slot of the step")
    util = sum(result.stage_utilization) / max(1, n)
    sched = (f"micro-batch {result.micro_batch}" if result.schedule == "micro-batch"
             else f"continuous batching, {result.batch_mean:,.1f} per step")
    window = (f"all {format_duration_us(total_end)} simulated" if shown_end >= total_end else
              f"the first {format_duration_us(shown_end)} of {format_duration_us(total_end)} simulated "
              f"({max_intervals:,} busy intervals)")
    ax.set_title(title or f"stage occupancy over time, {window}\n{n} stages, {sched}, mean utilisation "
                          f"{util:.0%}, {result.aggregate_tokens_per_s:,.0f} tokens/s aggregate", fontsize=9)
    return ax
