"""Speed frontiers with the serving of today: disaggregated points (each the plan
:func:`placer.plan` makes for the most requests/s at that TPOT, re-derived here), every point
simulated with the speculation it is planned for, and a prefix-cache hit shortening the prefill
pool's prompts by exactly the closed form's chunks."""

from __future__ import annotations

import pytest
from disagg_toys import GPUS, MODEL, WAFERS

from placer.mapping.validate import validate_mapping
from placer.planning import Placement, Pools, Requirements, SolverSettings, SpecDecoding, Targets, plan
from placer.planning.studies.frontier import FrontierGrid, compare_at_speeds, speed_frontier
from placer.simulate import Serving, Traffic, segments_of, simulate
from placer.simulate.prefill import prompt_time_us
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import workload_for

ISL, OSL = 2000, 200
TTFT_MS = 200.0
FLOOR = 500.0


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    d = tmp_path_factory.mktemp("frontier_serving")
    for name, text in (("model.yaml", MODEL), ("wafers.yaml", WAFERS), ("gpus.yaml", GPUS)):
        (d / name).write_text(text)
    return d


@pytest.fixture(scope="module")
def disagg_report(specs):
    m = load_model(specs / "model.yaml")
    wafers, gpus = load_fleet(specs / "wafers.yaml"), load_fleet(specs / "gpus.yaml")
    wl = workload_for(m, context=ISL + OSL)
    grid = FrontierGrid(speeds=(FLOOR,), output_tokens=OSL, max_ttft_ms=TTFT_MS, disagg=True, prefill_fleet=gpus)
    rep = speed_frontier(m, [wafers], wl, Requirements(), SolverSettings(method="dp", time_limit=10), grid, jobs=1)
    return m, wafers, gpus, wl, rep


@pytest.mark.slow
def test_disaggregated_points_are_the_plans_plan_makes(disagg_report):
    m, wafers, gpus, wl, rep = disagg_report
    assert rep.platforms == ["pdwafers", "pdwafers disagg", "pdwafers decode + pdgpus prefill"]
    for label, prefill in (("pdwafers disagg", None), ("pdwafers decode + pdgpus prefill", gpus)):
        (row,) = [r for r in rep.rows if r["platform"] == label]
        # the plan for the mean target the point was made for (the TTFT target, or tighter when the
        # simulated p99 missed it)
        assert row["ttft_budget_ms"] <= TTFT_MS
        req = Requirements(targets=Targets(min_user_tps=FLOOR, max_ttft_ms=row["ttft_budget_ms"]),
                           pools=Pools(maximize_rate=True, prefill_fleet=prefill, prompt_tokens=ISL,
                                       decode_tokens=OSL))
        p = plan(m, wafers, wl, req, SolverSettings(method="dp", time_limit=10))
        c = p.pools.chosen
        assert row["serving"] == "disaggregated" and row["valid"] and row["meets_ttft"]
        assert row["ttft_p99_us"] <= TTFT_MS * 1e3
        assert validate_mapping(p.mapping, model=m) == []
        assert row["devices"] == c.x * c.prefill.devices + c.y * c.decode.devices
        assert row["rate_per_s"] == pytest.approx(c.rate, rel=1e-12)
        assert row["aggregate_tokens_per_s"] == pytest.approx(c.rate * OSL, rel=1e-12)
        assert row["power_w"] == pytest.approx(c.x * c.prefill.power_w + c.y * c.decode.power_w, rel=1e-12)
        assert row["tokens_per_s_per_mw"] == pytest.approx(c.rate * OSL / row["power_w"] * 1e6, rel=1e-12)
        assert row["per_user_tokens_per_s"] == pytest.approx(1e6 / c.tpot_us, rel=1e-12)
        assert row["per_user_tokens_per_s"] >= FLOOR
        assert row["ttft_model_us"] == pytest.approx(c.ttft_us, rel=1e-12)
        assert row["ttft_model_us"] <= TTFT_MS * 1e3
        assert row["ttft_p99_us"] == pytest.approx(p.pools.prefill_sim.ttft_p99_us + c.transfer_us, rel=1e-12)
        assert row["proven"] == p.pools.proven


@pytest.mark.slow
def test_the_comparison_ranks_aggregated_and_disaggregated_points_together(disagg_report):
    *_, rep = disagg_report
    best = {}
    for r in rep.rows:
        if r["valid"] and r["meets_ttft"] and r["per_user_tokens_per_s"] >= FLOOR:
            best[r["platform"]] = max(best.get(r["platform"], 0.0), r["tokens_per_s_per_mw"])
    order = sorted(best, key=lambda k: -best[k])
    (sentence,) = compare_at_speeds(rep, (FLOOR,))
    assert sentence.startswith(f"At {FLOOR:,.0f} tokens/s per user, {order[0]} is ahead with "
                               f"{best[order[0]]:,.0f} tokens/s per MW")
    assert f"{best[order[0]] / best[order[1]]:.2f}x {order[1]}" in sentence


def test_disaggregated_points_need_a_ttft_target(specs):
    m = load_model(specs / "model.yaml")
    with pytest.raises(InvalidSpec, match="max_ttft_ms"):
        FrontierGrid(speeds=(FLOOR,), disagg=True)
    with pytest.raises(InvalidSpec, match="prefill_hardware"):
        FrontierGrid(speeds=(FLOOR,), prefill_fleet=load_fleet(specs / "gpus.yaml"))
    with pytest.raises(InvalidSpec, match="sweeps the loads"):      # the floors are the frontier's own
        speed_frontier(m, [load_fleet(specs / "wafers.yaml")], workload_for(m, context=ISL + OSL),
                       Requirements(targets=Targets(min_user_tps=FLOOR)), SolverSettings(), jobs=1)


DRAFT = """\
name: toy-draft
layers:
  - {kind: attention, params: 20000000, kv_bytes_per_token: 4096}
  - {kind: lm_head, weight_bytes: 40000000}
"""
TARGET = MODEL + "  - {kind: lm_head, weight_bytes: 200000000}\n"


def test_every_frontier_point_is_simulated_with_its_speculation(specs, tmp_path):
    (tmp_path / "draft.yaml").write_text(DRAFT)
    (tmp_path / "target.yaml").write_text(TARGET)
    m = load_model(tmp_path / "target.yaml")
    gpus = load_fleet(specs / "gpus.yaml")
    wl = workload_for(m, context=1024)
    req = Requirements(speculation=SpecDecoding(tokens=3, method="eagle3",
                                                draft_model=load_model(tmp_path / "draft.yaml"), accept=2.5))
    rep = speed_frontier(m, [gpus], wl, req, SolverSettings(method="dp", time_limit=10),
                         FrontierGrid(output_tokens=16, max_target=2), jobs=1)
    assert rep.rows
    from placer.planning.solve import build_instance

    for r in rep.rows:
        assert (r["spec_tokens"], r["spec_accept"]) == (3, 2.5)
        inst = build_instance(m, gpus, wl, req, tp=r["tp"], ep=r["ep"]).with_concurrency(r["target"])
        route = [inst.device_index[d] for d in r["route"].split()]
        assert {inst.nodes[i].name for i, d in enumerate(route) if d == route[-1]} >= {"draft.layers.0",
                                                                                        "draft.lm_head", "lm_head"}
        live = r["live_per_replica"]
        sim = simulate(inst, route, Traffic(requests=live, max_live=live, output_tokens=16),
                       Serving(spec_k=3, spec_accept=2.5))
        assert r["per_user_tokens_per_s"] == pytest.approx(sim.per_user_tokens_per_s, rel=1e-12)
        plain = simulate(inst, route, Traffic(requests=live, max_live=live, output_tokens=16),
                         Serving(spec_k=0))
        assert plain.per_user_tokens_per_s != pytest.approx(sim.per_user_tokens_per_s, rel=1e-6)
    with pytest.raises(InvalidSpec, match="spec_accept"):      # nothing published for this toy
        draft = load_model(tmp_path / "draft.yaml")
        speed_frontier(m, [gpus], wl,
                       Requirements(speculation=SpecDecoding(tokens=3, method="eagle3", draft_model=draft)),
                       SolverSettings(method="dp"), FrontierGrid(max_target=1), jobs=1)


def test_a_cached_prefix_shortens_the_prefill_pool_by_the_closed_form(specs):
    m = load_model(specs / "model.yaml")
    wafers, gpus = load_fleet(specs / "wafers.yaml"), load_fleet(specs / "gpus.yaml")
    wl = workload_for(m, context=ISL)
    pools = Pools(prefill_fleet=gpus, rate=20.0, decode_tokens=OSL)
    targets = Targets(max_ttft_ms=TTFT_MS, max_itl_ms=2.0)
    cold = plan(m, wafers, wl, Requirements(targets=targets, pools=pools), SolverSettings(time_limit=10)).pools
    warm = plan(m, wafers, wl, Requirements(targets=targets.replace(cached_prompt_tokens=1500), pools=pools),
                SolverSettings(time_limit=10)).pools
    for pools, cached in ((cold, 0), (warm, 1500)):
        for shape in pools.prefill_shapes:
            segs = segments_of(shape.solved.instance, shape.solved.per_group.assignment)
            assert shape.prefill_us == pytest.approx(prompt_time_us(segs, ISL, pools.budget_tokens, cached), rel=1e-12)
    assert warm.chosen.prefill.prefill_us < cold.chosen.prefill.prefill_us
    assert warm.transfer_bytes == cold.transfer_bytes       # the whole prompt's KV still moves to decode
    assert warm.mapping is not None


def test_compare_disagg_places_each_pool_by_every_pipeline_method(specs, run_cli, tmp_path):
    """``placer compare --disagg``: the exact methods meet the plan's own pools (the DP and CP-SAT
    give each pool's proven count, the heuristics at least as many) and the plan totals follow
    from the plan's replica counts (an independent plan() call)."""
    import json

    from disagg_toys import MIXED

    (tmp_path / "mixed.yaml").write_text(MIXED)
    args = ["compare", specs / "model.yaml", "-H", tmp_path / "mixed.yaml", "--context", ISL, "--disagg",
            "--prefill-hardware", "pgpu", "--rate", 80, "--max-ttft-ms", 100, "--max-itl-ms", 5, "--isl", ISL, "--osl", OSL,
            "--time-limit", 10, "-q"]
    code, text, err = run_cli([*args, "--json"])
    assert code == 0, err
    doc = json.loads(text)
    m = load_model(specs / "model.yaml")
    p = plan(m, load_fleet(tmp_path / "mixed.yaml"), workload_for(m, context=ISL),
             Requirements(targets=Targets(max_ttft_ms=100.0, max_itl_ms=5.0),
                          pools=Pools(prefill_fleet="pgpu", rate=80.0,
                                      decode_tokens=OSL)), SolverSettings(time_limit=10))
    c = p.pools.chosen
    per = {"prefill": (c.prefill.devices, c.x), "decode": (p.pools.decode_solved.result.devices_used, c.y)}
    rows = doc["pools"]
    assert {(r["pool"], r["method"]) for r in rows} == {(pool, m_) for pool in per for m_ in
                                                         ("greedy", "pathwalk", "dp", "cpsat")}
    for r in rows:
        devices, replicas = per[r["pool"]]
        assert r["replicas"] == replicas
        if r["method"] in ("dp", "cpsat"):
            assert r["devices_per_replica"] == devices and r["devices_proven"]
            assert r["plan_devices"] == p.devices
        else:
            assert r["devices_per_replica"] >= devices
    code, text, err = run_cli(args)
    assert code == 0 and "plan total" in text and "decode" in text, err
    code, _text, err = run_cli(["compare", specs / "model.yaml", "-H", tmp_path / "mixed.yaml", "--max-itl-ms", 5])
    assert code == 2 and "--disagg" in err


def test_pools_of_device_groups_on_one_fleet_use_disjoint_devices(specs):
    """Both pools at tp 2 on one fleet: each solve alone starts at the first group, so the decode
    replica is re-placed apart from the prefill replica's devices (members of its groups, not the
    groups' names), and the two-pool mapping validates."""
    from placer.planning.disagg import _devices_used

    m = load_model("llama-3.1-8b")
    gpus = load_fleet(specs / "gpus.yaml")
    req = Requirements(placement=Placement(degrees=(2,)),
                       targets=Targets(max_ttft_ms=2000.0, max_itl_ms=50.0), pools=Pools(rate=1.0,
                                                                                         decode_tokens=OSL))
    p = plan(m, gpus, workload_for(m, context=ISL), req, SolverSettings(time_limit=10))
    c = p.pools.chosen
    assert c is not None and c.prefill.solved.instance.tp == 2 == p.pools.decode_solved.instance.tp
    pre, dec = _devices_used(c.prefill.solved), _devices_used(p.pools.decode_solved)
    assert len(pre) == 2 * len(set(c.prefill.solved.per_group.assignment)) and pre.isdisjoint(dec)
    assert not pre.isdisjoint(_devices_used(c.decode.solved))      # the decode shape alone overlapped
    assert validate_mapping(p.mapping, model=m) == []


def test_a_drafters_kv_moves_with_the_prompt(specs, tmp_path):
    """With a draft model placed in both pools, a prompt's transfer is the target's KV and the
    drafter's: 4 layers x 65,536 B + 4,096 B of the draft layer, per prompt token, by hand."""
    (tmp_path / "draft.yaml").write_text(DRAFT)
    (tmp_path / "target.yaml").write_text(TARGET)
    m = load_model(tmp_path / "target.yaml")
    req = Requirements(targets=Targets(max_ttft_ms=TTFT_MS, max_itl_ms=5.0), speculation=SpecDecoding(tokens=3, method="eagle3", draft_model=load_model(tmp_path / "draft.yaml"), accept=2.5), pools=Pools(prefill_fleet=load_fleet(specs / "gpus.yaml"), rate=5.0, decode_tokens=OSL))
    p = plan(m, load_fleet(specs / "wafers.yaml"), workload_for(m, context=ISL), req, SolverSettings(time_limit=10))
    assert p.pools.transfer_bytes == (4 * 65_536 + 4_096) * ISL
    assert validate_mapping(p.mapping, model=m) == []


@pytest.mark.slow
def test_frontier_command_resizes_the_prefill_fleet(specs, run_cli):
    import json

    args = ["frontier", specs / "model.yaml", "-H", specs / "wafers.yaml", "--context", ISL + OSL, "--speeds", FLOOR,
            "--output-tokens", OSL, "--max-ttft-ms", TTFT_MS, "--method", "dp", "--jobs", 1, "--time-limit", 10,
            "--disagg", "--prefill-hardware", specs / "gpus.yaml", "-q", "--json"]
    code, out, err = run_cli([*args, "--prefill-racks", 4])
    assert code == 0, err
    (row,) = [r for r in json.loads(out)["rows"] if r["platform"] == "pdwafers decode + pdgpus prefill"]
    m = load_model(specs / "model.yaml")
    req = Requirements(targets=Targets(min_user_tps=FLOOR, max_ttft_ms=row["ttft_budget_ms"], output_tokens=OSL),
                       pools=Pools(maximize_rate=True, prefill_fleet=load_fleet(specs / "gpus.yaml", racks=4),
                                   prompt_tokens=ISL, decode_tokens=OSL))
    p = plan(m, load_fleet(specs / "wafers.yaml"), workload_for(m, context=ISL + OSL), req,
             SolverSettings(method="dp", time_limit=10))
    assert row["devices"] == p.pools.chosen.devices and row["rate_per_s"] == pytest.approx(p.pools.chosen.rate)
    small = plan(m, load_fleet(specs / "wafers.yaml"), workload_for(m, context=ISL + OSL),
                 req.replace(pools=req.pools.replace(prefill_fleet=load_fleet(specs / "gpus.yaml"))),
                 SolverSettings(method="dp", time_limit=10))
    assert small.pools.chosen.rate < p.pools.chosen.rate      # the 2-rack spec as written holds fewer prefill replicas
    code, _out, err = run_cli(["frontier", specs / "model.yaml", "-H", specs / "wafers.yaml", "--prefill-racks", 4])
    assert code == 2 and "--prefill-hardware" in err


def test_a_disaggregated_point_meets_the_ttft_by_its_simulated_p99(specs):
    """The plan made for the mean TTFT target misses it by the simulated p99 of its prefill replica;
    the frontier's point is the plan re-made for a tighter mean target, whose p99 meets it."""
    from placer.planning.studies.frontier_disagg import _plan_for_p99, _simulated_p99

    m = load_model(specs / "model.yaml")
    wafers, gpus = load_fleet(specs / "wafers.yaml"), load_fleet(specs / "gpus.yaml", racks=4)
    wl = workload_for(m, context=ISL + OSL)
    req = Requirements(targets=Targets(min_user_tps=FLOOR, max_ttft_ms=TTFT_MS),
                       pools=Pools(maximize_rate=True, prefill_fleet=gpus, prompt_tokens=ISL,
                                   decode_tokens=OSL))
    solver = SolverSettings(method="dp", time_limit=10)
    first = plan(m, wafers, wl, req, solver).pools
    assert _simulated_p99(first, first.chosen) > TTFT_MS * 1e3
    dp, budget = _plan_for_p99(m, wafers, wl, req, solver, TTFT_MS)
    assert budget < TTFT_MS and _simulated_p99(dp, dp.chosen) <= TTFT_MS * 1e3
    # a tighter TTFT costs requests/s or prefill replicas, never gains either
    assert dp.chosen.rate <= first.chosen.rate and dp.chosen.x >= first.chosen.x
    assert (dp.chosen.rate, -dp.chosen.x) != (first.chosen.rate, -first.chosen.x)
