"""The arc-flow device count (:mod:`placer.algorithms.packing` builds the graph) as a CP-SAT model.

One integer flow variable per arc, flow conservation per fill level, a demand row per distinct
size; the number of devices is the flow out of level 0. Every coefficient is 1, so no row comes
near 2^31 whatever the byte sizes.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from placer.algorithms import ortools_adapter as ora
from placer.algorithms.packing import ArcFlow, decompose

__all__ = ["solve_arcflow"]


def solve_arcflow(af: ArcFlow, *, params: dict, lower_bound: int = 0, max_bins: int | None = None,
                  hint_bins=None, progress=None, t0=None):
    """Solve min devices (between ``lower_bound`` and ``max_bins``); returns (outcome, bins) where
    bins = ``[(class, [sizes])]`` or None."""
    model = cp_model.CpModel()
    flows = []       # per class: list of vars aligned with af.arcs[c]
    per_size: dict[int, list] = {k: [] for k in range(len(af.sizes))}
    bins_used = []
    for c, arcs in enumerate(af.arcs):
        cap_count = af.classes[c][1]
        vs = []
        out_of: dict[int, list] = {}
        into: dict[int, list] = {}
        for a, (lo, hi, k) in enumerate(arcs):
            ub = min(cap_count, af.counts[k]) if k >= 0 else cap_count
            v = model.new_int_var(0, ub, f"f{c}_{a}")
            vs.append(v)
            out_of.setdefault(lo, []).append(v)
            if hi >= 0:
                into.setdefault(hi, []).append(v)
            if k >= 0:
                per_size[k].append(v)
        z = model.new_int_var(0, cap_count, f"bins{c}")
        model.add(sum(out_of.get(0, [])) == z)
        for level in af.levels[c]:
            if level > 0:
                model.add(sum(into.get(level, [])) == sum(out_of.get(level, [])))
        flows.append(vs)
        bins_used.append(z)
    for k, vs in per_size.items():
        model.add(sum(vs) == af.counts[k])
    model.add(sum(bins_used) >= lower_bound)
    if max_bins is not None:
        model.add(sum(bins_used) <= max_bins)
    model.minimize(sum(bins_used))
    if hint_bins:
        _hint(model, af, flows, bins_used, hint_bins)
    watch = {"z": bins_used}
    for c, vs in enumerate(flows):
        watch[f"f{c}"] = vs
    out = ora.solve(model, watch, params=params, progress=progress, target=lower_bound, t0=t0)
    bins = None
    if out.values is not None:
        bins = decompose(af, {c: out.values[f"f{c}"] for c in range(len(af.arcs))})
    return out, bins


def _hint(model, af, flows, bins_used, hint_bins):
    index = {s: k for k, s in enumerate(af.sizes)}
    pos = [{(lo, hi, k): a for a, (lo, hi, k) in enumerate(arcs)} for arcs in af.arcs]
    value = [[0] * len(arcs) for arcs in af.arcs]
    count = [0] * len(af.arcs)
    for c, items in hint_bins:
        level = 0
        count[c] += 1
        for s in sorted(items, reverse=True):
            k = index[s]
            a = pos[c].get((level, level + s, k))
            if a is None:
                return
            value[c][a] += 1
            level += s
        if level > 0:
            value[c][pos[c][(level, -1, -1)]] += 1
    for c, vs in enumerate(flows):
        for v, x in zip(vs, value[c]):
            model.add_hint(v, x)
        model.add_hint(bins_used[c], count[c])

