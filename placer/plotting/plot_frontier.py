"""Devices against live requests from a sweep: one line per context and mode."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.axes import Axes

__all__ = ["plot_frontier"]

_PLACED = {"optimal", "feasible", "heuristic"}
_MODE_STYLE = {"contiguous": "-", "free": "--", "split": ":"}
_MODE_MARKER = {"contiguous": "o", "free": "s", "split": "^"}


def plot_frontier(rows: Sequence[Mapping], ax: Axes | None = None, *, x: str = "concurrency",
                  y: str = "devices_used", modes: Sequence[str] | None = None,
                  references: Mapping[str, float] | None = None, fleet_devices: int | None = None,
                  title: str | None = None, legend: bool = True) -> Axes:
    """Plot ``y`` (default devices) against ``x`` (default live requests) for the rows of a sweep.

    One colour per context length, one line style per mode (solid when there is one mode), and one
    line per precision pair when
    a sweep has several; ``modes`` keeps only those modes. Lines of shorter contexts are drawn
    wider and first, so where contexts need the same devices they show as nested bands. Each line
    is a step that holds its value until the next measured point, and ends at the last point that
    found a placement (labelled with its ``x``). Filled markers are proven device counts, hollow
    ones are not; Pareto-optimal points get a black ring. ``references`` draws labelled horizontal
    lines (e.g. a published device count); ``fleet_devices`` draws the fleet's size. Returns the
    axes; each line's label names its group.
    """
    import matplotlib.pyplot as plt

    from placer.specs.units import format_tokens

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5), dpi=120)
    placed = [r for r in rows if r.get("status") in _PLACED and r.get(x) is not None and r.get(y) is not None
              and (modes is None or r.get("mode") in modes)]
    contexts = sorted({r["context_tokens"] for r in placed})
    cmap = plt.get_cmap("viridis")
    colour = {c: cmap(0.85 * i / max(1, len(contexts) - 1)) for i, c in enumerate(contexts)}
    width = {c: 1.2 + 1.2 * (len(contexts) - 1 - i) for i, c in enumerate(contexts)}
    precisions = {(r.get("weight_bits"), r.get("kv_bits")) for r in placed}
    one_mode = len({r.get("mode") for r in placed}) == 1
    groups: dict[tuple, list] = {}
    for r in placed:
        key = (r.get("mode"), r["context_tokens"], r.get("weight_bits"), r.get("kv_bits"))
        groups.setdefault(key, []).append(r)
    mode_rank = {m: i for i, m in enumerate(_MODE_STYLE)}
    seen = {"proven": False, "unproven": False, "pareto": False}

    def order(key):
        mode, ctx, wb, kb = key
        return (mode_rank.get(mode, len(mode_rank)), str(mode), ctx, wb or 0, kb or 0)

    for (mode, ctx, wb, kb) in sorted(groups, key=order):
        members = sorted(groups[mode, ctx, wb, kb], key=lambda r: r[x])
        xs, ys = [r[x] for r in members], [r[y] for r in members]
        label = f"{format_tokens(ctx)} {mode}"
        if len(precisions) > 1:
            label += f" w{wb}/kv{kb}"
        marker = _MODE_MARKER.get(mode, "D")
        style = "-" if one_mode else _MODE_STYLE.get(mode, "-.")
        ax.plot(xs, ys, linestyle=style, color=colour[ctx], lw=width[ctx], label=label,
                drawstyle="steps-post" if x == "concurrency" else "default", solid_capstyle="butt")
        proven = [bool(r.get("devices_proven", r.get("proven_optimal"))) for r in members]
        seen["proven"] |= any(proven)
        seen["unproven"] |= not all(proven)
        ax.scatter([a for a, p in zip(xs, proven) if p], [b for b, p in zip(ys, proven) if p], marker=marker,
                   s=16, color=colour[ctx], zorder=3)
        ax.scatter([a for a, p in zip(xs, proven) if not p], [b for b, p in zip(ys, proven) if not p],
                   marker=marker, s=16, facecolors="white", edgecolors=colour[ctx], zorder=3)
        front = [r for r in members if r.get("pareto")]
        seen["pareto"] |= bool(front)
        if front:
            ax.scatter([r[x] for r in front], [r[y] for r in front], marker="o", s=55, facecolors="none",
                       edgecolors="black", lw=0.9, zorder=4)
        ax.annotate(f"{xs[-1]:g}", (xs[-1], ys[-1]), xytext=(4, 3), textcoords="offset points", fontsize=7,
                    color=colour[ctx])
    for name, value in (references or {}).items():
        ax.axhline(value, color="#c0392b", lw=1, ls=":")
        ax.annotate(name, (0.01, value), xycoords=("axes fraction", "data"), xytext=(0, 3),
                    textcoords="offset points", fontsize=8, color="#c0392b")
    if fleet_devices is not None:
        ax.axhline(fleet_devices, color="#555", lw=1, ls="-.")
        ax.annotate(f"fleet: {fleet_devices} devices", (0.01, fleet_devices), xycoords=("axes fraction", "data"),
                    xytext=(0, 3), textcoords="offset points", fontsize=8, color="#555")
    xs_all = [r[x] for r in placed]
    if xs_all and min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 16:
        ax.set_xscale("log", base=2)
    ax.set_xlabel({"concurrency": "live requests (concurrency)"}.get(x, x))
    ax.set_ylabel({"devices_used": "devices"}.get(y, y))
    ax.grid(True, which="major", alpha=0.3)
    if groups and legend:
        from matplotlib.lines import Line2D

        lines, labels = ax.get_legend_handles_labels()
        marker = _MODE_MARKER.get(next(iter(groups))[0], "o") if one_mode else "o"
        extra = []
        if seen["proven"]:
            extra.append(Line2D([], [], ls="none", marker=marker, color="#444", markersize=5,
                                label="filled: device count proven"))
        if seen["unproven"]:
            extra.append(Line2D([], [], ls="none", marker=marker, markerfacecolor="white", color="#444",
                                markersize=5, label="hollow: not proven"))
        if seen["pareto"]:
            extra.append(Line2D([], [], ls="none", marker="o", markerfacecolor="none", markeredgecolor="black",
                                markersize=8, label="ring: Pareto-optimal"))
        extra.append(Line2D([], [], ls="none", label="number at a line's end: most live requests placed"))
        ax.legend(handles=lines + extra, labels=labels + [h.get_label() for h in extra], fontsize=7,
                  ncol=2 if len(lines) + len(extra) > 7 else 1)
    if title:
        ax.set_title(title)
    return ax
