"""Several models on one fleet (placer.plan_fleet, placer plan-fleet): the joint level against sums
and byte counts worked by hand, the fleet mapping validated and exported model by model."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from dirs import ROOT

from placer import load_fleet, plan_fleet
from placer.algorithms.cpsat.joint import Demand, joint_choices
from placer.mapping.validate import validate_mapping
from placer.planning.fleet_plan import plan_devices
from placer.planning.fleet_plan_file import fleet_plan_from_dict, read_fleet_plan
from placer.planning.solve import build_instance
from placer.specs.errors import InvalidSpec

PLANS = ROOT / "examples" / "fleet_plans"
GB = 10**9


def _types(fp, entry: str) -> dict[str, int]:
    m = next(m for m in fp.models if m.entry.name == entry)
    out: dict[str, int] = {}
    for r in m.replicas:
        for d in plan_devices(r):
            t = fp.fleet.by_id[d].type.name
            out[t] = out.get(t, 0) + 1
    return out


def test_two_models_competing_for_the_one_h200_node():
    """2 H100 nodes + 1 H200 node, every stage a group of 8 (a whole node). By hand: an H100 holds
    80 GB - (0.1 x 80 GB + 3.5 GB) = 68.5 GB (less 32 KB of activation buffers), a node 548 GB;
    an H200 141 - 17.6 = 123.4 GB, a node 987.2 GB. Llama 3.1 70B holds 141.1 GB of weights +
    48 x 10.74 GB of KV (32k tokens) = 656.5 GB; Qwen3 235B 470.2 GB + 16 x 6.31 GB = 571.1 GB.
    Both exceed an H100 node and fit the H200 node: alone each takes 8 GPUs (16 in all), together
    one takes the H200 node and the other two H100 nodes: 24 GPUs, proven by the joint level."""
    spec = read_fleet_plan(PLANS / "mixed_gpu_fleet.yaml")
    fleet = load_fleet(spec.hardware)
    node = {"h100": 0, "h200": 0}
    for e in spec.models:
        inst = build_instance(e.model, fleet, e.workload, e.requirements)
        caps = {d.type.name: c for d, c in zip(inst.devices, inst.capacity_bytes)}
        node = {t: 8 * caps[t] for t in caps}
        assert node["h100"] < sum(inst.demand_bytes) <= node["h200"]
    assert round(node["h100"] / GB, 1) == 548.0 and round(node["h200"] / GB, 1) == 987.2

    fp = plan_fleet(spec, fleet)
    assert (fp.value, fp.bound, fp.proven, fp.devices, fp.alone_sum) == (24, 24, True, 24, 16)
    assert [m.fewest for m in fp.models] == [8, 8]
    # which model takes the H200 node is a tie (8 + 16 either way)
    assert sorted([_types(fp, "llama-3.1-70b"), _types(fp, "qwen3-235b")], key=str) == [{"h100": 16}, {"h200": 8}]
    used = [d for m in fp.models for r in m.replicas for d in plan_devices(r)]
    assert len(used) == len(set(used)) == 24
    doc = fp.mapping
    assert validate_mapping(doc) == []
    assert doc["summary"]["devices_used"] == 24 and doc["summary"]["proven_optimal"] is True


def test_wafer_fleet_kimi_k3_with_its_eagle3_head_and_llama():
    """Kimi K3 (SGLang's rules, 6 live requests of 256k, the EAGLE-3 head on the head's wafer) takes
    47 wafers alone, each Llama 3.1 70B replica 4: 47 + 2 x 4 = 55 of the 96 wafers, the sum of
    the minima, hence proven; each pipeline is validated and exported as its own command."""
    from placer.export import export_mapping

    fp = plan_fleet(PLANS / "wafer_fleet.yaml")
    assert (fp.value, fp.bound, fp.proven, fp.alone_sum) == (55, 55, True, 55)
    k3, llama = fp.models
    assert [r.devices for r in k3.replicas] == [47] and [r.devices for r in llama.replicas] == [4, 4]
    doc = json.loads(json.dumps(fp.mapping))
    spec = doc["models"][0]["pipelines"][0]["speculative"]
    assert (spec["method"], spec["tokens"], spec["draft"]["name"]) == ("eagle3", 3, "kimi-k3-eagle3")
    assert validate_mapping(doc) == []
    text = export_mapping(doc, "sglang").text
    assert text.count("python -m sglang.launch_server") == 3
    assert "SGLANG_PP_LAYER_PARTITION=19,21,21,19 " in text
    manifest = json.loads(export_mapping(doc, "json").text)
    assert [len(m["pipelines"]) for m in manifest["models"]] == [1, 2]


def test_too_few_wafers_is_proven_infeasible_by_the_sum_of_minima():
    """18 CS-4 systems hold 54 wafers; 47 + 4 + 4 = 55 are needed."""
    spec = replace(read_fleet_plan(PLANS / "wafer_fleet.yaml"), racks=18)
    fp = plan_fleet(spec)
    assert not fp.feasible and fp.proven and fp.mapping is None
    assert fp.message.endswith("exists (proven): the models' replicas alone need 55 devices, the fleet has 54")


def test_a_device_budget_below_the_sum_is_proven_infeasible():
    spec = replace(read_fleet_plan(PLANS / "wafer_fleet.yaml"), budget=54.0, budget_unit="devices")
    fp = plan_fleet(spec)
    assert not fp.feasible and fp.proven


def test_most_requests_within_a_device_budget():
    """Within 60 wafers, Kimi K3 (47) and at least 2 Llama replicas (4 each): 60 - 47 = 13 wafers
    hold floor(13 / 4) = 3 Llama replicas, the most; each model's replicas serve its rate alone."""
    spec = replace(read_fleet_plan(PLANS / "wafer_fleet.yaml"), objective="requests", budget=60.0,
                   budget_unit="devices")
    fp = plan_fleet(spec)
    k3, llama = fp.models
    assert (len(k3.replicas), len(llama.replicas), fp.devices) == (1, 3, 59)
    assert fp.proven and fp.bound == fp.value
    milli = int(k3.rate * 1e3) + 3 * int(llama.rate * 1e3)
    assert fp.value == pytest.approx(milli / 1e3)
    assert k3.rate > 0 and llama.rate > 0
    assert validate_mapping(fp.mapping) == []


def test_least_power_counts_each_type_at_its_watts():
    """Under mw the joint level is W: on the H100/H200 fleet both types draw 10.2 kW per 8-GPU
    system, 1,275 W a GPU, so the 24 GPUs of the joint plan draw 30,600 W, proven."""
    spec = replace(read_fleet_plan(PLANS / "mixed_gpu_fleet.yaml"), objective="mw")
    fp = plan_fleet(spec)
    assert (fp.value, fp.bound, fp.proven, fp.devices) == (30600.0, 30600.0, True, 24)
    assert fp.power_w == pytest.approx(30600.0)


def test_the_relaxation_yields_its_choices_cheapest_first():
    """Two models, each 8 of type a or 16 of type b (never across types); 8 of a and 32 of b: one
    takes a (8), the other b (16) = 24, twice (either way round), then both on b (32); then no
    choice is left (both on a needs 16 of a)."""
    demands = [Demand(1, {"a": 8, "b": 16}, None), Demand(1, {"a": 8, "b": 16}, None)]
    got = [(c.cost if c else None, proven) for c, proven in joint_choices(demands, {"a": 8, "b": 32},
                                                                          {"a": 1, "b": 1})]
    assert got == [(24, True), (24, True), (32, True), (None, True)]


def test_mixed_replicas_hold_their_bytes_and_take_two_types():
    """One model of 100 bytes: 1 device of a (60 B) or 2 of b (50 B each) pure; with 0 a left
    pure-a is out, and a mixed replica needs a and b: 1 a + 1 b = 110 B >= 100, 2 devices."""
    d = Demand(1, {"b": 2}, 1, bytes=100, capacity={"a": 60, "b": 50})
    first, proven = next(joint_choices([d], {"a": 1, "b": 4}, {"a": 1, "b": 1}))
    assert proven and first.cost == 2


@pytest.mark.parametrize("text, field", [
    ("models: []", "models"),
    ("models: [{model: llama-3.1-8b, colour: blue}]", "models[0].colour"),
    ("models: [{model: llama-3.1-8b, replicas: 0}]", "models[0].replicas"),
    ("models: [{model: no-such-model}]", "models[0].model"),
    ("models: [{model: llama-3.1-8b}, {model: llama-3.1-8b}]", "models[1].name"),
    ("objective: watts\nmodels: [{model: llama-3.1-8b}]", "objective"),
    ("budget: {mw: 2}\nmodels: [{model: llama-3.1-8b}]", "budget.mw"),
    ("models: [{model: llama-3.1-8b, traffic: {isl: lots}}]", "models[0].traffic.isl"),
    ("models: [{model: llama-3.1-8b, speculative: {tokens: 99}}]", "models[0].speculative.tokens"),
    ("models: [{model: llama-3.1-8b, tp: [0]}]", "models[0].tp"),
])
def test_a_bad_plan_names_the_file_and_the_field(text, field, tmp_path):
    import yaml

    with pytest.raises(InvalidSpec) as info:
        fleet_plan_from_dict(yaml.safe_load(text), source="plan.yaml")
    assert info.value.source == "plan.yaml" and info.value.field == field


def test_cli_plans_validates_and_exports(run_cli, tmp_path):
    out_file = tmp_path / "fleet.json"
    code, out, err = run_cli(["plan-fleet", PLANS / "mixed_gpu_fleet.yaml", "-o", out_file])
    assert code == 0, err
    assert "devices 24 (each model alone: 16 in all)" in out
    assert "devices: 24 devices, bound 24 devices, proven" in out
    code, out, err = run_cli(["validate", out_file])
    assert code == 0 and "valid (2 models on h100-h200, 24 devices)" in out
    code, out, err = run_cli(["export", out_file, "--format", "vllm"])
    assert code == 0, err
    assert out.count("vllm serve") == 2


def test_cli_bad_plan_is_one_line_exit_2(run_cli, write):
    path = write("plan.yaml", "models: [{model: llama-3.1-8b, replicas: two}]\nhardware: wse-3t\n")
    code, out, err = run_cli(["plan-fleet", path])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"error: {path}: models[0].replicas: ")


def test_a_speed_floored_model_is_placed_at_the_shape_its_search_chose(write):
    """Llama 3.1 8B at 40 tokens/s per user for 16 live requests: the speed search's shape (its
    degree and live requests per replica) is what each of its replicas is placed at; maximising
    requests/s within 12 H100s, the 70B (2 stages of tp 2: 4 GPUs) leaves 8 GPUs to one-GPU 8B replicas."""
    from placer import Requirements, Targets, load_model, plan, workload_for
    from placer.planning.requirements import Placement

    path = write("speed.yaml", "hardware: h100\nracks: 2\nobjective: requests\nbudget: {devices: 12}\nmodels:\n"
                 "  - {model: llama-3.1-8b, concurrency: 16, context: 8k, min_user_tps: 40}\n"
                 "  - {model: llama-3.1-70b, concurrency: 8, context: 8k, tp: [2, 4]}\n")
    fp = plan_fleet(path)
    small, big = fp.models
    m = load_model("llama-3.1-8b")
    alone = plan(m, fp.fleet, workload_for(m, concurrency=16, context="8k"),
                 Requirements(Placement(), Targets(min_user_tps=40)))
    assert small.entry.replicas == alone.replicas
    for r in small.replicas:
        assert (r.instance.tp, r.workload.concurrency) == (alone.instance.tp, alone.load_per_replica)
    assert small.rate == pytest.approx(alone.simulation.aggregate_tokens_per_s / alone.simulation.output_tokens)
    assert [r.devices for r in big.replicas] == [4] and [r.devices for r in small.replicas] == [1] * 8
    assert fp.devices == 12 and fp.proven


def test_pipelines_across_both_gpu_types_share_the_h200_node(write):
    """Stages of one GPU each (tp 1) on 2 H100 nodes + 1 H200 node. Alone, Llama 3.1 70B's 656.5 GB
    take ceil(656.5 / 123.4) = 6 H200s and Qwen3 235B's 470.2 + 8 x 6.31 = 520.7 GB take 5: 11,
    but the node has 8. Jointly, with a + c <= 8 H200s, 123.4 a + 68.5 b >= 656.5 and
    123.4 c + 68.5 d >= 520.7: a = 6 leaves c = 2 and d = 4 (12); a = 5, b = 1, c = 3, d = 3 (12);
    a = 4, b = 3, c = 4, d = 1 (12); a = 7 or a = 3 cost 13 or more. 12 is the least, and the
    joint plan meets it, splitting the H200 node between the two pipelines."""
    path = write("plan.yaml", f"hardware: {PLANS / 'fleets' / 'h100_h200.yaml'}\nmodels:\n"
                 "  - {model: llama-3.1-70b, concurrency: 48, context: 32k, tp: 1}\n"
                 "  - {model: qwen3-235b, concurrency: 8, context: 32k, tp: 1}\n")
    fp = plan_fleet(path)
    assert [m.fewest for m in fp.models] == [6, 5]
    assert [{t: p.devices for t, p in m.by_type.items()} for m in fp.models] == \
        [{"h100": 10, "h200": 6}, {"h100": 8, "h200": 5}]
    assert (fp.value, fp.bound, fp.proven, fp.alone_sum) == (12, 12, True, 11)
    types = [_types(fp, "llama-3.1-70b"), _types(fp, "qwen3-235b")]
    assert sum(t.get("h200", 0) for t in types) <= 8 and sum(sum(t.values()) for t in types) == 12
    assert validate_mapping(fp.mapping) == []


@pytest.mark.parametrize("share, devices", [(True, 2), (False, 4)])
def test_sharing_models_fit_beside_each_other(share, devices):
    """Llama 3.1 70B (141.1 GB of weights + 2.7 GB of KV at 8k) takes 2 H200s of 141 - 17.6 =
    123.4 GB; each Llama 3.1 8B (16.1 GB + 1.1 GB) one. Sharing, the 8Bs fit beside the 70B's
    ~71.9 GB on each of its GPUs (123.4 - 71.9 = 51.5 GB left): 2 GPUs, the 70B's own minimum, so
    proven. Without sharing: 2 + 1 + 1 = 4, the sum of the minima."""
    spec = fleet_plan_from_dict({"hardware": "h200", "racks": 1, "share_devices": share, "models": [
        {"model": "llama-3.1-8b", "name": "a", "tp": 1}, {"model": "llama-3.1-8b", "name": "b", "tp": 1},
        {"model": "llama-3.1-70b", "tp": 1}]})
    fp = plan_fleet(spec)
    assert (fp.value, fp.bound, fp.proven, fp.devices, fp.alone_sum) == (devices, devices, True, devices, 4)
    doc = fp.mapping
    assert validate_mapping(doc) == []
    big = {st["device"] for st in doc["models"][2]["pipelines"][0]["stages"]}
    small = {st["device"] for m in doc["models"][:2] for st in m["pipelines"][0]["stages"]}
    assert (small <= big) == share
