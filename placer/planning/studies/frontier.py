"""Speed frontiers: per fleet, what each per-user speed costs in tokens/s per MW and per device.

For each fleet and each device layout it allows (:func:`placer.planning.speed.layouts`: on GPU fleets
every tensor-parallel degree the model's heads and the node size allow, and for MoE models each
degree with experts spread whole; wafers run one device per stage), :func:`speed_frontier` places
the model (the solver's public :func:`placer.algorithms.place`, through
:func:`placer.planning.budget.min_devices`) for per-replica concurrency targets 1, 2, 4, ... up to what the
fleet holds, validates every placement with
:func:`placer.mapping.validate.validate_mapping` (code that shares nothing with the solver), then
simulates each placement at live loads 1, 2, 4, ... up to its concurrency ceiling (continuous
batching, one discrete-event run per point, in worker processes or Ray tasks). A point is a placement at a
load: its degree, per-user speed, aggregate tokens/s per MW and per device (devices count every
member of a group), and how many identical replicas the fleet holds (replicas on disjoint devices
scale the live requests, not the ratios).
The Pareto set of each fleet maximises all three. :func:`compare_at_speeds` says, for each
requested speed, which fleet serves it with the most tokens/s per MW and by what ratio.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from placer.algorithms.search import doubling_ladder
from placer.planning.layouts import device_layouts, layout_label
from placer.planning.requirements import Requirements, SolverSettings
from placer.planning.solve import build_instance, check_accept, place_instance
from placer.planning.speed import ttft_within
from placer.planning.tasks import check_backend, run_tasks
from placer.simulate.steady import check_sim
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.fleet import Fleet
from placer.specs.model import LayerGraph
from placer.specs.spec_io import atomic_write_text
from placer.specs.units import plural
from placer.specs.workload import Workload

__all__ = ["COLUMNS", "FrontierGrid", "FrontierReport", "speed_frontier", "pareto", "compare_at_speeds", "write_csv"]

COLUMNS = ["platform", "serving", "tp", "ep", "attention_dp", "devices", "replicas", "target", "live_per_replica", "live_total",
           "per_user_tokens_per_s", "aggregate_per_live_tokens_per_s", "itl_p50_us", "aggregate_tokens_per_s", "power_w",
           "tokens_per_s_per_mw", "tokens_per_s_per_device", "joules_per_token", "hop_latency_us", "valid", "pareto",
           "schedule", "context_tokens", "route", "ttft_p99_us", "meets_ttft", "power_boundary", "spec_tokens",
           "spec_accept", "cached_prompt_tokens", "ttft_model_us", "ttft_budget_ms", "rate_per_s", "prefill_layout", "decode_layout",
           "proven", "traffic", "sim", "error_band", "usd_per_million_tokens", "price_source"]


@dataclass
class FrontierReport:
    model: str
    context_tokens: int
    platforms: list[str]
    rows: list[dict]
    speeds: tuple[float, ...] = ()
    sentences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _simulate_point(task: tuple) -> dict:
    """One point (runs in a worker process): a placement simulated at one load."""
    from placer.planning.price import placement_price, usd_per_million_tokens
    from placer.simulate.per_user import with_aggregate_per_live
    from placer.simulate.steady import simulate_with

    model, fleet, workload, requirements, assignment, live, output_tokens, meta, how = task
    inst = build_instance(model, fleet, workload, requirements, tp=meta["tp"], ep=meta["ep"],
                          attention_dp=meta["attention_dp"])
    # the instance's own speculation and prefix cache (build_instance) are the run's; a group's
    # live requests under attention data parallelism (its heaviest rank runs its share)
    sim = simulate_with(how, inst, assignment, requests=live, max_live=live, output_tokens=output_tokens)
    agg = sim.aggregate_tokens_per_s
    price, source = placement_price(inst, assignment)       # a replica's devices, each at its type's price
    return with_aggregate_per_live(dict(meta, live_per_replica=live, live_total=live * meta["replicas"],
                per_user_tokens_per_s=sim.per_user_tokens_per_s, itl_p50_us=sim.itl_p50_us,
                aggregate_tokens_per_s=agg, power_w=sim.power_w, tokens_per_s_per_mw=sim.tokens_per_s_per_mw,
                tokens_per_s_per_device=agg / meta["devices"], joules_per_token=sim.joules_per_token,
                schedule=sim.schedule, ttft_p99_us=sim.ttft_p99_us, spec_tokens=sim.spec_k,
                spec_accept=sim.spec_accept, cached_prompt_tokens=sim.cached_prompt_tokens,
                power_boundary=sim.power_boundary, traffic=sim.traffic.describe().removeprefix("traffic: "),
                error_band=sim.speed_error, usd_per_million_tokens=usd_per_million_tokens(price, agg),
                price_source=source, sim=sim.method))


def pareto(rows: Sequence[dict], keys=("per_user_tokens_per_s", "tokens_per_s_per_mw", "tokens_per_s_per_device")
           ) -> list[bool]:
    """Whether each row is Pareto-optimal (no other row at least as good on every key and better
    on one; larger is better, None is worst)."""
    vals = [tuple(-1.0 if r.get(k) is None else float(r[k]) for k in keys) for r in rows]
    out = []
    for i, a in enumerate(vals):
        dominated = any(all(b[j] >= a[j] for j in range(len(keys))) and b != a for b in vals)
        out.append(not dominated and vals.index(a) == i)    # one of equal rows only
    return out


@dataclass(frozen=True)
class FrontierGrid:
    """What a frontier sweeps beside the requirements: the per-user ``speeds`` its answers are
    for; ``output_tokens`` each simulated request generates (the rest of the context is its
    prompt); ``max_target``: the largest per-replica concurrency target placed (default: up to
    what the fleet holds); ``max_ttft_ms``: points whose p99 time to first token exceeds it are off
    the Pareto sets and the answers (``meets_ttft`` False); ``disagg``: also, per fleet and per
    speed, the disaggregated plan serving the most requests/s under that TPOT and ``max_ttft_ms``
    (required then), its prefill pool on the same fleet and, when given, on ``prefill_fleet``
    (:mod:`placer.planning.studies.frontier_disagg`); those rows are platforms of their own
    (``wse-3t disagg``, ``wse-3t decode + b200 prefill``); ``sim``: how each point is simulated,
    ``"fast"`` (:mod:`placer.simulate.steady`, the event run's schedule without its per-visit
    events; the event run where it does not model the traffic) or ``"exact"`` (the event run); a
    point's ``sim`` column says which ran (``steady`` or ``event``)."""

    speeds: tuple[float, ...] = ()
    output_tokens: int = 16
    max_target: int | None = None
    max_ttft_ms: float | None = None
    disagg: bool = False
    prefill_fleet: Fleet | None = None
    sim: str = "fast"

    def __post_init__(self):
        object.__setattr__(self, "speeds", tuple(self.speeds))
        check_sim(self.sim)
        if self.disagg and self.max_ttft_ms is None:
            raise InvalidSpec(ARGUMENT, "max_ttft_ms", "disaggregated points need a TTFT target (--max-ttft-ms)")
        if self.prefill_fleet is not None and not self.disagg:
            raise InvalidSpec(ARGUMENT, "prefill_hardware", "applies to disaggregated points: add --disagg")


def speed_frontier(model: LayerGraph, fleets: Sequence[Fleet], workload: Workload, requirements: Requirements,
                   solver: SolverSettings, grid: FrontierGrid = FrontierGrid(), *, jobs: int | None = None,
                   backend: str = "process", address: str | None = None,
                   progress: Callable[[int, int], None] | None = None) -> FrontierReport:
    """The points and Pareto sets of ``model`` on each of ``fleets`` at ``workload``'s context.

    Every placement is an instance of :func:`placer.planning.solve.build_instance` under
    ``requirements`` (the layouts of its placement: degrees, expert parallelism, reserve,
    constraints, a runtime's rules; speculative decoding, its drafter placed and every point
    simulated with it; the prefix cache) placed by :func:`~placer.planning.solve.place_instance`
    with ``solver``; the requirements hold no speed floor and no pools (the frontier sweeps the
    loads; ``grid.disagg`` adds the disaggregated points), and their mode is contiguous unless
    they say otherwise. ``grid``: what is swept (:class:`FrontierGrid`). ``jobs`` worker processes
    place the layouts (one task per fleet and layout: its ladder of targets) and then simulate the
    points (default: the machine's cores; 1 runs them in this process), or with ``backend="ray"``
    one Ray task each (``address`` of a cluster, default a local one;
    :func:`placer.planning.tasks.run_tasks`); ``progress(done, total)`` is called after
    each point.
    """
    check_backend(backend)      # an unknown backend or Ray missing is said before any placement is solved
    req = _frontier_requirements(requirements)
    notes: list[str] = []
    run = dict(backend=backend, jobs=jobs or os.cpu_count() or 1, address=address)
    tasks = _fleet_tasks(model, fleets, workload, req, solver, grid, notes, run)
    rows: list[dict] = []

    def finished(task, row: dict) -> None:
        rows.append(row)
        if progress:
            progress(len(rows), len(tasks))

    run_tasks(_simulate_point, (), tasks, finished, **run)
    rows.sort(key=lambda r: (r["platform"], r["tp"], r["ep"], r["attention_dp"], r["devices"], r["target"],
                             r["live_per_replica"]))
    limit = None if grid.max_ttft_ms is None else grid.max_ttft_ms * 1e3
    for r in rows:      # a TTFT target: points over it stay listed, off the Pareto set and the answers
        r["meets_ttft"] = ttft_within(r.get("ttft_p99_us"), limit)
        r["pareto"] = False
    platforms = [f.name for f in fleets]
    if grid.disagg:
        from placer.planning.studies.frontier_disagg import disagg_points

        more, why = disagg_points(model, fleets, workload, req, solver, grid)
        rows += more
        notes += why
        platforms += list(dict.fromkeys(r["platform"] for r in more))
    for name in dict.fromkeys(r["platform"] for r in rows):
        mine = [r for r in rows if r["platform"] == name and r["meets_ttft"]]
        for r, p in zip(mine, pareto(mine)):
            r["pareto"] = p
    report = FrontierReport(model=model.name, context_tokens=workload.context_tokens,
                            platforms=platforms, rows=rows, speeds=grid.speeds, notes=notes)
    report.sentences = compare_at_speeds(report, grid.speeds)
    return report


def _fleet_tasks(model: LayerGraph, fleets: Sequence[Fleet], workload: Workload, req: Requirements,
                 solver: SolverSettings, grid: FrontierGrid, notes: list[str], run: dict) -> list[tuple]:
    """The points of every fleet to simulate: per device layout (:func:`placer.planning.layouts.device_layouts`)
    the placements of :func:`_ladder`, each layout's ladder an independent task (``run``: the
    :func:`~placer.planning.tasks.run_tasks` options; the same placements, notes and points
    in the same order however many run at once). What was not searched, or fails validation, is
    said in ``notes``."""
    placement = req.placement
    work: list[tuple] = []
    refusals: list[str | None] = []
    for k, fleet in enumerate(fleets):
        found = device_layouts(model, fleet, degrees=placement.layout_degrees, ep=placement.expert_parallel,
                               mode=placement.mode, workload=workload, attention_dp=placement.attention_dp)
        refused = found.refused_by_label()
        refusals.append(f"{fleet.name}: not searched: " + "; ".join(f"{k} ({v})" for k, v in refused.items())
                        if refused else None)
        for tp, spread, adp in found.every():
            base = build_instance(model, fleet, workload, req, tp=tp, ep=spread, concurrency=1, attention_dp=adp)
            check_accept(base.speculation)      # every point is simulated with it
            work.append((len(work), k, fleet, (tp, spread, adp)))
    done: dict[int, tuple] = {}
    run_tasks(_ladder, (model, workload, req, solver, grid.max_target), work,
              lambda item, value: done.__setitem__(item[0], value), **run)
    tasks: list[tuple] = []
    for k, fleet in enumerate(fleets):
        if refusals[k]:
            notes.append(refusals[k])
        for item in (x for x in work if x[1] == k):
            points, said = done[item[0]]
            notes += said
            for wl, assignment, lives, meta in points:
                tasks += [(model, fleet, wl, req, assignment, live, grid.output_tokens, meta, grid.sim)
                          for live in lives]
    return tasks


def _ladder(model: LayerGraph, workload: Workload, req: Requirements, solver: SolverSettings,
            max_target: int | None, item: tuple) -> tuple[list[tuple], list[str]]:
    """One layout's placements (runs in a worker): per-replica concurrency target 1, 2, 4, ... until
    the fleet holds no placement, each distinct placement validated
    (:func:`placer.mapping.validate.validate_mapping`, code that shares nothing with the solver) and
    to be simulated at live loads 1, 2, 4, ... up to its ceiling. Returns ``(workload, assignment,
    loads, meta)`` per placement and the notes."""
    from placer.mapping.validate import validate_mapping

    _index, _k, fleet, (tp, spread, adp) = item
    base = build_instance(model, fleet, workload, req, tp=tp, ep=spread, concurrency=1, attention_dp=adp)
    n_groups = len(base.devices)
    tag = layout_label(tp, spread, adp)
    seen: set[tuple] = set()
    points, notes = [], []
    target = 1
    while target <= (max_target or 2**30):
        inst = base.with_concurrency(target)
        solved = place_instance(inst, solver, reports=False, keep_interrupted=False)
        r = solved.per_group
        if not r.feasible:
            if target == 1:
                notes.append(f"{fleet.name}, {tag}: no placement of {model.name} ({r.message or r.status})")
            break
        top = int(inst.group_requests(r.concurrency_ceiling) or inst.group_requests(target))
        key = tuple(r.assignment)
        if key not in seen:
            seen.add(key)
            doc = solved.mapping
            violations = validate_mapping(doc, model=model, fleet=fleet)
            meta = dict(platform=fleet.name, serving="aggregated", tp=tp, ep=spread, attention_dp=adp,
                        devices=r.devices_used * tp, proven=bool(r.proven_optimal),
                        replicas=n_groups // r.devices_used, target=target, hop_latency_us=r.hop_latency_us,
                        valid=not violations, context_tokens=workload.context_tokens,
                        route=" ".join(doc["route"]))
            if violations:
                notes.append(f"{fleet.name}, {tag}: placement for {target} live requests fails validation "
                             f"({violations[0].message}); its points are kept and marked invalid")
            points.append((inst.workload, list(r.assignment), list(doubling_ladder(top)), meta))
        target *= 2             # until the fleet holds no placement for that many
    return points, notes


def _frontier_requirements(requirements: Requirements) -> Requirements:
    """The requirements every placement of the frontier is made under: contiguous unless they say
    otherwise, whatever the method; refused with a speed floor or pools (the frontier sweeps the
    loads; :attr:`FrontierGrid.disagg` adds the disaggregated points)."""
    if requirements.targets.has_speed_floor or requirements.pools is not None:
        raise InvalidSpec(ARGUMENT, "requirements", "a frontier sweeps the loads: no speed floor or disaggregation "
                                                    "in its requirements (FrontierGrid(disagg=True) adds those points)")
    if requirements.placement.mode is not None:
        return requirements
    return requirements.replace(placement=requirements.placement.replace(mode="contiguous"))


def _best_at(rows: Sequence[dict], platform: str, speed: float) -> dict | None:
    ok = [r for r in rows if r["platform"] == platform and r["valid"] and r.get("meets_ttft", True)
          and r["per_user_tokens_per_s"] is not None
          and r["per_user_tokens_per_s"] >= speed and r["tokens_per_s_per_mw"] is not None]
    return max(ok, key=lambda r: r["tokens_per_s_per_mw"], default=None)


def _degree(row: dict) -> str:
    """``", tp 8 ep"`` for a point on device groups, nothing for one device per stage; a
    disaggregated point's pools (``", 3 x tp 2 (b200, 10 devices) prefill + ..."``)."""
    if row.get("serving") == "disaggregated":
        return f", {row['prefill_layout']} prefill + {row['decode_layout']} decode"
    tp = row.get("tp", 1)
    if row.get("attention_dp"):
        return f", {layout_label(tp, True, True)}"
    return "" if tp == 1 else f", tp {tp}{' ep' if row.get('ep') else ''}"


def _cheapest(report: FrontierReport, speed: float) -> str:
    """``"; cheapest per token: <platform>, $X per million tokens (...)"``: the point at or above
    ``speed`` with the fewest dollars per million tokens (nothing when no such point has a price)."""
    ok = [r for r in report.rows if r["valid"] and r.get("meets_ttft", True) and r.get("usd_per_million_tokens")
          and r["per_user_tokens_per_s"] is not None and r["per_user_tokens_per_s"] >= speed]
    if not ok:
        return ""
    r = min(ok, key=lambda r: r["usd_per_million_tokens"])
    return (f"; cheapest per token: {r['platform']}, ${r['usd_per_million_tokens']:,.3f} per million tokens "
            f"({plural(r['devices'], 'device')} per replica{_degree(r)}, {r['per_user_tokens_per_s']:,.0f} tokens/s per user)")


def compare_at_speeds(report: FrontierReport, speeds: Sequence[float]) -> list[str]:
    """One sentence per speed: which platform serves it with the most tokens/s per MW, by what
    ratio over the next, or that no platform reaches it (naming each one's fastest point); and the
    point at that speed with the fewest dollars per million tokens, where prices are known."""
    out = []
    for x in speeds:
        best = {p: _best_at(report.rows, p, x) for p in report.platforms}
        reach = sorted(((p, r) for p, r in best.items() if r), key=lambda pr: -pr[1]["tokens_per_s_per_mw"])
        missing = [p for p, r in best.items() if r is None]

        def fastest(p):
            mine = [r for r in report.rows if r["platform"] == p and r["per_user_tokens_per_s"] is not None]
            if not mine:
                return f"{p} has no placement"
            top = max(mine, key=lambda r: r["per_user_tokens_per_s"])
            return (f"{p} peaks at {top['per_user_tokens_per_s']:,.0f} tokens/s per user ({plural(top['devices'], 'device')}"
                    f"{_degree(top)})")

        if not reach:
            out.append(f"At {x:,.0f} tokens/s per user no platform qualifies: "
                       + "; ".join(fastest(p) for p in missing) + ".")
            continue
        p, r = reach[0]
        head = (f"At {x:,.0f} tokens/s per user, {p} is ahead with {r['tokens_per_s_per_mw']:,.0f} tokens/s per MW "
                f"({plural(r['devices'], 'device')} per replica{_degree(r)}, {r['live_per_replica']} live requests each, "
                f"{r['per_user_tokens_per_s']:,.0f} tokens/s per user)")
        if len(reach) > 1:
            q, s = reach[1]
            head += (f", {r['tokens_per_s_per_mw'] / s['tokens_per_s_per_mw']:.2f}x {q} "
                     f"({s['tokens_per_s_per_mw']:,.0f} tokens/s per MW{_degree(s)})")
        if missing:
            head += "; " + "; ".join(f"{fastest(m)}, short of the floor" for m in missing)
        out.append(head + _cheapest(report, x) + ".")
    return out


def write_csv(path, rows: Sequence[dict]) -> None:
    """The points as CSV (:data:`COLUMNS`), written atomically."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in COLUMNS})
    atomic_write_text(path, buf.getvalue())
