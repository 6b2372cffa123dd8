"""Independent solves in parallel processes give what one process gives: a GPU solve's layouts
(search_layouts with SolverSettings.jobs) and a frontier's placements and points (jobs=)."""

from __future__ import annotations

import pytest
from frontier_toys import FAST, MODEL, SLOW

from placer import load_fleet, load_model, workload_for
from placer.planning import Requirements, SolverSettings, search_layouts
from placer.planning.studies.frontier import FrontierGrid, speed_frontier
from placer.simulate.steady import STATED_ERROR
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload


def _layouts(search):
    return [(s.instance.tp, s.instance.ep, s.result.status, s.result.devices_used, s.result.concurrency_ceiling,
             s.result.hop_latency_us, s.result.proven_optimal, tuple(s.per_group.assignment or ()),
             tuple((lv.name, lv.value, lv.bound, lv.proven) for lv in s.result.levels))
            for s in search.solved]


def test_a_gpu_solve_gives_the_same_layouts_and_proofs_in_processes():
    model = load_model("llama-3.1-8b")
    fleet = load_fleet("h100")
    wl = workload_for(model, context="8k", concurrency=32)
    seen = []

    def before(tp, ep):
        seen.append(("before", tp, ep))

    def after(tp, ep, solved):
        seen.append(("after", tp, ep))

    one = search_layouts(model, fleet, wl, Requirements(), SolverSettings(time_limit=60, threads=1))
    many = search_layouts(model, fleet, wl, Requirements(), SolverSettings(time_limit=60, threads=1, jobs=2),
                          before=before, after=after)
    assert len(one.solved) > 1
    assert _layouts(one) == _layouts(many)
    assert one.best.instance.tp == many.best.instance.tp and one.proven == many.proven
    assert [x for x in seen if x[0] == "after"] == [("after", s.instance.tp, s.instance.ep) for s in many.solved]


def test_jobs_must_be_positive():
    with pytest.raises(InvalidSpec, match="jobs"):
        SolverSettings(jobs=0)


def test_a_frontier_in_processes_gives_the_rows_of_one_process():
    model = model_from_dict(MODEL)
    fleets = [fleet_from_dict(FAST), fleet_from_dict(SLOW)]
    grid = FrontierGrid(speeds=(20_000, 2_000), output_tokens=8)
    runs = [speed_frontier(model, fleets, Workload(context_tokens=1000), Requirements(), SolverSettings(method="dp"),
                           grid, jobs=jobs) for jobs in (1, 2)]
    assert runs[0].rows == runs[1].rows and runs[0].notes == runs[1].notes
    assert runs[0].sentences == runs[1].sentences
    assert {r["sim"] for r in runs[0].rows} == {"steady"}


def test_a_frontier_by_the_event_run_matches_the_fast_path():
    model = model_from_dict(MODEL)
    fleets = [fleet_from_dict(FAST), fleet_from_dict(SLOW)]
    reps = {how: speed_frontier(model, fleets, Workload(context_tokens=1000), Requirements(),
                                SolverSettings(method="dp"), FrontierGrid(speeds=(20_000, 2_000), output_tokens=8,
                                                                          sim=how), jobs=1)
            for how in ("fast", "exact")}
    assert {r["sim"] for r in reps["exact"].rows} == {"event"}
    for f, e in zip(reps["fast"].rows, reps["exact"].rows):
        assert (f["platform"], f["devices"], f["live_per_replica"]) == (e["platform"], e["devices"], e["live_per_replica"])
        assert f["per_user_tokens_per_s"] == pytest.approx(e["per_user_tokens_per_s"],
                                                           rel=STATED_ERROR["per_user_tokens_per_s"])
        assert f["tokens_per_s_per_mw"] == pytest.approx(e["tokens_per_s_per_mw"], rel=STATED_ERROR["aggregate_tokens_per_s"])
    with pytest.raises(InvalidSpec, match="sim"):
        FrontierGrid(sim="quick")
