"""Unsatisfiable cores: why CP-SAT proved that no placement exists, in words.

:func:`shrink_core` (assumptions, then deletion) serves both :func:`explain_infeasible` (the
strategies' models with capacity and pin literals) and :func:`placer.planning.studies.explain` (constraint families
of a dedicated model, built by :func:`family_core`).
"""

from __future__ import annotations

import time

from ortools.sat.python import cp_model

from placer.algorithms import ortools_adapter as ora
from placer.algorithms.cpsat.models import ContiguousModel, FreeModel
from placer.algorithms.cpsat.run import Run, no_placement
from placer.algorithms.quantize import choose_unit
from placer.problem.instance import Instance
from placer.problem.placement import Result, Status
from placer.specs.errors import SolverLimitError

__all__ = ["explain_infeasible", "family_core", "shrink_core"]


def shrink_core(infeasible_core, members: list[int], deadline: float) -> list[int] | None:
    """A core that loses its infeasibility when any one member is dropped (deletion filter).

    ``infeasible_core(subset)`` returns the members of a core among ``subset`` (solving with those
    assumptions), or None when ``subset`` is satisfiable or undecided. Stops shrinking at
    ``deadline`` (``time.monotonic()``) and returns the smallest core so far; None when ``members``
    themselves give no core.
    """
    first = infeasible_core(members)
    if first is None:
        return None
    core = sorted(set(first))
    k = 0
    while k < len(core) and time.monotonic() < deadline:
        trial = core[:k] + core[k + 1:]
        smaller = infeasible_core(trial) if trial else None
        if smaller is not None:
            core = sorted(set(smaller))
            k = 0 if len(core) < len(trial) else k
        else:
            k += 1
    return core


def _bytes(n: int) -> str:
    return f"{n:,} B"




def explain_infeasible(run: Run, kind: str) -> Result:
    """CP-SAT proved infeasibility: find a small set of capacity and pin constraints to blame (on
    the relaxed sizes, so the constraints named conflict in bytes too)."""
    instance, prob = run.instance, run.relaxed
    if kind == "free":
        model = FreeModel(prob, explain=True, latency=False)
    else:
        model = ContiguousModel(prob, s_max=min(prob.n, prob.d), explain=True, latency=False)
    lits = model.assumptions()
    names = {}
    for d, lit in model.capacity_lits.items():
        names[lit.index] = f"capacity of {instance.devices[d].id}"
    for lit, (what, dev, nodes) in zip(model.pin_lits, model.pin_names):
        first, last = instance.nodes[nodes[0]].name, instance.nodes[nodes[-1]].name
        span = first if len(nodes) == 1 else f"{first}..{last}"
        names[lit.index] = (f"pin of {span} to {instance.devices[dev].id}" if what == "device"
                            else f"pin of {span} to one device")
    out = run.solve("explain", model.m, {"used": model.used}, assumptions=lits, time_cap=10.0)
    base = f"CP-SAT proved that no {instance.mode} placement exists"
    if out.status == "INFEASIBLE" and out.core:
        blamed = [names.get(i, f"literal {i}") for i in out.core]
        if len(blamed) > 8:
            blamed = blamed[:8] + [f"and {len(out.core) - 8} more"]
        reason = f"{base}: these constraints conflict: {', '.join(blamed)}"
    elif out.status == "INFEASIBLE":
        reason = (f"{base}: the fleet's links cannot carry a contiguous pipeline of these stages"
                  if kind != "free" else f"{base} on this fleet")
    else:
        reason = base
    return no_placement(run, Status.INFEASIBLE, reason)


def family_core(instance: Instance, time_limit: float, *, max_cells: int, describe_nodes
                ) -> tuple[list[str], list[int], str]:
    """A minimal unsatisfiable core of the instance's constraint families (node bytes, device
    capacities, pins, contiguity, links), each family one assumption literal: ``(words of every
    family, indices of the core's families, note)``; no indices when none was found in
    ``time_limit`` seconds (the note says why). ``describe_nodes(instance, nodes)`` names node sets.
    """
    n, nd = instance.n_nodes, instance.n_devices
    if n * nd > max_cells:
        return [], [], f"no unsatisfiable core computed ({n} nodes x {nd} devices is too large for it)"
    try:
        q = choose_unit(instance.demand_bytes, instance.capacity_bytes)
    except SolverLimitError as exc:
        return [], [], f"no unsatisfiable core computed ({exc})"
    m = cp_model.CpModel()
    x = [[m.new_bool_var(f"x{i}_{d}") for d in range(nd)] for i in range(n)]
    families: list[tuple[object, str]] = []

    def family(words: str):
        lit = m.new_bool_var(f"a{len(families)}")
        families.append((lit, words))
        return lit

    for i in range(n):
        m.add_exactly_one(x[i])
    # bytes of each node count only under its literal (one literal per run of equal-size nodes would
    # merge identical layers; per node keeps the words exact)
    counted = [family(f"the bytes of node {instance.nodes[i].name} ({_bytes(instance.demand_bytes[i])})")
               for i in range(n)]
    for d in range(nd):
        y = []
        for i in range(n):
            yi = m.new_bool_var(f"y{i}_{d}")
            m.add_bool_or([x[i][d].Not(), counted[i].Not(), yi])   # x and counted => y
            y.append(yi)
        cap_lit = family(f"the capacity of {instance.devices[d].id} ({_bytes(instance.capacity_bytes[d])})")
        m.add(sum(q.demand[i] * y[i] for i in range(n)) <= q.capacity[d]).only_enforce_if(cap_lit)
    for k, pin in enumerate(instance.pins):
        nodes = describe_nodes(instance, pin.nodes)
        if pin.device is not None:
            d = instance.device_index[pin.device]
            lit = family(f"pin {k + 1}: {nodes} on {pin.device}")
            for i in pin.nodes:
                m.add_implication(lit, x[i][d])
        else:
            lit = family(f"pin {k + 1}: {nodes} on one device")
            for a, b in zip(pin.nodes, pin.nodes[1:]):
                for d in range(nd):
                    m.add(x[a][d] == x[b][d]).only_enforce_if(lit)
    chain = instance.model.is_chain
    if instance.mode != "free" and chain:
        run = family("one run of the pipeline per device (contiguous mode)")
        for d in range(nd):
            starts = []
            for i in range(n):
                s = m.new_bool_var(f"s{i}_{d}")
                if i == 0:
                    m.add_implication(x[0][d], s)
                else:
                    m.add_bool_or([x[i][d].Not(), x[i - 1][d], s])     # x[i] and not x[i-1] => start
                starts.append(s)
            m.add(sum(starts) <= 1).only_enforce_if(run)
        linked = family("consecutive stages on directly linked devices")
        nbrs: dict[int, list[int]] = {d: [] for d in range(nd)}
        for a, b in instance.link_us:
            nbrs[a].append(b)
        for i in range(n - 1):
            for a in range(nd):
                m.add_bool_or([x[i][a].Not(), x[i + 1][a], *(x[i + 1][b] for b in nbrs[a])]
                              ).only_enforce_if(linked)
    index_of = {lit.index: k for k, (lit, _) in enumerate(families)}
    deadline = time.monotonic() + time_limit

    def infeasible_core(assumed: list) -> list[int] | None:
        left = deadline - time.monotonic()
        if left <= 0.05:
            return None
        params = ora.parameters(time_limit=left, seed=0, threads=1, assumptions=True)
        # google/or-tools#5141: with presolve on, the core can name a literal that is not an
        # assumption; cores are only read with presolve off (and re-checked by shrinking).
        params.update(cp_model_presolve=False, log_search_progress=False)
        out = ora.solve(m, {}, params=params, assumptions=[families[j][0] for j in assumed])
        if out.status != "INFEASIBLE":
            return None
        return [index_of[v] for v in out.core if v in index_of] or None

    core = shrink_core(infeasible_core, list(range(len(families))), deadline)
    words = [w for _, w in families]
    if core is None:
        return words, [], ("no unsatisfiable core found in time" if time.monotonic() >= deadline else
                           "the constraint families hold together in this model; the cause is one no family covers")
    note = "" if q.exact or q.harmless else f"sizes rounded up to units of {q.unit:,} B"
    return words, core, note
