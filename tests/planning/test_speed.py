"""Speed floors in planning: every plan re-checked by an independent simulation of its mapping,
and one device fewer breaks the plan or lowers the live requests it holds at the floor."""

from __future__ import annotations

import json

import pytest

from placer import load_fleet, load_model, workload_for
from placer.planning import Placement, Requirements, SolverSettings, Targets, build_instance, place_instance
from placer.planning.speed import floor_from, layouts, speed_search
from placer.simulate import simulate_mapping
from placer.specs.errors import InvalidSpec

# The simulation is a closed loop with chunked prefill: every user's 16 generated tokens share their
# steps with the other users' 8k-token prompts, so the floors are those such a load reaches.
CASES = [  # model, fleet, context, planned live requests, floor (tokens/s per user), degrees (None: default)
    ("llama-3.1-70b", "h200", "8k", 64, 1.0, [1]),
    ("llama-3.1-8b", "h100", "8k", 300, 3.0, [1]),
    ("llama-3.1-70b", "h200", "8k", 64, 1.0, None),
    ("llama-3.1-8b", "h100", "8k", 300, 3.0, None),
]


def _plan(name, hw, ctx, live, floor, fleet=None, degrees=None):
    model = load_model(name)
    fleet = fleet or load_fleet(hw)
    req = Requirements(Placement(degrees=degrees), Targets(min_user_tps=floor))
    return speed_search(model, fleet, workload_for(model, context=ctx, concurrency=live), req,
                        SolverSettings(method="dp")), fleet


def _sim(doc, live):
    return simulate_mapping(doc, requests=live, max_live=live, output_tokens=16).per_user_tokens_per_s


@pytest.mark.slow
@pytest.mark.parametrize("name, hw, ctx, live, floor, degrees", CASES)
def test_plan_meets_the_floor_and_a_device_fewer_does_not(name, hw, ctx, live, floor, degrees):
    plan, fleet = _plan(name, hw, ctx, live, floor, degrees=degrees)
    c = plan.chosen
    assert plan.feasible and c is not None
    assert c.replicas * c.load >= live and c.held >= live
    # re-check: the mapping document, simulated afresh at the load one replica serves
    doc = c.shape.mapping()
    assert {s.get("group", {}).get("tp", 1) for s in doc["stages"]} == {c.shape.tp}
    assert doc["summary"]["devices_used"] == c.shape.devices == len(doc["stages"]) * c.shape.tp
    assert c.replicas * c.shape.devices <= len(fleet.available)
    assert _sim(doc, c.load) >= floor
    assert _sim(doc, c.load) == pytest.approx(c.sim.per_user_tokens_per_s, rel=1e-9)
    # at the concurrency it claims to hold per replica, and one more falls below the floor (or does not fit)
    held = c.shape.held
    assert _sim(doc, held) >= floor
    if held < doc["summary"]["concurrency_ceiling"]:
        assert _sim(doc, held + 1) < floor
    # the same search with one device fewer in the fleet: no plan, or fewer live requests held
    keep = c.devices - 1
    ids = [d.id for d in fleet.available]
    smaller = fleet.without(ids[keep:])
    assert len(smaller.available) == keep
    fewer, _ = _plan(name, hw, ctx, live, floor, fleet=smaller, degrees=degrees)
    assert not fewer.feasible
    most = max(s.held * (s.available_groups // s.groups) for s in fewer.shapes)
    assert most < live and "not for" in fewer.message
    # one degree lower, for the same per-replica target: the placement holds fewer live requests at
    # the floor (its own ceiling is lower, or the simulated speed at the chosen load misses the floor)
    lower = [g for g, _ in layouts(load_model(name), fleet, degrees)[0] if g < c.shape.tp]
    if lower:
        model = load_model(name)
        solved = place_instance(build_instance(model, fleet, workload_for(model, context=ctx, concurrency=c.shape.target), Requirements(), method="dp", tp=max(lower)), SolverSettings(method="dp"))
        step = solved.mapping
        assert step["summary"]["concurrency_ceiling"] < held or _sim(step, held) < floor


def test_layouts_of_dense_and_moe_models():
    h200 = load_fleet("h200")
    assert layouts(load_model("llama-3.1-70b"), h200) == ([(1, False), (2, False), (4, False), (8, False)], {})
    # an MoE model: every degree tensor-split, and above 1 with experts spread whole
    found, _ = layouts(load_model("qwen3-235b"), h200)
    assert (8, True) in found and (8, False) in found and (1, True) not in found
    assert layouts(load_model("qwen3-235b"), h200, ep=True)[0] == [(1, False), (2, True), (4, True), (8, True)]
    found, refused = layouts(load_model("llama-3.1-70b"), h200, degrees=[1, 3, 16])
    assert found == [(1, False)] and "tp 3" in refused and "tp 16" in refused
    # wafers: a stage is one device
    found, refused = layouts(load_model("llama-3.1-70b"), load_fleet("wse-3t"), degrees=[1, 2])
    assert found == [(1, False)] and "no GPU fleet" in refused["tp 2"]


def test_a_floor_out_of_reach_names_the_fastest_placement():
    plan, _ = _plan("llama-3.1-70b", "h200", "8k", 8, 500.0)
    assert {s.tp for s in plan.shapes} == {1, 2, 4, 8}
    assert not plan.feasible and plan.fastest is not None
    assert "cannot be met" in plan.message and f"{plan.fastest.alone_tokens_per_s:,.1f}" in plan.message
    # the closed-form single-request speed bounds every simulated one of that shape
    doc = plan.fastest.mapping()
    assert simulate_mapping(doc, requests=1, output_tokens=16).per_user_tokens_per_s <= \
        plan.fastest.alone_tokens_per_s * (1 + 1e-9)


@pytest.mark.slow
def test_objectives_pick_their_candidate():
    plans = {o: speed_search(load_model("llama-3.1-70b"), load_fleet("h200"),
                             workload_for(load_model("llama-3.1-70b"), context="8k", concurrency=64),
                             Requirements(targets=Targets(min_user_tps=1.0, speed_objective=o)),
                             SolverSettings(method="dp")) for o in ("devices", "tokens-per-mw")}
    cands = plans["devices"].candidates
    assert plans["devices"].chosen.devices == min(x.devices for x in cands)
    assert plans["tokens-per-mw"].chosen.tokens_per_s_per_mw == max(x.tokens_per_s_per_mw for x in cands)


def test_floor_arguments():
    assert floor_from(max_itl_ms=4.0) == 250.0 and floor_from(min_user_tps=100) == 100.0
    for kw, field in [(dict(), "min_user_tps"), (dict(min_user_tps=1, max_itl_ms=1), "min_user_tps"),
                      (dict(min_user_tps=0), "min_user_tps"), (dict(max_itl_ms=-1), "max_itl_ms")]:
        with pytest.raises(InvalidSpec, match=field):
            floor_from(**kw)


@pytest.mark.slow
def test_solve_command_with_a_floor(run_cli, tmp_path):
    plan, _ = _plan("llama-3.1-70b", "h200", "8k", 64, 1.0)
    out = tmp_path / "plan.json"
    # the library's default output length (16 tokens), the prompt the rest of the 8k context
    code, text, err = run_cli(["solve", "llama-3.1-70b", "-H", "h200", "--concurrency", 64, "--max-itl-ms", 1000,
                               "--osl", 16, "--method", "dp", "-o", out])
    assert code == 0, err
    assert plan.message in text and f"holds {plan.chosen.held} live requests at the floor" in text
    assert json.loads(out.read_text())["summary"]["devices_used"] == plan.chosen.shape.devices
    code, text, err = run_cli(["solve", "llama-3.1-70b", "-H", "h200", "--concurrency", 8, "--min-user-tps", 500,
                               "--method", "dp", "--json"])
    assert code == 1
    assert json.loads(text)["speed_target"]["feasible"] is False


@pytest.mark.slow
def test_solve_command_with_a_floor_degrees_experts_and_a_reserve(run_cli, tmp_path):
    """--tp, --ep and --reserve apply to the speed search: every shape is an expert-parallel
    layout of the degrees asked for, and the mapping written keeps the reserve on every device."""
    out = tmp_path / "plan.json"
    args = ["solve", "qwen3-235b", "-H", "h200", "--context", "8k", "--concurrency", 32, "--min-user-tps", 1,
            "--tp", "4,8", "--ep", "--reserve", "0.2", "--method", "dp", "-o", out]
    code, text, err = run_cli(args)
    assert code == 0, err
    assert "runtime reserve 0.2 of memory per device (--reserve)" in text and "of tp 4 ep, tp 8 ep)" in text
    doc = json.loads(out.read_text())
    tps = {s["group"]["tp"] for s in doc["stages"]}
    assert len(tps) == 1 and tps <= {4, 8}
    assert all(s["group"]["ep"] == s["group"]["tp"] for s in doc["stages"])      # experts spread whole
    memory = load_fleet("h200").available[0].memory_bytes
    assert all(s["bytes"]["reserve"] == -(-memory // 5) for s in doc["stages"])
    code, text, err = run_cli(args[:-2] + ["--json"])
    assert code == 0, err
    chosen = json.loads(text)["speed_target"]["chosen"]
    assert chosen["ep"] is True and chosen["tp"] in (4, 8)
    assert _sim(doc, chosen["load_per_replica"]) >= 1


def test_solve_floor_simulates_the_output_length_asked(run_cli, tmp_path):
    """--output-tokens reaches the speed floor's simulations: the mapping's serving figures are those
    of a run of that many tokens per request (an independent simulation at the held load)."""
    from placer.mapping import instance_from_mapping
    from placer.simulate import Traffic, simulate

    out = tmp_path / "p.json"
    args = ["solve", "llama-3.1-8b", "-H", "h100", "--concurrency", 4, "--context", 2048, "--min-user-tps", 10,
            "--tp", 1, "--method", "dp", "-q", "-o", out]
    code, _text, err = run_cli([*args, "--output-tokens", 64])
    assert code == 0, err
    doc = json.loads(out.read_text())
    serving = doc["serving"]
    assert serving["output_tokens"] == 64
    _m, _f, _w, inst = instance_from_mapping(doc)
    live = serving["live_per_replica"]
    sim = simulate(inst, [inst.device_index[d] for d in doc["route"]],
                   Traffic(requests=live, max_live=live, output_tokens=64))
    assert serving["per_user_tokens_per_s"] == pytest.approx(sim.per_user_tokens_per_s, rel=1e-9)
    # without a floor the output length is the traffic the mapping records (--output-tokens: --osl's older name)
    bare = tmp_path / "bare.json"
    code, _text, err = run_cli(["solve", "llama-3.1-8b", "-H", "h100", "--output-tokens", 64, "-q", "-o", bare])
    assert code == 0, err
    assert json.loads(bare.read_text())["traffic"]["osl"] == 64
