"""Independent solves in parallel processes or Ray tasks give what one process gives: a GPU solve's
layouts (search_layouts with SolverSettings.jobs or backend="ray") and a frontier's placements and
points (jobs=; backend="ray" in test_frontier)."""

from __future__ import annotations

import pytest
from frontier_toys import FAST, MODEL, SLOW

from placer import load_fleet, load_model, workload_for
from placer.planning import Placement, Requirements, SolverSettings, search_layouts
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


@pytest.mark.ray
def test_a_gpu_solve_gives_the_same_layouts_and_proofs_as_ray_tasks(local_ray):
    model = load_model("llama-3.1-8b")
    fleet = load_fleet("h100")
    wl = workload_for(model, context="8k", concurrency=32)
    after = []
    one = search_layouts(model, fleet, wl, Requirements(), SolverSettings(time_limit=60, threads=1))
    tasks = search_layouts(model, fleet, wl, Requirements(), SolverSettings(time_limit=60, threads=1, backend="ray"),
                           after=lambda tp, ep, solved: after.append(tp))
    assert len(one.solved) == 4 and one.proven
    assert _layouts(one) == _layouts(tasks) and tasks.proven
    assert after == [s.instance.tp for s in tasks.solved] == [1, 2, 4, 8]     # in the layouts' order
    assert local_ray.is_initialized()         # joined the running instance and left it up


@pytest.mark.ray
def test_wide_ep_and_attention_dp_layouts_as_ray_tasks_keep_their_proofs(local_ray):
    model = load_model("deepseek-v3")
    fleet = load_fleet("h100", racks=2)
    wl = workload_for(model, context="8k", concurrency=32)
    req = Requirements(placement=Placement(attention_dp=True, degrees=(8, 16)))
    one = search_layouts(model, fleet, wl, req, SolverSettings(time_limit=60, threads=1))
    tasks = search_layouts(model, fleet, wl, req, SolverSettings(time_limit=60, threads=1, backend="ray"))
    assert [s.instance.tp for s in one.solved] == [8, 16] and one.proven
    assert _layouts(one) == _layouts(tasks) and tasks.proven


def test_ray_missing_is_said_by_the_solver_settings_naming_the_extra(no_ray):
    with pytest.raises(InvalidSpec, match=r"Ray is not installed; install the extra with pip install 'placer\[ray\]'"):
        SolverSettings(backend="ray")
    with pytest.raises(InvalidSpec, match="unknown backend 'slurm'"):
        SolverSettings(backend="slurm")


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
