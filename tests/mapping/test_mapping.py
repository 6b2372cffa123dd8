"""Stage mappings: the document built from a placement, its schema, reading, atomic writing, reloading."""

from __future__ import annotations

import json
import os

import pytest
from jsonschema import Draft202012Validator
from mapping_toys import by_hand, toy_instance

from placer import load_fleet, load_model, make_instance, workload_for
from placer.mapping import (
    build_mapping,
    check_mapping,
    instance_from_mapping,
    mapping_schema,
    read_mapping,
    write_mapping,
)
from placer.problem.placement import Result, Status
from placer.specs.errors import InfeasiblePlacement, InvalidSpec

CONTIGUOUS = [0, 0, 0, 1, 1, 2, 2, 2]   # embedding L0 L1 | L2 L3 | L4 L5 head
# 16 shards: r0w1 embedding L0 L1.0 | r0w2 L1.1 L2 L3.0 | r0w0 L3.1 L4 L5.0 | r1w0 L5.1 head
SPLIT = [1] * 5 + [2] * 4 + [0] * 4 + [3] * 3


@pytest.fixture
def contiguous(tmp_path):
    inst = toy_instance(tmp_path)
    return inst, build_mapping(inst, by_hand(inst, CONTIGUOUS))


def test_stage_bytes_computed_by_hand(contiguous):
    _, doc = contiguous
    s0, s1, s2 = doc["stages"]
    assert [s["device"] for s in doc["stages"]] == ["r0w0", "r0w1", "r0w2"]
    assert s0["layers"] == ["embedding", "layers.0", "layers.1"]
    # weights 160 + 1000 + 1000; KV 2 requests x 200 B (layers.1); state 2 x 50 B (layers.0); buffers 32
    assert s0["bytes"] == dict(weights=2160, kv_reserve=400, state=100, activations=32, reserve=0,
                               free=3000 - 2692)
    assert "group" not in s0          # a group of one is the stage's device alone
    assert s1["bytes"] == dict(weights=2000, kv_reserve=400, state=100, activations=32, reserve=0, free=468)
    assert s2["bytes"] == dict(weights=2176, kv_reserve=400, state=100, activations=32, reserve=0, free=292)
    # (3000 - 32 - weights) // (200 + 50) per stage
    assert [s["max_concurrency"] for s in doc["stages"]] == [808 // 250, 968 // 250, 792 // 250]
    assert [s["next_hop_latency_us"] for s in doc["stages"]] == [2.0, 2.0, None]
    assert doc["route"] == ["r0w0"] * 3 + ["r0w1"] * 2 + ["r0w2"] * 3
    sm = doc["summary"]
    assert (sm["devices_used"], sm["hops"], sm["hop_latency_us"], sm["concurrency_ceiling"]) == (3, 2, 4.0, 3)
    assert (sm["method"], sm["status"], sm["proven_optimal"]) == ("by-hand", "heuristic", False)


def test_identity_and_workload(contiguous, tmp_path):
    _, doc = contiguous
    assert doc["schema_version"] == 3
    assert doc["parallel"] == dict(tp=1, ep=1, reserve=None)
    assert doc["model"]["name"] == "toy-hybrid" and doc["model"]["granularity"] == "layer"
    assert doc["model"]["source"] == str(tmp_path / "toy.yaml")
    assert len(doc["model"]["sha256"]) == 64
    assert doc["hardware"] == {**doc["hardware"], "name": "toy-fleet", "racks": 2}
    assert doc["workload"]["context_tokens"] == 100 and doc["workload"]["concurrency"] == 2
    assert set(doc["workload"]) >= {"context_tokens", "concurrency", "weight_bits", "kv_bits", "state_bits",
                                    "conv_state_bits", "activation_bits", "micro_batch", "weight_group_size"}
    assert "pins" not in doc


def test_free_mode_stages_in_order_of_first_visit(tmp_path):
    inst = toy_instance(tmp_path, mode="free")
    # r0w1 is visited first (embedding), r0w0 second, then r0w2
    doc = build_mapping(inst, by_hand(inst, [1, 1, 0, 1, 0, 2, 2, 2]))
    assert [s["device"] for s in doc["stages"]] == ["r0w1", "r0w0", "r0w2"]
    assert doc["stages"][0]["layers"] == ["embedding", "layers.0", "layers.2"]   # non-contiguous is fine here
    assert doc["summary"]["hops"] == 4 and doc["summary"]["hop_latency_us"] == 8.0


def test_split_mode_names_refined_nodes(tmp_path):
    inst = toy_instance(tmp_path, mode="split", granularity="shards:2")
    doc = build_mapping(inst, by_hand(inst, SPLIT))   # layers 1, 3 and 5 cut across two devices
    assert doc["model"]["granularity"] == "shards:2"
    assert doc["stages"][0]["layers"] == ["embedding.shard0", "embedding.shard1", "layers.0.shard0",
                                          "layers.0.shard1", "layers.1.shard0"]
    # layers.1.shard0 carries the layer's KV; its weights are half of 1000 B
    assert doc["stages"][0]["bytes"]["weights"] == 160 + 1000 + 500
    assert doc["stages"][0]["bytes"]["kv_reserve"] == 400
    assert doc["stages"][1]["bytes"]["kv_reserve"] == 400   # layers.3.shard0 is on stage 1
    assert len(doc["route"]) == 16


def test_pins_are_recorded_and_restored(tmp_path):
    inst = toy_instance(tmp_path, pins=("0=r0w0", "2-3"))
    doc = build_mapping(inst, by_hand(inst, CONTIGUOUS))
    assert doc["pins"] == [{"layers": ["layers.0"], "device": "r0w0"},
                           {"layers": ["layers.2", "layers.3"], "device": None}]
    *_, again = instance_from_mapping(doc)
    assert again.pins == inst.pins


def test_reload_gives_the_same_instance(contiguous):
    inst, doc = contiguous
    model, fleet, wl, again = instance_from_mapping(doc)
    assert model.sha256 == inst.model.sha256 and fleet.sha256 == inst.fleet.sha256
    assert wl == inst.workload
    assert [x.name for x in again.nodes] == [x.name for x in inst.nodes]
    assert again.weight_bytes == inst.weight_bytes and again.capacity_bytes == inst.capacity_bytes
    assert build_mapping(again, by_hand(again, CONTIGUOUS)) == doc


def test_reload_refines_split_mappings(tmp_path):
    inst = toy_instance(tmp_path, mode="split", granularity="shards:2")
    doc = build_mapping(inst, by_hand(inst, SPLIT))
    *_, again = instance_from_mapping(doc)
    assert again.mode == "split" and again.n_nodes == 16 and again.model.granularity == "shards:2"


def test_reload_with_overrides_and_resized_fleet(tmp_path):
    model, fleet = load_model("kimi-k3"), load_fleet("wse-3t", racks=31)
    inst = make_instance(model, fleet, workload_for(model))
    doc = build_mapping(inst, by_hand(inst, list(range(93))))
    # catalog specs are recorded by name, the resized fleet by its rack count
    assert doc["model"]["source"] == "kimi-k3" and doc["hardware"]["source"] == "wse-3t"
    assert doc["hardware"]["racks"] == 31
    _, fleet2, _, again = instance_from_mapping(doc)
    assert len(fleet2.devices) == 93 and again.n_devices == 93
    # the MLA stages hold floor((44e9 - 28,672 - 16,129,032,258) / 150,994,944) = 184 requests
    assert doc["summary"]["concurrency_ceiling"] == 184
    _, _, _, over = instance_from_mapping(doc, model=model, hardware="wse-3t")
    assert over.n_devices == 93


def test_infeasible_result_is_refused(tmp_path):
    inst = toy_instance(tmp_path)
    with pytest.raises(InfeasiblePlacement, match="too big"):
        build_mapping(inst, Result("cpsat", "contiguous", Status.INFEASIBLE, message="too big"))


def test_non_finite_figures_become_null(tmp_path):
    inst = toy_instance(tmp_path)
    res = by_hand(inst, CONTIGUOUS).replace(gap=float("inf"), objective=float("nan"), bound=3.0)
    doc = build_mapping(inst, res)
    assert doc["summary"]["gap"] is None and doc["summary"]["objective"] is None
    assert doc["summary"]["bound"] == 3.0
    json.dumps(doc, allow_nan=False)


# ----------------------------------------------------------------------------- schema
def test_schema_is_a_valid_draft_2020_12_schema():
    schema = mapping_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_built_mappings_satisfy_the_schema(tmp_path, contiguous):
    _, doc = contiguous
    assert list(Draft202012Validator(mapping_schema()).iter_errors(doc)) == []
    free = toy_instance(tmp_path, mode="free")
    doc2 = build_mapping(free, by_hand(free, [1, 1, 0, 1, 0, 2, 2, 2]))
    assert list(Draft202012Validator(mapping_schema()).iter_errors(doc2)) == []


@pytest.mark.parametrize("edit, pointer, words", [
    (lambda d: d.pop("stages"), "/stages", "required field is missing"),
    (lambda d: d["stages"][1]["bytes"].update(weights="2000"), "/stages/1/bytes/weights", "not of type 'integer'"),
    (lambda d: d["stages"][0]["bytes"].update(spare=1), "/stages/0/bytes/spare", "unknown field"),
    (lambda d: d.update(mode="scattered"), "/mode", "is not one of"),
    (lambda d: d["summary"].update(status="great"), "/summary/status", "is not one of"),
    (lambda d: d["summary"].update(proven_optimal="yes"), "/summary/proven_optimal", "not of type 'boolean'"),
    (lambda d: d["workload"].update(kv_bits=0), "/workload/kv_bits", "less than the minimum"),
    (lambda d: d["workload"].update(context="256k"), "/workload/context", "unknown field"),
    (lambda d: d["stages"][2].update(max_concurrency=-5), "/stages/2/max_concurrency", "less than the minimum"),
    (lambda d: d["route"].append(7), "/route/8", "not of type 'string'"),
    (lambda d: d["model"].update(sha256="abc"), "/model/sha256", "does not match"),
])
def test_schema_errors_name_the_json_pointer(contiguous, tmp_path, edit, pointer, words):
    _, doc = contiguous
    edit(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InvalidSpec) as err:
        read_mapping(path)
    assert err.value.field == pointer
    assert words in err.value.message
    assert err.value.source == str(path)


def test_other_schema_version_gets_a_clear_message(contiguous):
    _, doc = contiguous
    doc["schema_version"] = 6
    doc["stages"] = "whatever a later version writes"
    with pytest.raises(InvalidSpec) as err:
        check_mapping(doc, "old.json")
    assert err.value.field == "/schema_version"
    assert err.value.message == ("written by a different placer version (schema_version 6; "
                                 "this placer reads 1, 2, 3, 4 and 5)")


def test_a_one_pool_mapping_is_not_read_as_version_4(contiguous):
    """Version 4 is the two-pool form: a one-pool document stamped 4 is refused at its pools."""
    _, doc = contiguous
    doc["schema_version"] = 4
    with pytest.raises(InvalidSpec) as err:
        check_mapping(doc, "x.json")
    assert err.value.field == "/"
    assert "'kind' is a required property" in err.value.message or "required" in err.value.message


@pytest.mark.parametrize("content, words", [
    (b'{"schema_version": 1, "mode": "fr\xffee"}', "not UTF-8"),
    (b'{"schema_version": 1,', "invalid JSON"),
    (b'{"schema_version": 1, "x": NaN}', "NaN is not allowed"),
    (b'{"schema_version": 1, "schema_version": 1}', "duplicate key 'schema_version'"),
    (b'[1, 2]', "a mapping is a JSON object"),
])
def test_unreadable_files_are_refused(tmp_path, content, words):
    path = tmp_path / "m.json"
    path.write_bytes(content)
    with pytest.raises(InvalidSpec, match=words):
        read_mapping(path)


def test_oversized_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / "huge.json"
    path.write_bytes(b" " * (8 * 2**20 + 1))
    with pytest.raises(InvalidSpec, match="limited to"):
        read_mapping(path)


# ----------------------------------------------------------------------------- writing
def test_write_then_read_round_trips(contiguous, tmp_path):
    _, doc = contiguous
    path = tmp_path / "out" / "m.json"
    write_mapping(path, doc)
    assert read_mapping(path) == doc
    assert path.read_text(encoding="utf-8").endswith("}\n")


def test_interrupted_write_keeps_the_old_file_and_leaves_no_temp_file(contiguous, tmp_path, monkeypatch):
    _, doc = contiguous
    path = tmp_path / "m.json"
    write_mapping(path, doc)
    before = path.read_bytes()
    doc2 = json.loads(json.dumps(doc))
    doc2["summary"]["method"] = "second"

    def crash(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError, match="No space left"):
        write_mapping(path, doc2)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "toy-fleet.yaml", "toy.yaml"]


def test_schema_invalid_document_is_never_written(contiguous, tmp_path):
    _, doc = contiguous
    doc["stages"] = []
    path = tmp_path / "never.json"
    with pytest.raises(InvalidSpec, match="/stages"):
        write_mapping(path, doc)
    assert not path.exists()


def test_schema_command_prints_the_schema(run_cli):
    code, out, _ = run_cli(["schema"])
    assert code == 0 and json.loads(out) == mapping_schema()
