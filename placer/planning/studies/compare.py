"""Compare methods and degrees: one placement step per row, rows in a table.

:func:`compare` places one model in every (method, mode) of :data:`COMPARE_ROWS` (the published
rule and first-fit decreasing in free mode, greedy, pathwalk and the exact DP in contiguous mode,
CP-SAT in all three modes, and the lower bounds) and returns one row per method and mode with the
field names of ``docs/mapping-format.md``; :func:`compare_degrees` solves every device layout
(tensor-parallel degree, expert parallelism) and simulates each. Both take the model, the fleet,
the workload, the :class:`~placer.planning.requirements.Requirements` and the
:class:`~placer.planning.requirements.SolverSettings`, as :func:`placer.plan` does.
"""

from __future__ import annotations

from time import perf_counter

from placer.algorithms.deadline import interrupt_scope, interrupted
from placer.planning.layouts import Layouts, attention_dp_layouts, device_layouts
from placer.planning.requirements import SPLIT_GRANULARITY, Requirements, SolverSettings, granularity_for
from placer.planning.solve import Solved, build_instance, place_instance, search_layouts
from placer.planning.speed import ttft_within
from placer.problem.instance import Instance
from placer.problem.placement import Result, levels_doc
from placer.simulate.arguments import study_traffic
from placer.specs.fleet import Fleet
from placer.specs.model import LayerGraph
from placer.specs.workload import Workload

__all__ = ["compare", "compare_degrees", "degree_row",
           "COMPARE_ROWS", "DEGREE_FIELDS", "row_of", "solution_path", "node_ranges",
           "SPLIT_GRANULARITY", "granularity_for"]

# (method, mode), in the order the table shows them
COMPARE_ROWS = (
    ("typepack", "free"),
    ("ffd", "free"),
    ("greedy", "contiguous"),
    ("pathwalk", "contiguous"),
    ("dp", "contiguous"),
    ("cpsat", "contiguous"),
    ("cpsat", "free"),
    ("cpsat", "split"),
    ("bound", "contiguous"),
    ("bound", "free"),
    ("bound", "split"),
)

ROW_FIELDS = ("method", "mode", "devices_used", "hops", "hop_latency_us", "concurrency_ceiling",
              "lower_bound_devices", "proven_optimal", "status", "seconds")


def devices_proven(result: Result) -> bool:
    """Whether the device count is proven minimal (:attr:`placer.problem.placement.Result.devices_proven`)."""
    return result.devices_proven


def row_of(result: Result, **extra) -> dict:
    """A compare row: the fields of ``docs/interfaces.md`` (compare), then ``gap``, ``message`` and ``extra``."""
    row = {f: getattr(result, f) for f in ROW_FIELDS}
    row["status"] = str(result.status)
    row["seconds"] = round(float(result.seconds), 3)
    row["gap"] = result.gap
    row["devices_proven"] = devices_proven(result)
    row["message"] = result.message
    row["levels"] = levels_doc(result)      # every level, exact (name, value, unit, bound, proven)
    row.update(extra)
    return row


def compare(model: LayerGraph, fleet: Fleet, workload: Workload, requirements: Requirements | None = None,
            solver: SolverSettings | None = None, *, rows=COMPARE_ROWS, progress=None) -> dict:
    """``{"rows": [...]}``: one row per (method, mode) of ``rows``, each placed under
    ``requirements`` (split mode at its placement's granularity, default ``shards:4``; the mode
    is each row's) with ``solver``'s time limit, seed and threads (the method is each row's).
    ``progress(method, mode)`` is called before each row is solved. After Ctrl-C the rows so far
    come back with ``"interrupted": True``."""
    with interrupt_scope():     # a Ctrl-C noted in one row stays set until the loop has seen it
        return _compare(model, fleet, workload, requirements or Requirements(), solver or SolverSettings(), rows,
                        progress)


def _compare(model, fleet, workload, req: Requirements, solver: SolverSettings, rows, progress) -> dict:
    out = []
    instances: dict[str, Instance] = {}
    for method, mode in rows:
        try:
            if interrupted():
                return {"rows": out, "interrupted": True}
            if mode not in instances:
                placement = req.placement.replace(mode=mode, granularity=req.placement.granularity if mode == "split"
                                                  else None)
                instances[mode] = build_instance(model, fleet, workload, req.replace(placement=placement))
            if progress is not None:
                progress(method, mode)
            if interrupted():       # noted while the row was announced: start no search
                return {"rows": out, "interrupted": True}
            t0 = perf_counter()
            result = place_instance(instances[mode], solver, method=method, reports=False).per_group
        except KeyboardInterrupt:   # Ctrl-C outside the solver's search: the rows so far
            return {"rows": out, "interrupted": True}
        result = result.replace(seconds=max(result.seconds, perf_counter() - t0))
        out.append(row_of(result, granularity=instances[mode].model.granularity))
        if result.interrupted or interrupted():   # Ctrl-C during the search: this row holds its best so far; start no other
            return {"rows": out, "interrupted": True}
    return {"rows": out}


DEGREE_FIELDS = ("tp", "ep", "devices_used", "stages", "devices_proven", "concurrency_ceiling", "hop_latency_us",
                 "proven_optimal", "status", "seconds", "live_requests", "alone_tokens_per_s",
                 "per_user_tokens_per_s", "aggregate_tokens_per_s")

# the live requests of the per-degree table's runs, in words (Traffic.describe)
DEGREE_LOAD = "each row's load: one user alone, then its live requests"


def degree_row(solved: Solved, *, output_tokens: int = 32, max_ttft_ms: float | None = None,
               decode_only: bool = False) -> dict:
    """One row of :func:`compare_degrees` for a solve at one degree: the device figures (in
    devices), the guaranteed concurrency (the ceiling every stage holds) and the simulated speed.

    ``alone_tokens_per_s``: one request alone; ``per_user_tokens_per_s`` and
    ``aggregate_tokens_per_s``: ``live_requests`` requests live at once, the workload's concurrency
    (at most the ceiling), each prefilling its prompt (the workload's context less ``output_tokens``,
    less the instance's cached prefix) then decoding ``output_tokens`` tokens in a closed loop;
    ``decode_only``: every prompt already in the KV cache, the decodes alone
    (:func:`placer.simulate.simulate`, which costs a group's all-reduces and all-to-alls).
    ``alone_error_band`` and ``error_band``: the calibration's error band of each run's speeds
    (:func:`placer.simulate.error_band.error_band`, the regime of its batch).
    """
    from placer.simulate import Traffic, simulate

    r, inst = solved.result, solved.instance
    row = dict.fromkeys(DEGREE_FIELDS)
    row.update(tp=inst.tp, ep=inst.tp if inst.ep else 1, devices_used=r.devices_used,
               stages=solved.stages,
               devices_proven=devices_proven(r), concurrency_ceiling=r.concurrency_ceiling,
               hop_latency_us=r.hop_latency_us, proven_optimal=r.proven_optimal, status=str(r.status),
               seconds=round(float(r.seconds), 3), message=r.message, levels=levels_doc(r))
    if inst.attention_dp:
        row["attention_dp"] = True
    if not r.feasible:
        return row
    from placer.simulate.des import simulate_group

    ceiling, asked = r.concurrency_ceiling, inst.served_workload.concurrency
    live = max(1, asked if ceiling is None else min(asked, ceiling))
    alone = simulate(inst, r.assignment, Traffic(requests=1, max_live=1, output_tokens=output_tokens,
                                                 decode_only=decode_only))
    # attention data parallelism: the heaviest rank runs its share, the figures are the group's
    loaded = simulate_group(inst, r.assignment, requests=live, max_live=live, output_tokens=output_tokens,
                            decode_only=decode_only)
    row["ttft_p99_us"] = loaded.ttft_p99_us
    if max_ttft_ms is not None:
        row["meets_ttft"] = ttft_within(row["ttft_p99_us"], max_ttft_ms * 1e3)
    row.update(live_requests=live, alone_tokens_per_s=alone.per_user_tokens_per_s,
               per_user_tokens_per_s=loaded.per_user_tokens_per_s,
               aggregate_tokens_per_s=loaded.aggregate_tokens_per_s,
               alone_error_band=alone.speed_error, error_band=loaded.speed_error)
    return row


def compare_degrees(model: LayerGraph, fleet: Fleet, workload: Workload, requirements: Requirements,
                    solver: SolverSettings, *, output_tokens: int = 32, max_ttft_ms: float | None = None,
                    decode_only: bool = False,
                    progress=None) -> dict:
    """``{"degrees": [...], "refused": [{"tp", "ep", "reason"}]}``: for each device layout
    (:func:`placer.planning.layouts.device_layouts` of the requirements' degrees, default every
    degree the model and the nodes allow), the proven fewest devices, the guaranteed concurrency
    and the simulated speed (:func:`degree_row`), in contiguous mode, CP-SAT with the
    requirements' objective (default ``placer solve``'s levels: devices, concurrency, hop latency
    with the groups' collectives), their reserve, constraints and runtime.

    The requirements' ``expert_parallel``: None lists tensor-split experts and, for degrees above
    1, expert parallelism on an MoE model (tensor split only on a dense one); True or False lists
    only that one. Rows come tensor-split first; with ``max_ttft_ms`` each row says whether its
    p99 time to first token at the loaded run meets it (``meets_ttft``). Their ``attention_dp``
    True adds the attention-data-parallel layouts after them (rows with ``"attention_dp": True``,
    ``ep`` the degree; :mod:`placer.problem.reductions.attention_dp`; refusals with ``ep``
    ``"attention-dp"``). ``progress(tp, ep)`` is called before each layout is solved. After
    Ctrl-C the rows so far come back with ``"interrupted": True``. Raises :class:`InvalidSpec`
    (``tp``) when no degree asked runs.
    """
    placement = requirements.placement
    attention_dp = bool(placement.attention_dp)
    req = requirements.replace(placement=placement.replace(mode="contiguous", attention_dp=attention_dp))
    degrees, ep = req.placement.layout_degrees, placement.expert_parallel
    found = device_layouts(model, fleet, degrees=degrees, ep=ep, mode="contiguous", workload=workload)
    dp = (attention_dp_layouts(model, fleet, degrees=degrees, workload=workload) if attention_dp
          else Layouts(()))
    ordered = Layouts(tuple(sorted(found.allowed, key=lambda x: (x[1], x[0]))), found.refused, dp.attention_dp)
    refused = [{"tp": tp, "ep": e, "reason": why} for (tp, e), why in found.refused.items() if tp > 0]
    refused += [{"tp": tp, "ep": "attention-dp", "reason": why} for (tp, _), why in dp.refused.items() if tp > 0]
    rows: list[dict] = []

    traffic = study_traffic(workload.context_tokens, output_tokens,
                            {"cached_prompt_tokens": requirements.targets.cached_prompt_tokens,
                             "decode_only": decode_only, **_lengths(requirements.traffic)}, model)

    def out(stopped: bool = False) -> dict:
        doc = {"degrees": rows, "refused": sorted(refused, key=lambda r: (r["tp"], str(r["ep"]))),
               "traffic": traffic.to_dict(DEGREE_LOAD)}
        if stopped:
            doc["interrupted"] = True
        return doc

    try:
        search = search_layouts(model, fleet, workload, req, solver, layouts=ordered,
                                before=None if progress is None else (lambda tp, e: progress(tp, e)),
                                after=lambda tp, e, solved: rows.append(degree_row(solved, output_tokens=output_tokens, decode_only=decode_only,
                                                                                  max_ttft_ms=max_ttft_ms)))
    except KeyboardInterrupt:
        return out(True)
    if search.skipped or any(s.result.interrupted for s in search.solved) or interrupted():
        return out(True)
    return out()


def _lengths(traffic) -> dict:
    """The prompt lengths and prefix-cache share a plan's traffic fixes (study_traffic's options)."""
    if traffic is None:
        return {}
    return {k: v for k, v in (("prompt_tokens", traffic.prompt_tokens), ("cached_share", traffic.cached_share),
                              ("replay", traffic.replay)) if v is not None}


def solution_path(model_name: str, hardware_name: str, mode: str) -> str:
    """Where ``placer solve`` writes a mapping unless told otherwise."""
    return f"solutions/{model_name}__{hardware_name}__{mode}.json"


def node_ranges(instance: Instance, nodes) -> str:
    """Node indices as runs of names: ``layers.0-2, layers.5``; refined nodes as ``a..b``."""
    nodes = sorted(nodes)
    runs: list[tuple[int, int]] = []
    for i in nodes:
        if runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    parts = []
    for lo, hi in runs:
        a, b = instance.nodes[lo], instance.nodes[hi]
        if lo == hi:
            parts.append(a.name)
        elif a.name == f"layers.{a.index}" and b.name == f"layers.{b.index}":
            parts.append(f"layers.{a.index}-{b.index}")
        else:
            parts.append(f"{a.name}..{b.name}")
    return ", ".join(parts)
