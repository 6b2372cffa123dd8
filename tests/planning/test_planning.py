"""placer.plan(): one entry point, typed requirements that reach every path, one home for defaults,
and the old import paths kept for a release."""

from __future__ import annotations

import importlib
import json
import sys

import pytest

from placer import (
    Placement,
    Requirements,
    SolverSettings,
    Targets,
    load_fleet,
    load_model,
    plan,
    workload_for,
)
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

# L L A L L on devices of 950 B at 16 tokens of context and one live request: linear-attention layers
# of 400 B + 1 B of state, an attention layer of 100 B + 16 x 1 B of KV. Every 2-device contiguous
# plan (LLA|LL or LL|ALL: 918 + 802 B) leaves a stage without the one attention layer; with
# attention-per-stage the only plan is one stage of 1,720 B, which no device holds: the requirement
# turns 2 devices into no placement.
LINEAR = {"kind": "linear_attention", "weight_bytes": 400, "state_bytes_per_request": 1}
HYBRID = {"name": "hybrid-5", "layers": [
    LINEAR, LINEAR, {"kind": "attention", "weight_bytes": 100, "kv_bytes_per_token": 1}, LINEAR, LINEAR]}
NEED = [401, 401, 116, 401, 401]      # bytes per layer at the workload below, by hand
WAFERS = {"name": "toy-wafers", "device": {"memory": 950, "memory_bandwidth": "1 TB/s", "power": "1 kW"},
          "fleet": {"racks": 1, "per_rack": 4, "intra_rack_latency_us": 1, "inter_rack_latency_us": 2}}


def _specs():
    return model_from_dict(HYBRID), fleet_from_dict(WAFERS), Workload(context_tokens=16, concurrency=1)


def test_attention_per_stage_by_brute_force():
    """The spec's claim, by enumeration: every 2-stage cut leaves a stage without attention."""
    from placer.problem.instance import make_instance

    m, fleet, wl = _specs()
    assert list(make_instance(m, fleet, wl).demand_bytes) == NEED
    kinds = [x["kind"] for x in HYBRID["layers"]]
    fits = [k for k in range(1, 5) if sum(NEED[:k]) <= 950 and sum(NEED[k:]) <= 950]
    assert fits == [2, 3]
    assert all("attention" not in kinds[:k] or "attention" not in kinds[k:] for k in fits)
    assert sum(NEED) > 950


@pytest.mark.parametrize("floor", [None, 1.0])
def test_the_requirement_reaches_the_solve_and_the_speed_floor(floor):
    m, fleet, wl = _specs()
    free = plan(m, fleet, wl, Requirements(targets=Targets(min_user_tps=floor)),
                SolverSettings(time_limit=5, threads=1))
    assert free.feasible and free.devices == 2
    bound = plan(m, fleet, wl,
                 Requirements(placement=Placement(constraints=("attention-per-stage",)),
                              targets=Targets(min_user_tps=floor)),
                 SolverSettings(time_limit=5, threads=1))
    assert not bound.feasible and bound.devices is None
    assert (bound.speed is not None) == bool(floor)      # the speed floor's plan, else the degree search's


def test_the_requirement_reaches_the_speed_floor_through_the_command_line(run_cli, tmp_path):
    (tmp_path / "m.json").write_text(json.dumps(HYBRID))
    (tmp_path / "h.json").write_text(json.dumps(WAFERS))
    args = ["solve", tmp_path / "m.json", "-H", tmp_path / "h.json", "--context", "16", "--concurrency", "1",
            "--min-user-tps", "1", "--time-limit", "5", "-q"]
    code, out, _ = run_cli(args)
    assert code == 0 and "devices 2 (1 x 2" in out
    code, out, err = run_cli(args + ["--require", "attention-per-stage"])
    assert code == 1 and "no placement of the model fits the fleet" in out
    assert "target" not in err        # -q: no candidate lines


def test_plan_is_the_solve_commands_answer():
    model = load_model("kimi-k3")
    p = plan(model, load_fleet("wse-3t"), workload_for(model), Requirements(placement=Placement(mode="contiguous")),
             SolverSettings(time_limit=20))
    # (K K | K | M) x 23 + M: 70 wafers, proven (README's worked example)
    assert p.speed is None and p.pools is None and not p.per_stage      # the degree search's plan
    assert p.devices == 70 and p.result.proven_optimal and p.devices_proven
    assert p.mapping["summary"]["devices_used"] == 70 and p.load_per_replica == 184
    doc = json.loads(json.dumps(p.to_dict()))
    assert doc["result"]["levels"][0] == {"name": "devices", "value": 70, "bound": 70, "proven": True}
    assert doc["kind"] == "layouts" and doc["requirements"]["placement"]["mode"] == "contiguous"


@pytest.mark.parametrize("make, field", [
    (lambda: Requirements(placement=Placement(per_stage_degrees=True), targets=Targets(min_user_tps=10)),
     "per_stage_tp"),
    (lambda: Requirements(placement=Placement(pins=("0=r0w0",)), targets=Targets(min_user_tps=10)), "pins"),
    (lambda: Targets(min_user_tps=10, max_itl_ms=5), "min_user_tps"),
    (lambda: Targets(min_user_tps=-1), "min_user_tps"),
    (lambda: Placement(constraints=("attention-per-rack",)), "require"),
    (lambda: Targets(speed_objective="cheapest"), "objective"),
    (lambda: Targets(objective="latency,devices"), "objective"),
    (lambda: Placement(mode="diagonal"), "mode"),
    (lambda: Placement(degrees=(0, 2)), "tp"),
    (lambda: Placement(per_stage_degrees=True, mode="free"), "mode"),
])
def test_requirements_refuse_what_no_planner_honours(make, field):
    with pytest.raises(InvalidSpec) as exc:
        make()
    assert exc.value.field == field


def test_solver_settings_refuse_bad_values():
    for kw, field in ((dict(method="simplex"), "method"), (dict(time_limit=0), "time_limit"),
                      (dict(threads=0), "threads")):
        with pytest.raises(InvalidSpec) as exc:
            SolverSettings(**kw)
        assert exc.value.field == field
    m, fleet, wl = _specs()
    with pytest.raises(InvalidSpec, match="per-stage degrees are solved by cpsat"):
        plan(m, fleet, wl, Requirements(placement=Placement(per_stage_degrees=True)), SolverSettings(method="dp"))


def test_the_mode_comparison_uses_the_split_default():
    """One home for defaults: the simulator's mode comparison refines split mode as solve does."""
    from placer.planning.requirements import SPLIT_GRANULARITY
    from placer.planning.studies.modes import compare_modes

    m, fleet, wl = _specs()
    doc = compare_modes(m, fleet, wl, Requirements(), SolverSettings(method="dp"), modes=("split",), output_tokens=2)
    assert doc["rows"][0]["granularity"] == SPLIT_GRANULARITY == "shards:4"


@pytest.mark.parametrize("old", ["placer.plan", "placer.compare", "placer.validate", "placer.fleet",
                                 "placer.instance", "placer.simulate.modes", "placer.hf"])
def test_old_import_paths_are_gone(old):
    """A 0.x project with no users of the old paths: no alias modules are kept."""
    sys.modules.pop(old, None)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_placer_plan_is_the_planning_function():
    import placer
    from placer.planning import plan as planning_plan

    assert placer.plan is planning_plan
    assert {"plan", "Plan", "Requirements", "SolverSettings"} <= set(dir(placer))
    m, fleet, wl = _specs()
    assert placer.plan(m, fleet, wl).devices == 2


# a 4-layer chain with its embedding and head on devices that hold two layers, or a layer and the
# embedding or the head: the unconstrained optimum may leave the head alone on the last device
RT_MODEL = {"name": "rt-chain", "hidden_size": 8, "vocab_size": 8, "tie_word_embeddings": False, "layers": [
    {"kind": "attention", "weight_bytes": 400, "kv_bytes_per_token": 1} for _ in range(4)]}


def test_a_runtime_s_rules_reach_every_placement():
    """--runtime vllm: every stage holds a decoder layer and the embedding and head sit with the
    first and last; the rules are constraints of the instance (checked on the mapping here)."""
    m = model_from_dict(RT_MODEL)
    fleet, wl = fleet_from_dict(WAFERS), Workload(context_tokens=16, concurrency=1)
    p = plan(m, fleet, wl, Requirements(placement=Placement(runtime="vllm")), SolverSettings(time_limit=5, threads=1))
    assert p.feasible and p.instance.mode == "contiguous"
    assert set(p.instance.require) >= {"decoder-per-stage", "embedding-first-head-last", "uniform-degree"}
    for stage in p.mapping["stages"]:
        assert any(name.startswith("layers.") for name in stage["layers"]), stage["layers"]
    with pytest.raises(InvalidSpec) as exc:
        Requirements(placement=Placement(runtime="vllm", mode="free"))
    assert exc.value.field == "mode"
    with pytest.raises(InvalidSpec) as exc:
        Requirements(placement=Placement(runtime="torch", degrees=(2,)))
    assert exc.value.field == "tp"


def test_runtime_through_the_command_line(run_cli, tmp_path):
    (tmp_path / "m.json").write_text(json.dumps(RT_MODEL))
    (tmp_path / "h.json").write_text(json.dumps(WAFERS))
    code, out, err = run_cli(["solve", tmp_path / "m.json", "-H", tmp_path / "h.json", "--context", "16",
                              "--concurrency", "1", "--runtime", "vllm", "--json", "-q", "--time-limit", "5"])
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc["require"]) >= {"decoder-per-stage", "embedding-first-head-last"}
    assert all(any(n.startswith("layers.") for n in s["layers"]) for s in doc["stages"])
    code, _, err = run_cli(["solve", tmp_path / "m.json", "-H", tmp_path / "h.json", "--runtime", "vllm",
                            "--mode", "free"])
    assert code == 2 and err.startswith("error: --mode: mode: vLLM runs contiguous stages")


def test_a_ttft_target_holds_at_the_planned_load_and_not_one_request_more():
    """--max-ttft-ms beside a speed floor: each replica's held load is the most live requests whose
    closed-loop p99 TTFT meets the target; an independent run one request above misses it."""
    from placer.simulate import Traffic, simulate

    model = load_model("llama-3.1-8b")
    fleet = load_fleet("h100")
    wl = workload_for(model).replace(context_tokens=2048, concurrency=4)
    loose = plan(model, fleet, wl,
                 Requirements(placement=Placement(degrees=(1,)),
                              targets=Targets(min_user_tps=1.0, output_tokens=16)), SolverSettings(method="dp"))
    held = loose.speed.chosen.shape.held
    inst, assignment = loose.instance, loose.result.assignment
    ttft = {n: simulate(inst, assignment, Traffic(requests=n, max_live=n, output_tokens=16)).ttft_p99_us for n in (2, 3)}
    target_ms = (ttft[2] + ttft[3]) / 2 / 1e3          # between the TTFT at 2 and at 3 live requests
    assert ttft[2] < ttft[3] and held > 2
    tight = plan(model, fleet, wl,
                 Requirements(placement=Placement(degrees=(1,)),
                              targets=Targets(min_user_tps=1.0, max_ttft_ms=target_ms, output_tokens=16)),
                 SolverSettings(method="dp"))
    shape = next(s for s in tight.speed.shapes if s.solved.per_group.assignment == loose.result.assignment)
    assert shape.held == 2
    assert simulate(inst, assignment, Traffic(requests=2, max_live=2, output_tokens=16)).ttft_p99_us <= target_ms * 1e3
    assert simulate(inst, assignment, Traffic(requests=3, max_live=3, output_tokens=16)).ttft_p99_us > target_ms * 1e3
    with pytest.raises(InvalidSpec) as exc:
        Requirements(targets=Targets(max_ttft_ms=100))
    assert exc.value.field == "max_ttft_ms"


@pytest.mark.slow
def test_ttft_targets_in_compare_and_frontier(run_cli, tmp_path):
    base = ["llama-3.1-8b", "-H", "h100", "--context", "2048", "--concurrency", "4", "--tp", "1", "--json", "-q"]
    rows = {}
    for limit in ("0.001", "1e9"):
        code, out, err = run_cli(["compare", *base, "--degrees-only", "--time-limit", "5", "--max-ttft-ms", limit])
        assert code == 0, err
        (row,) = json.loads(out)["degrees"]
        rows[limit] = row
    assert rows["0.001"]["meets_ttft"] is False and rows["1e9"]["meets_ttft"] is True
    assert rows["1e9"]["ttft_p99_us"] > 1.0          # a 2,032-token prompt takes more than a microsecond
    code, out, err = run_cli(["frontier", "llama-3.1-8b", "-H", "h100", "--context", "2048", "--tp", "1", "--json",
                              "-q", "--max-ttft-ms", "0.001", "--max-target", "2", "--jobs", "1",
                              "-o", tmp_path / "f.csv", "--plot", tmp_path / "f.png"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["rows"] and all(not r["meets_ttft"] and not r["pareto"] for r in doc["rows"])
