"""The independent validator: valid mappings pass; each hand-broken copy is reported with the right kind."""

from __future__ import annotations

import copy
import importlib.util
import json

import pytest
from mapping_toys import by_hand, toy_instance, toy_specs

from placer import algorithms
from placer.mapping import build_mapping, write_mapping
from placer.mapping.validate import validate_mapping
from placer.mapping.violations import KINDS

CONTIGUOUS = [0, 0, 0, 1, 1, 2, 2, 2]   # embedding L0 L1 | L2 L3 | L4 L5 head on r0w0 r0w1 r0w2
FREE = [0, 0, 1, 0, 1, 2, 2, 2]         # r0w0: embedding L0 L2; r0w1: L1 L3; r0w2: L4 L5 head
# 16 shards: r0w1 embedding L0 L1.0 | r0w2 L1.1 L2 L3.0 | r0w0 L3.1 L4 L5.0 | r1w0 L5.1 head
SPLIT = [1] * 5 + [2] * 4 + [0] * 4 + [3] * 3


@pytest.fixture
def good(tmp_path):
    inst = toy_instance(tmp_path)
    return build_mapping(inst, by_hand(inst, CONTIGUOUS))


def kinds_of(violations):
    return {v.kind for v in violations}


def run_validate(run_cli, tmp_path, doc, *extra):
    path = tmp_path / "mapping.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    code, out, err = run_cli(["validate", path, "--json", *extra])
    return code, (json.loads(out) if out else None), err


# ----------------------------------------------------------------------------- valid mappings
@pytest.mark.parametrize("mode, granularity, assignment", [
    ("contiguous", "layer", CONTIGUOUS),
    ("free", "layer", FREE),
    ("split", "shards:2", SPLIT),
])
def test_valid_mappings_pass_through_the_cli(run_cli, tmp_path, mode, granularity, assignment):
    inst = toy_instance(tmp_path, mode=mode, granularity=granularity)
    doc = build_mapping(inst, by_hand(inst, assignment))
    assert validate_mapping(doc) == []
    code, out, _ = run_validate(run_cli, tmp_path, doc)
    assert code == 0 and out == {"valid": True, "violations": [], "workload": doc["workload"]}
    code, text, _ = run_cli(["validate", tmp_path / "mapping.json"])
    assert code == 0 and "valid" in text


def _methods():
    out = [(m, mode) for m, modes in algorithms.MODES_OF.items() if m not in ("bound", "cpsat") for mode in modes]
    if importlib.util.find_spec("placer.algorithms.cpsat") is not None:
        out += [("cpsat", mode) for mode in algorithms.MODES_OF["cpsat"]]
    return out


@pytest.mark.parametrize("method, mode", _methods())
def test_every_method_and_mode_gives_a_valid_mapping(tmp_path, method, mode):
    # six 6000 B devices: room for the published rule (typepack) too, which keeps each attention layer
    # alone and packs each other kind on devices of its own
    inst = toy_instance(tmp_path, mode=mode, granularity="shards:2" if mode == "split" else "layer", memory=6000,
                        unavailable=())
    opts = {"time_limit": 10, "threads": 1} if method == "cpsat" else {}
    result = algorithms.place(inst, method=method, **opts)
    assert result.feasible, result.message
    doc = build_mapping(inst, result)
    assert validate_mapping(doc) == []


# ----------------------------------------------------------------------------- broken copies
def _set(path, value):
    def edit(d):
        *head, last = path
        target = d
        for key in head:
            target = target[key]
        target[last] = value
    return edit


def _drop_layer(d):
    d["stages"][1]["layers"].remove("layers.3")


def _twice(d):
    d["stages"][1]["layers"].append("lm_head")   # also on stage 2


def _unknown_layer(d):
    d["stages"][1]["layers"][1] = "layers.33"


def _device(stage, dev, rack):
    def edit(d):
        old = d["stages"][stage]["device"]
        d["stages"][stage].update(device=dev, rack=rack)
        d["route"] = [dev if r == old else r for r in d["route"]]
    return edit


def _swap_route(d):
    d["route"][3] = "r0w2"


def _empty_stage(d):
    d["stages"].append(dict(index=3, device="r1w0", rack=1, layers=[],
                            bytes=dict(weights=0, kv_reserve=0, state=0, activations=32, reserve=0, free=2968),
                            max_concurrency=None, next_hop_latency_us=None))


BROKEN = [
    ("layer_missing", _drop_layer, {"layer_missing", "bytes_mismatch"}, "layers.3 is on no stage"),
    ("layer_duplicated", _twice, {"layer_duplicated", "bytes_mismatch"}, "lm_head is placed 2 times (stages 1, 2)"),
    ("unknown_layer", _unknown_layer, {"unknown_layer", "layer_missing", "bytes_mismatch"}, "'layers.33'"),
    ("bytes_mismatch", _set(("stages", 0, "bytes", "weights"), 2161), {"bytes_mismatch"},
     "weights states 2,161, recomputed 2,160"),
    ("unknown_device", _device(2, "r9w9", 9), {"unknown_device"}, "'r9w9' is not in toy-fleet"),
    ("unavailable_device", _device(2, "r1w2", 1), {"unavailable_device"}, "r1w2 is marked unavailable"),
    # r0w0 then holds stages 0 and 2: 4336 B of weights alone
    ("device_reused", _device(2, "r0w0", 0), {"device_reused", "summary_mismatch", "over_capacity"},
     "device r0w0 is used by 2 stages (0, 2)"),
    ("stage_mismatch rack", _set(("stages", 1, "rack"), 1), {"stage_mismatch"}, "in rack 0, the stage says 1"),
    ("stage_mismatch latency", _set(("stages", 0, "next_hop_latency_us"), 3.0), {"stage_mismatch"},
     "next_hop_latency_us states 3.0"),
    ("stage_order", _set(("stages", 1, "index"), 5), {"stage_order"}, "numbered 5"),
    ("group_mismatch", _set(("stages", 1, "group"), dict(devices=["r0w1"], tp=2, ep=1)), {"group_mismatch"},
     "a group of 1 device(s) (tp 2, ep 1) in a plan of tp 1, ep 1"),
    ("empty_stage", _empty_stage, {"empty_stage", "stage_mismatch", "no_link"}, "stage 3 (r1w0) holds no node"),
    ("concurrency_overstated stage", _set(("stages", 1, "max_concurrency"), 4), {"concurrency_overstated"},
     "states max_concurrency 4 but holds 3"),
    ("concurrency_overstated summary", _set(("summary", "concurrency_ceiling"), None), {"concurrency_overstated"},
     "concurrency_ceiling unbounded but the stages hold 3"),
    ("route_mismatch", _swap_route, {"route_mismatch"}, "layers.2: route r0w2, stage r0w1"),
    ("route_mismatch length", lambda d: d["route"].pop(), {"route_mismatch"}, "7 entries; the model has 8"),
    ("summary_mismatch devices", _set(("summary", "devices_used"), 2), {"summary_mismatch"},
     "devices_used 2, the stages use 3"),
    ("summary_mismatch hops", _set(("summary", "hops"), 3), {"summary_mismatch"}, "3 hops, the stages make 2"),
    ("summary_mismatch latency", _set(("summary", "hop_latency_us"), 4.001), {"summary_mismatch"},
     "hop_latency_us 4.001"),
    ("summary_mismatch bound", _set(("summary", "lower_bound_devices"), 4), {"summary_mismatch"},
     "lower bound of 4 devices"),
    ("proof_mismatch", _set(("summary", "proven_optimal"), True), {"proof_mismatch"}, "status is 'heuristic'"),
    ("spec_name_mismatch", _set(("model", "name"), "toy-other"), {"spec_name_mismatch"}, "'toy-other'"),
    ("spec_hash_mismatch", _set(("hardware", "sha256"), "0" * 64), {"spec_hash_mismatch"}, "000000000000"),
    ("granularity_mismatch", _set(("model", "granularity"), "shards:2"), {"granularity_mismatch"},
     "applies to split mode only"),
]


@pytest.mark.parametrize("name, edit, kinds, words", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_copy_is_reported_with_its_kind(run_cli, tmp_path, good, name, edit, kinds, words):
    doc = copy.deepcopy(good)
    edit(doc)
    found = validate_mapping(doc)
    assert kinds_of(found) == kinds
    target = name.split()[0]
    assert any(v.kind == target and words in v.message for v in found), [str(v) for v in found]
    code, out, _ = run_validate(run_cli, tmp_path, doc)
    assert code == 1
    assert out["valid"] is False
    assert {v["kind"] for v in out["violations"]} == kinds


def test_the_broken_copies_cover_every_kind_but_the_ones_tested_below():
    covered = {b[0].split()[0] for b in BROKEN}
    below = {"over_capacity", "concurrency_exceeded", "non_contiguous", "no_link", "pin_violated",
             "requirement_violated",
             "tier_overflow", "sessions_mismatch"}     # a sessions record's: tests/mapping/test_tiers.py
    assert covered | below == set(KINDS)


def test_reused_device_holds_the_nodes_of_both_stages(good):
    doc = copy.deepcopy(good)
    _device(2, "r0w0", 0)(doc)
    over = [v.message for v in validate_mapping(doc) if v.kind == "over_capacity"]
    # weights 2160 + 2176, KV 2 x 400, state 2 x 100, buffers 32 once: 5368 B on 3000 B
    assert over == ["device r0w0 holds the nodes of 2 stages together: 5,368 B > memory 3,000 B "
                    "(over by 2,368 B)"]


def test_hop_latency_within_a_millionth_is_accepted(good):
    doc = copy.deepcopy(good)
    doc["summary"]["hop_latency_us"] = 4.0 + 1e-9
    assert validate_mapping(doc) == []


def test_over_capacity_states_the_excess_and_the_breakdown(run_cli, tmp_path):
    inst = toy_instance(tmp_path)
    doc = build_mapping(inst, by_hand(inst, [0, 0, 0, 0, 1, 2, 2, 2]))   # embedding L0 L1 L2 on r0w0
    found = validate_mapping(doc)
    assert kinds_of(found) == {"over_capacity", "concurrency_exceeded"}
    over = next(v for v in found if v.kind == "over_capacity")
    # weights 160 + 3 x 1000, KV 2 x 200, state 2 x (50 + 50), buffers 32 -> 3792 B on 3000 B
    assert "over capacity by 792 B" in over.message
    assert "weights 3,160 + KV 400 + state 200 + activations 32 = 3,792 B > memory 3,000 B" in over.message
    exceeded = next(v for v in found if v.kind == "concurrency_exceeded")
    assert "asks for 2 live requests" in exceeded.message and "weights alone overflow" in exceeded.message
    code, out, _ = run_validate(run_cli, tmp_path, doc)
    assert code == 1 and {v["kind"] for v in out["violations"]} == {"over_capacity", "concurrency_exceeded"}


def test_concurrency_above_the_ceiling(tmp_path):
    inst = toy_instance(tmp_path, concurrency=4)     # each stage holds 3
    doc = build_mapping(inst, by_hand(inst, CONTIGUOUS))
    found = validate_mapping(doc)
    assert kinds_of(found) == {"over_capacity", "concurrency_exceeded"}
    assert "asks for 4 live requests; the stages hold at most 3" in \
        next(v.message for v in found if v.kind == "concurrency_exceeded")
    # stage 0: 2160 + 4 x 250 + 32 = 3192 B on 3000 B
    assert any("over capacity by 192 B" in v.message for v in found)


def test_non_contiguous_stage_in_contiguous_mode(run_cli, tmp_path):
    inst = toy_instance(tmp_path)
    doc = build_mapping(inst, by_hand(inst, FREE))   # fits, but r0w0 holds L0 and L2, not L1
    found = validate_mapping(doc)
    assert kinds_of(found) == {"non_contiguous"}
    assert "layers.2 (stage 0, r0w0) follows layers.1 (stage 1, r0w1)" in found[0].message
    assert run_validate(run_cli, tmp_path, doc)[0] == 1
    # the same placement is valid in free mode
    free = toy_instance(tmp_path, mode="free")
    assert validate_mapping(build_mapping(free, by_hand(free, FREE))) == []


def test_split_mode_checks_order_on_the_refined_graph(tmp_path):
    inst = toy_instance(tmp_path, mode="split", granularity="shards:2")
    # layers.1.shard1 returns to r0w0 after layers.1.shard0 went on to r0w1
    assignment = [0] * 4 + [1, 0] + [1] * 4 + [2] * 5 + [3]
    found = validate_mapping(build_mapping(inst, by_hand(inst, assignment)))
    assert "non_contiguous" in kinds_of(found)
    assert any("layers.1.shard1 (stage 0, r0w0) follows layers.1.shard0 (stage 1, r0w1)" in v.message
               for v in found)


def test_consecutive_stages_without_a_link(run_cli, tmp_path):
    inst = toy_instance(tmp_path)
    doc = build_mapping(inst, by_hand(inst, [0, 0, 0, 1, 1, 4, 4, 4]))   # r0w1 -> r1w1: no direct link
    found = validate_mapping(doc)
    assert kinds_of(found) == {"no_link"}
    assert "stages 1 (r0w1) and 2 (r1w1) are consecutive but have no direct link" in found[0].message
    # hops are still costed by the shortest path: 2 + (2 + 3 + 2)
    assert doc["summary"]["hop_latency_us"] == 9.0
    assert run_validate(run_cli, tmp_path, doc)[0] == 1
    # free mode only needs a path
    free = toy_instance(tmp_path, mode="free")
    assert validate_mapping(build_mapping(free, by_hand(free, [0, 0, 0, 1, 1, 4, 4, 4]))) == []


def test_free_mode_stages_must_follow_first_visit(tmp_path):
    free = toy_instance(tmp_path, mode="free")
    doc = build_mapping(free, by_hand(free, FREE))
    doc["stages"][0], doc["stages"][1] = doc["stages"][1], doc["stages"][0]
    doc["stages"][0]["index"], doc["stages"][1]["index"] = 0, 1
    found = validate_mapping(doc)
    assert "stage_order" in kinds_of(found)
    assert any("visits them as [1, 0, 2]" in v.message for v in found)


def test_pin_not_honoured(run_cli, tmp_path):
    inst = toy_instance(tmp_path, pins=("0=r0w0",))
    doc = build_mapping(inst, by_hand(inst, CONTIGUOUS))
    assert validate_mapping(doc) == []
    doc["pins"][0]["device"] = "r0w1"
    found = validate_mapping(doc)
    assert kinds_of(found) == {"pin_violated"}
    assert "layers.0 must be on r0w1, found on r0w0" in found[0].message
    assert run_validate(run_cli, tmp_path, doc)[0] == 1


def test_stale_spec_is_reported(run_cli, tmp_path):
    inst = toy_instance(tmp_path)
    doc = build_mapping(inst, by_hand(inst, CONTIGUOUS))
    model_path = tmp_path / "toy.yaml"
    model_path.write_text(model_path.read_text().replace("weight_bytes: 1000, kv", "weight_bytes: 1100, kv", 1))
    found = validate_mapping(doc)
    # stage 0 now holds (3000 - 32 - 2260) // 250 = 2 requests, not the 3 it states
    assert kinds_of(found) == {"spec_hash_mismatch", "bytes_mismatch", "concurrency_overstated"}
    assert any("the spec changed since" in v.message for v in found)
    code, out, _ = run_validate(run_cli, tmp_path, doc)
    assert code == 1


def test_every_violation_is_reported_not_just_the_first(good):
    doc = copy.deepcopy(good)
    doc["stages"][0]["bytes"]["weights"] += 1
    doc["stages"][2]["bytes"]["state"] += 1
    doc["summary"]["hops"] = 7
    doc["summary"]["proven_optimal"] = True
    found = validate_mapping(doc)
    assert [v.kind for v in found].count("bytes_mismatch") == 2
    assert kinds_of(found) == {"bytes_mismatch", "summary_mismatch", "proof_mismatch"}


# ----------------------------------------------------------------------------- overrides and exit 2
def test_moved_specs_are_found_with_overrides(run_cli, tmp_path, good):
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    m, h = toy_specs(moved)
    doc = copy.deepcopy(good)
    doc["model"]["source"] = str(tmp_path / "gone.yaml")
    code, _, err = run_validate(run_cli, tmp_path, doc)
    assert code == 2 and "pass --model to point at it" in err
    code, out, _ = run_validate(run_cli, tmp_path, doc, "--model", m, "--hardware", h)
    assert code == 0 and out["valid"] is True


@pytest.mark.parametrize("content, words", [
    (b"\xff\xfe", "not UTF-8"),
    (b"{", "invalid JSON"),
    (b'{"schema_version": 6}', "schema_version 6; this placer reads 1"),
    (b'{"schema_version": 1}', "/model: required field is missing"),
])
def test_unreadable_mapping_exits_2(run_cli, tmp_path, content, words):
    path = tmp_path / "m.json"
    path.write_bytes(content)
    code, out, err = run_cli(["validate", path])
    assert code == 2 and out == ""
    assert err.startswith(f"error: {path}: ") and words in err and "Traceback" not in err


def test_missing_file_exits_2(run_cli, tmp_path):
    code, _, err = run_cli(["validate", tmp_path / "nope.json"])
    assert code == 2 and "file not found" in err


def test_text_output_lists_each_violation(run_cli, tmp_path, good):
    doc = copy.deepcopy(good)
    doc["summary"]["devices_used"] = 9
    doc["summary"]["proven_optimal"] = True
    path = tmp_path / "m.json"
    write_mapping(path, doc)
    code, out, _ = run_cli(["validate", path])
    assert code == 1
    assert "2 violation(s)" in out
    assert "  summary_mismatch: summary states devices_used 9, the stages use 3" in out
    assert "  proof_mismatch: " in out


@pytest.mark.parametrize("method, mode", [m for m in _methods() if m[0] != "cpsat"])
def test_catalog_placements_validate(method, mode):
    from placer import load_fleet, load_model, make_instance, workload_for

    model = load_model("kimi-k3")
    inst = make_instance(model, load_fleet("wse-3t"), workload_for(model), mode=mode,
                         granularity="shards:4" if mode == "split" else "layer")
    result = algorithms.place(inst, method=method)
    assert result.feasible, result.message
    doc = build_mapping(inst, result)
    assert validate_mapping(doc) == []
    assert doc["summary"]["concurrency_ceiling"] >= 184


def test_the_validator_does_not_load_the_placement_methods():
    import subprocess
    import sys

    code = ("import sys, placer.mapping.validate, placer.mapping; "
            "print(sorted(m for m in sys.modules if m.startswith(('placer.algorithms', 'placer.problem.placement'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_recorded_requirements_are_checked_on_the_stages(tmp_path):
    """The LM head alone on r0w2 and layers 0..5 on two devices: stage 2 holds neither a decoder nor
    a full-attention layer, so both kinds are broken there (the other stages hold both); the
    mapping states the kinds it was solved under and the validator checks them from the node kinds."""
    from dataclasses import replace

    inst = toy_instance(tmp_path, memory=6000)
    lone_head = [0, 0, 0, 0, 1, 1, 1, 2]
    doc = build_mapping(replace(inst, require=("attention-per-stage", "decoder-per-stage")), by_hand(inst, lone_head))
    assert doc["require"] == ["attention-per-stage", "decoder-per-stage"]
    found = validate_mapping(doc)
    assert [(v.kind, v.message) for v in found] == [
        ("requirement_violated", "attention-per-stage: stage(s) 2 hold no full-attention layer"),
        ("requirement_violated", "decoder-per-stage: stage(s) 2 hold no decoder layer")]
    doc = build_mapping(replace(inst, require=("embedding-first-head-last", "uniform-degree")),
                        by_hand(inst, lone_head))
    assert validate_mapping(doc) == []
    doc["stages"][0]["layers"].remove("embedding")
    doc["stages"][1]["layers"].insert(0, "embedding")
    assert ("requirement_violated", "embedding-first-head-last: embedding is on stage 1, not the first stage (0)") \
        in [(v.kind, v.message) for v in validate_mapping(doc)]


def test_a_level_stated_proven_must_meet_its_bound(good):
    doc = copy.deepcopy(good)
    doc["summary"]["levels"] = [{"name": "devices", "value": 3, "unit": "devices", "bound": 2, "proven": True}]
    assert [(v.kind, v.message) for v in validate_mapping(doc)] == [
        ("proof_mismatch", "level devices is stated proven with value 3 but bound 2")]
