"""Why no placement exists, in terms a user can act on.

:func:`explain_infeasible` is a pure function of an :class:`~placer.problem.instance.Instance` (the solve
command calls it when a method returns ``infeasible``). It reports, in exact bytes:

* **culprits** found by direct checks: a node that no device holds (its weights, its KV cache and
  state for the asked live requests, against the largest device's capacity after activation
  buffers, and the weight precision that would fit); a pinned run that its device cannot hold;
  pins that contradict each other; more devices needed than the fleet has;
* when no single culprit is obvious (pins that only conflict through the fleet's links, a fleet
  whose graph has no path long enough, ...), an **unsatisfiable core** from CP-SAT: every family
  of constraints (each device's capacity, each pin, each node's bytes, one run per device, linked
  consecutive stages) gets an indicator literal passed as an assumption, and
  ``sufficient_assumptions_for_infeasibility`` names a subset that cannot hold together; the core is
  re-checked and shrunk by deletion so every member is needed;
* **what would fit**: the largest concurrency at the asked context and the longest context at the
  asked concurrency (exponential then binary search, each probe decided by the exact DP or by
  ``placer.algorithms.place``; a probe no method decides in time makes the figure a lower bound,
  and the text says so), and for a fleet that is too small, the smallest ``--racks`` that fits.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from placer.algorithms.deadline import Deadline
from placer.algorithms.search import largest_true
from placer.problem import memory
from placer.problem.instance import Instance
from placer.specs.units import format_tokens
from placer.specs.workload import MAX_CONCURRENCY

__all__ = ["Explanation", "diagnose", "explain_infeasible", "largest_feasible"]

_CORE_MAX_CELLS = 6000   # nodes x devices beyond which the core model is not built


@dataclass(frozen=True)
class Explanation:
    """What :func:`diagnose` found. Figures are exact; ``*_proven`` is False when a probe was undecided."""

    headline: str
    culprits: tuple[str, ...] = ()
    core: tuple[str, ...] = ()
    core_note: str = ""
    max_concurrency: int | None = None          # -1: not even 0 live requests; None: no per-request memory
    max_concurrency_proven: bool = True
    max_context_tokens: int | None = None       # None: context does not matter (or nothing fits)
    max_context_proven: bool = True
    context_matters: bool = False
    min_racks: int | None = None
    # on GPU fleets the smallest fleet is searched at every tensor-parallel degree the model allows:
    # the degree it fits at, and the racks the explained instance's own degree would need
    min_racks_tp: int | None = None
    min_racks_devices: int | None = None
    own_tp: int = 1
    own_min_racks: int | None = None
    feasible: bool = False                      # the request itself fits (nothing to explain)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def text(self) -> str:
        lines = [self.headline]
        lines += [f"  - {c}" for c in self.culprits]
        if self.core:
            lines.append("  - these constraints cannot all hold at once (a CP-SAT unsatisfiable core; "
                         "drop or relax any one of them):")
            lines += [f"      * {c}" for c in self.core]
            if self.core_note:
                lines.append(f"    ({self.core_note})")
        elif self.core_note:
            lines.append(f"  - {self.core_note}")
        lines += [f"  - {n}" for n in self.notes]
        if self.max_concurrency is not None:
            at_least = "" if self.max_concurrency_proven else "at least "
            if self.max_concurrency < 0:
                lines.append("largest feasible concurrency: none (no placement exists even with no live "
                             "requests; lowering concurrency or context cannot help)")
            else:
                lines.append(f"largest feasible concurrency: {at_least}{self.max_concurrency}")
        if self.context_matters:
            if self.max_context_tokens is None:
                lines.append("longest context that fits: none (not even 1 token of context)")
            else:
                at_least = "" if self.max_context_proven else "at least "
                lines.append(f"longest context that fits at the asked concurrency: {at_least}"
                             f"{self.max_context_tokens:,} tokens")
        if self.min_racks is not None:
            line = f"smallest fleet that fits: --racks {self.min_racks}"
            if self.min_racks_tp is not None and self.min_racks_tp != self.own_tp:
                line += f" --tp {self.min_racks_tp}"
                if self.min_racks_devices is not None:
                    line += f" ({self.min_racks_devices:,} devices"
                    line += (f"; at tp {self.own_tp}: --racks {self.own_min_racks})" if self.own_min_racks
                             else f"; tp {self.own_tp} needs more)")
            lines.append(line)
        return "\n".join(lines)


# ----------------------------------------------------------------------------- deciding feasibility
class _Oracle:
    """Decides whether an instance has a placement: True, False, or None (undecided in time)."""

    def __init__(self, deadline: Deadline, probe_limit_s: float):
        self.deadline = deadline
        self.probe_limit_s = probe_limit_s
        self.undecided = 0

    def remaining(self) -> float:
        return self.deadline.remaining()

    def __call__(self, instance: Instance) -> bool | None:
        from placer.algorithms import decide_feasible

        # past the deadline (or after Ctrl-C) nothing more is tried: the probe stays undecided
        v = None if self.deadline.expired() else \
            decide_feasible(instance, time_limit=self.deadline.budget(self.probe_limit_s))
        if v is None:
            self.undecided += 1
        return v


def largest_feasible(decide, lo: int, hi: int) -> tuple[int | None, bool]:
    """Largest ``x`` in ``[lo, hi]`` with ``decide(x)`` true (:func:`placer.algorithms.search.largest_true`)."""
    return largest_true(decide, lo, hi)


# ----------------------------------------------------------------------------- direct checks
def _b(n: int) -> str:
    return f"{n:,} B"


def _largest_device(instance: Instance) -> int:
    caps = instance.capacity_bytes
    return min(range(instance.n_devices), key=lambda d: (-caps[d], d))


def _holds(instance: Instance, d: int) -> str:
    """``holds N B (M B of memory - A B of activation buffers)`` for device index ``d``."""
    dev = instance.devices[d]
    buf = instance.activation_buffer_bytes
    held = _b(instance.capacity_bytes[d])
    if buf:
        return f"holds {held} ({_b(dev.memory_bytes)} of memory - {_b(buf)} of activation buffers)"
    return f"holds {held}"


def _fitting_weight_bits(instance: Instance, node: int, capacity: int) -> int | None:
    """The largest weight precision below the asked one at which ``node``'s weights fit ``capacity``."""
    layer = instance.nodes[node]
    if layer.weight_bytes_fixed is not None or layer.params == 0:
        return None
    wl = instance.workload
    for bits in range(wl.weight_bits - 1, 0, -1):
        if memory.weight_bytes(layer, wl.replace(weight_bits=bits, weights_as_stored=False)) <= capacity:
            return bits
    return None


def _who(instance: Instance, nodes: list[int], limit: int = 4) -> str:
    """``node layers.3 (attention) needs`` or ``24 attention nodes (layers.3, ... and 20 more) each need``."""
    kind = instance.nodes[nodes[0]].kind
    names = [instance.nodes[i].name for i in nodes]
    if len(names) == 1:
        return f"node {names[0]} ({kind}) needs"
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f"{len(names)} {kind} nodes ({', '.join(names[:limit])}{more}) each need"


def _node_culprits(instance: Instance, limit: int = 3) -> list[str]:
    """Nodes no device holds, grouped by identical sizes, worst first."""
    caps = instance.capacity_bytes
    big = _largest_device(instance)
    cmax = caps[big]
    c = instance.workload.concurrency
    groups: dict[tuple, list[int]] = {}
    for i in range(instance.n_nodes):
        if instance.demand_bytes[i] > cmax:
            key = (instance.nodes[i].kind, instance.weight_bytes[i], instance.kv_request_bytes[i],
                   instance.state_request_bytes[i])
            groups.setdefault(key, []).append(i)
    ordered = sorted(groups.values(), key=lambda ns: (-instance.demand_bytes[ns[0]], ns[0]))
    where = f"the largest device, {instance.devices[big].id}, {_holds(instance, big)}"
    out = []
    for nodes in ordered[:limit]:
        i = nodes[0]
        w, r, need = instance.weight_bytes[i], instance.request_bytes[i], instance.demand_bytes[i]
        who = _who(instance, nodes)
        if w > cmax:
            text = (f"{who} {_b(w)} for the weights alone; {where}: {_b(w - cmax)} short, "
                    f"whatever the concurrency or context")
            bits = _fitting_weight_bits(instance, i, cmax)
            if bits is not None:
                text += f"; at --weight-bits {bits} the weights would fit"
        else:
            kv, st = instance.kv_request_bytes[i], instance.state_request_bytes[i]
            parts = [p for p in (f"{_b(kv)} KV cache" if kv else "", f"{_b(st)} state" if st else "") if p]
            text = (f"{who} {_b(w)} of weights + {c} live requests x {_b(r)} ({' + '.join(parts)}) "
                    f"= {_b(need)}; {where}: {_b(need - cmax)} short; alone on that device a node like "
                    f"this holds at most {(cmax - w) // r} live requests")
        out.append(text)
    if len(ordered) > limit:
        rest = sum(len(ns) for ns in ordered[limit:])
        out.append(f"... and {rest} more node(s) that no device holds")
    return out


def _pin_culprits(instance: Instance) -> list[str]:
    from placer.algorithms.pins import PinConflict, pin_groups

    try:
        groups = pin_groups(instance)
    except PinConflict as exc:
        return [f"the pins contradict each other: {exc}"]
    out = []
    caps = instance.capacity_bytes
    big = _largest_device(instance)
    for g in groups:
        need = sum(instance.demand_bytes[i] for i in g.nodes)
        d = big if g.device is None else g.device
        if need > caps[d]:
            names = _ranges(instance, g.nodes)
            dev = instance.devices[d].id
            where = f"{dev} {_holds(instance, d)}" if g.device is not None else \
                f"even the largest device, {dev}, {_holds(instance, d)}"
            why = " (a device holds one run of the pipeline, so the pins cover everything between)" \
                if instance.mode != "free" and len(g.nodes) > 1 else ""
            out.append(f"pinned together{why}: {names} need {_b(need)}; {where}: {_b(need - caps[d])} short")
    return out


def _fleet_culprit(instance: Instance) -> tuple[str, int] | None:
    """(words, devices needed) when a lower bound exceeds the fleet's available devices."""
    from placer.algorithms.bound import bounds

    named = bounds(instance)
    if "oversized_node" in named:
        return None
    lb = max(named.values())
    if lb <= instance.n_devices:
        return None
    which = max(named, key=named.get)
    total = sum(instance.demand_bytes)
    what = {"volume": f"the total demand {_b(total)} over the largest devices' capacities",
            "chain": "next-fit stages of the pipeline on devices as large as the largest",
            "martello_toth_l2": "nodes too large to share a device",
            "dual_feasible": "nodes too large to share a device"}.get(which, which)
    return (f"at least {instance.count_words(lb)} are needed ({which} bound: {what}); the fleet has "
            f"{instance.count_words(instance.n_devices, bare=True)} available", lb)


def _reach_culprit(instance: Instance) -> str | None:
    """Words when the fleet is cut into pieces that cannot each hold what must sit together."""
    from placer.algorithms import infeasibility
    from placer.algorithms.reach import reachability_infeasibility

    return reachability_infeasibility(instance, infeasibility)


def _ranges(instance: Instance, nodes) -> str:
    """``layers.0..layers.3, lm_head``: consecutive node indices as ranges."""
    nodes = sorted(nodes)
    parts, start, prev = [], None, None
    for i in nodes:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            parts.append((start, prev))
            start = prev = i
    if start is not None:
        parts.append((start, prev))
    names = instance.nodes
    return ", ".join(names[a].name if a == b else f"{names[a].name}..{names[b].name}" for a, b in parts)


# ----------------------------------------------------------------------------- CP-SAT core
def _core(instance: Instance, time_limit: float) -> tuple[list[str], str]:
    """An unsatisfiable core of the instance's constraint families, in words; ([], note) when none."""
    from placer.algorithms.cpsat.core import family_core  # loads OR-Tools, only when a core is wanted

    words, indices, note = family_core(instance, time_limit, max_cells=_CORE_MAX_CELLS, describe_nodes=_ranges)
    if not indices:
        return [], note
    return [words[j] for j in _group_nodes(indices, [(None, w) for w in words], instance)], note


def _group_nodes(core: list[int], families, instance: Instance) -> list[int]:
    """The core in a stable order (pins and structure first, then capacities, then node bytes)."""
    def rank(j: int) -> tuple[int, int]:
        words = families[j][1]
        first = 0 if words.startswith(("pin", "one run", "consecutive")) else \
            1 if words.startswith("the capacity") else 2
        return first, j
    return sorted(core, key=rank)


# ----------------------------------------------------------------------------- the explanation
def _available(instance: Instance) -> str:
    n = instance.n_devices
    return f"{n} available devices" if instance.tp == 1 else f"{instance.count_words(n)} available"


def _headline(instance: Instance) -> str:
    wl = instance.workload
    # attention data parallelism: the figures below are the heaviest rank's (its share of the requests)
    dp = f", attention data parallel: {wl.concurrency} a rank" if instance.attention_dp else ""
    return (f"no placement of {instance.model.name} on {instance.fleet.name} exists ({instance.mode} mode, "
            f"{instance.n_nodes} nodes on {_available(instance)}, {instance.served_workload.concurrency} live "
            f"requests of {format_tokens(wl.context_tokens)} tokens{dp}):")


def _with_context(instance: Instance, tokens: int) -> Instance:
    return replace(instance, workload=instance.workload.replace(context_tokens=tokens))


def _min_racks(instance: Instance, decide, lower_bound_devices: int, max_racks: int = 100000) -> int | None:
    """The fewest racks (the fleet resized as ``--racks`` does) on which ``decide`` finds a placement.

    Only for plain fleets (one group, nothing unavailable, no extra links, no pins); None when not
    found or not decided. Starts from the racks the device lower bound needs, doubles, then bisects.
    """
    from placer.specs.errors import PlacerError

    fleet = _base_fleet(instance)
    spec = fleet.spec.get("fleet", {}) if isinstance(fleet.spec, dict) else {}
    if spec.get("groups") or spec.get("unavailable") or spec.get("extra_links") or instance.pins:
        return None
    racks = len({d.rack for d in fleet.devices})
    per_rack = -(-instance.n_devices // racks)      # the instance's devices (groups of tp) per rack

    def fits(r: int) -> bool | None:
        try:
            return decide(instance.with_fleet(fleet.with_racks(r)))
        except PlacerError:        # e.g. a fleet beyond the size placer builds
            return None

    known_bad = max(racks, -(-lower_bound_devices // per_rack) - 1)
    r = known_bad + 1
    while True:
        v = fits(r)
        if v is None:
            return None
        if v:
            break
        if r >= max_racks:
            return None
        known_bad, r = r, min(max_racks, 2 * r)
    good = r
    while good - known_bad > 1:
        mid = (good + known_bad) // 2
        v = fits(mid)
        if v is None:
            return None
        if v:
            good = mid
        else:
            known_bad = mid
    return good


def _base_fleet(instance: Instance):
    """The fleet of the specs' devices an instance was made on (not its groups of ``tp``)."""
    lay = instance.layout
    return lay.base_fleet if lay is not None and lay.base_fleet is not None else instance.fleet


def _other_degrees(instance: Instance) -> list[Instance]:
    """``instance`` at every other tensor-parallel degree the model allows on its GPU fleet (the
    degrees ``placer solve`` tries by default), contiguous or free, without pins or per-stage
    degrees; empty on wafer fleets and in split mode."""
    from placer.problem.instance import Layout, make_instance
    from placer.problem.reductions.tensor_parallel import default_degrees
    from placer.specs.errors import InvalidSpec

    lay = instance.layout
    if instance.mode == "split" or instance.pins or (lay is not None and lay.per_stage):
        return []
    model, fleet = instance.base_model or instance.model, _base_fleet(instance)
    ep = bool(instance.ep)
    degrees, _ = default_degrees(model, fleet, ep, instance.workload)
    out = []
    for g in degrees:
        if g == instance.tp:
            continue
        try:
            out.append(make_instance(model, fleet, instance.workload, mode=instance.mode, require=instance.require,
                                     layout=Layout(tp=g, ep=ep, reserve=None if lay is None else lay.reserve)))
        except InvalidSpec:
            continue
    return out


def _smallest_fleet(instance: Instance, decide, lower_bound_devices: int) -> dict:
    """:class:`Explanation` fields for the smallest fleet that fits: at ``instance``'s own degree and,
    on GPU fleets, at every other degree the model allows (tensor parallelism splits the nodes that
    no device holds whole); the fewest racks win, the lower degree on a tie."""
    own = _min_racks(instance, decide, lower_bound_devices)
    best, best_tp, best_inst = own, instance.tp, instance
    for other in _other_degrees(instance):
        if decide.remaining() <= 0:
            break
        culprit = _fleet_culprit(other)
        if culprit is None:
            fits = decide(other)        # the fleet as it is may already hold it at this degree
            racks = len({d.rack for d in _base_fleet(other).devices}) if fits else None
        else:
            racks = _min_racks(other, decide, culprit[1])
        if racks is not None and (best is None or racks < best):
            best, best_tp, best_inst = racks, other.tp, other
    if best is None:
        return {}
    base = _base_fleet(best_inst)
    per_rack = -(-len(base.devices) // len({d.rack for d in base.devices}))
    return dict(min_racks=best, min_racks_tp=best_tp, min_racks_devices=best * per_rack, own_tp=instance.tp,
                own_min_racks=own)


def diagnose(instance: Instance, *, time_limit: float = 20.0, probe_limit: float = 2.0,
             deadline: Deadline | None = None) -> Explanation:
    """An :class:`Explanation` of why ``instance`` has no placement (see the module docstring).

    ``time_limit`` bounds the whole diagnosis (wall seconds), ``deadline`` (shared with the solve
    before it) too: it ends by the earlier; ``probe_limit`` bounds one CP-SAT probe of the
    searches. Pure: reads ``instance`` only.
    """
    decide = _Oracle(Deadline.of(deadline, time_limit), probe_limit)
    culprits = _node_culprits(instance) + _pin_culprits(instance)
    fleet = _fleet_culprit(instance)
    if fleet is not None and not culprits:
        culprits.append(fleet[0])
    if not culprits:
        cut = _reach_culprit(instance)
        if cut is not None:
            culprits.append(cut)
    if not culprits and instance.require and decide(replace(instance, require=())):
        culprits.append(f"the requirements ({', '.join(instance.require)}) are what no placement meets: without "
                        "them one exists")
    if not culprits and decide(instance):
        return Explanation(headline=f"a placement of {instance.model.name} on {instance.fleet.name} exists "
                                    f"({instance.mode} mode); nothing to explain", feasible=True)
    core, core_note = ([], "")
    if not culprits:
        left = decide.remaining()
        core, core_note = _core(instance, left / 2) if left > 0.1 else \
            ([], "no unsatisfiable core computed (the time limit was reached)")
    # what would fit
    per_node = [r > 0 for r in instance.request_bytes]
    weights_alone = any(w > max(instance.capacity_bytes) for w in instance.weight_bytes)
    asked_c = instance.workload.concurrency
    max_c, max_c_proven = None, True
    if any(per_node):
        if weights_alone:
            max_c = -1
        else:
            cmax = max(instance.capacity_bytes)
            ceiling = min((cmax - w) // r for w, r in zip(instance.weight_bytes, instance.request_bytes) if r > 0)
            hi = min(ceiling, max(asked_c - 1, 0)) if asked_c > 0 else min(ceiling, MAX_CONCURRENCY)
            found, max_c_proven = largest_feasible(lambda c: decide(instance.with_concurrency(c)), 0, hi)
            # nothing found: "none fits" only when every probe was decided, else unknown (None)
            max_c = found if found is not None else (-1 if max_c_proven else None)
    context_matters = any(instance.kv_request_bytes) and asked_c > 0 and max_c != -1
    max_t, max_t_proven = None, True
    if context_matters:
        asked_t = instance.workload.context_tokens
        max_t, max_t_proven = largest_feasible(lambda t: decide(_with_context(instance, t)), 1,
                                               max(1, asked_t - 1))
        if max_t is None and not max_t_proven:
            context_matters = False     # undecided, not "no context fits": the notes say so
    smallest = {}
    if fleet is not None and decide.remaining() > 0:
        smallest = _smallest_fleet(instance, decide, fleet[1])
    notes = []
    if decide.undecided:
        notes.append(f"{decide.undecided} probe(s) were not decided within the time limit; figures marked "
                     "'at least' are lower bounds")
    return Explanation(headline=_headline(instance), culprits=tuple(culprits), core=tuple(core),
                       core_note=core_note, max_concurrency=instance.group_requests(max_c),
                       max_concurrency_proven=max_c_proven,
                       max_context_tokens=max_t, max_context_proven=max_t_proven,
                       context_matters=context_matters, notes=tuple(notes), **smallest)


def explain_infeasible(instance: Instance, *, time_limit: float = 20.0, deadline: Deadline | None = None) -> str:
    """Several lines saying why ``instance`` has no placement and what would fit (see :func:`diagnose`)."""
    return diagnose(instance, time_limit=time_limit, deadline=deadline).text()
