"""`placer validate --rebuild MAPPING -o FIXED`: after a hand edit, everything that follows from the
stages is recomputed and only the real violations are reported."""

from __future__ import annotations

import copy
import json

import pytest

from placer.mapping import read_mapping
from placer.mapping.validate import validate_mapping
from placer.specs.catalog import project_root

GALLERY = project_root() / "tests" / "bad_inputs"
OK = GALLERY / "ok"
# tiny (4 layers of 4 GB: attention, linear, attention, linear; 1 kB KV per token, 1 MB state per
# request) on tinyhw (2 racks x 2 devices of 10 GB) at context 1k, concurrency 2: stages
# r0w0 [layers.0, layers.1] and r0w1 [layers.2, layers.3]
ORIGINAL = GALLERY / "map_for_other_model.json"
SPECS = ["--model", OK / "tiny.yaml", "-H", OK / "tinyhw.yaml"]
KV = 2 * 1024 * 1000          # 2 live requests x 1,024 tokens x 1 kB per attention layer
STATE = 2 * 1_000_000         # 2 live requests x 1 MB per linear layer


@pytest.fixture
def original():
    return json.loads(ORIGINAL.read_text())


def _write(tmp_path, doc, name="edited.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=1))
    return path


def test_moving_a_layer_to_a_new_device_rebuilds_to_a_valid_mapping(run_cli, tmp_path, original):
    doc = copy.deepcopy(original)
    doc["stages"][0]["layers"] = ["layers.0"]
    doc["stages"].append({"device": "r1w0", "layers": ["layers.1"]})     # appended last, by hand
    edited = _write(tmp_path, doc)
    # without --rebuild the new stage would need every derived figure written by hand
    code, _, err = run_cli(["validate", edited, *SPECS])
    assert code == 2 and err.startswith(f"error: {edited}: /stages/2") and err.count("\n") == 1
    fixed = tmp_path / "fixed.json"
    code, out, err = run_cli(["validate", "--rebuild", edited, *SPECS, "-o", fixed])
    assert code == 0, out + err
    assert out.splitlines()[-1] == f"wrote {fixed}"
    assert "claims (status, proof, bounds) are dropped" in out
    new = read_mapping(fixed)
    assert validate_mapping(new, model=OK / "tiny.yaml", fleet=OK / "tinyhw.yaml") == []
    # in pipeline order, with bytes computed by hand
    assert [(s["index"], s["device"], s["rack"], s["layers"]) for s in new["stages"]] == [
        (0, "r0w0", 0, ["layers.0"]), (1, "r1w0", 1, ["layers.1"]), (2, "r0w1", 0, ["layers.2", "layers.3"])]
    assert [s["bytes"]["weights"] for s in new["stages"]] == [4 * 10**9, 4 * 10**9, 8 * 10**9]
    assert [s["bytes"]["kv_reserve"] for s in new["stages"]] == [KV, 0, KV]
    assert [s["bytes"]["state"] for s in new["stages"]] == [0, STATE, STATE]
    assert new["stages"][2]["bytes"]["free"] == 10 * 10**9 - 8 * 10**9 - KV - STATE
    assert new["route"] == ["r0w0", "r1w0", "r0w1", "r0w1"]
    s = new["summary"]
    assert (s["devices_used"], s["hops"], s["method"], s["status"], s["proven_optimal"]) == \
        (3, 2, "edited", "heuristic", False)


def test_only_real_violations_remain_and_nothing_is_written(run_cli, tmp_path, original):
    doc = copy.deepcopy(original)
    doc["stages"][0]["layers"] = ["layers.0"]
    doc["stages"][1]["layers"] = ["layers.1", "layers.2", "layers.3"]     # 12 GB on a 10 GB device
    fixed = tmp_path / "fixed.json"
    code, out, err = run_cli(["validate", "--rebuild", _write(tmp_path, doc), *SPECS, "-o", fixed, "--json"])
    assert code == 1, err
    report = json.loads(out)
    assert {v["kind"] for v in report["violations"]} == {"over_capacity", "concurrency_exceeded"}
    over = next(v for v in report["violations"] if v["kind"] == "over_capacity")["message"]
    assert f"{12 * 10**9 + KV + 2 * STATE - 10 * 10**9:,} B" in over     # layers 1 and 3 hold state
    assert report["rebuilt"] is True and report["written"] is None
    assert not fixed.exists()


def test_swapping_two_stages_devices_needs_no_other_edit(run_cli, tmp_path, original):
    doc = copy.deepcopy(original)
    doc["stages"][0]["device"], doc["stages"][1]["device"] = "r0w1", "r0w0"
    edited = _write(tmp_path, doc)
    code, out, _ = run_cli(["validate", edited, *SPECS, "--json"])
    assert code == 1 and [v["kind"] for v in json.loads(out)["violations"]] == ["route_mismatch"]
    fixed = tmp_path / "fixed.json"
    code, out, err = run_cli(["validate", "--rebuild", edited, *SPECS, "-o", fixed, "--json"])
    assert code == 0, err
    assert json.loads(out)["valid"] is True and json.loads(out)["placement_changed"] is True
    assert read_mapping(fixed)["route"] == ["r0w1", "r0w1", "r0w0", "r0w0"]


def test_only_stages_need_be_written(run_cli, tmp_path, original):
    minimal = {k: original[k] for k in ("model", "hardware", "workload", "mode")}
    minimal["stages"] = [{"device": s["device"], "layers": s["layers"]} for s in original["stages"]]
    fixed = tmp_path / "fixed.json"
    code, out, err = run_cli(["validate", "--rebuild", _write(tmp_path, minimal), *SPECS, "-o", fixed])
    assert code == 0, out + err
    new = read_mapping(fixed)
    assert new["stages"] == original["stages"] and new["route"] == original["route"]


def test_an_unedited_mapping_rebuilds_to_itself_with_its_claims(run_cli, tmp_path, original):
    fixed = tmp_path / "fixed.json"
    code, out, err = run_cli(["validate", "--rebuild", ORIGINAL, *SPECS, "-o", fixed, "--json"])
    assert code == 0, err
    assert json.loads(out)["placement_changed"] is False
    new = read_mapping(fixed)
    for key in ("stages", "route", "workload", "mode"):
        assert new[key] == original[key], key
    # the original predates the summary's levels: the rebuild states the device level from its bound
    levels = new["summary"].pop("levels")
    assert new["summary"] == original["summary"]
    assert levels == [{"name": "devices", "value": 2, "unit": "devices", "bound": 2, "proven": True}]
    assert new["summary"]["proven_optimal"] is True and new["summary"]["method"] == "dp"


def test_stages_that_are_no_placement_are_reported_not_rebuilt(run_cli, tmp_path, original):
    doc = copy.deepcopy(original)
    doc["stages"][1]["layers"] = ["layers.2", "layers.9"]       # layers.3 dropped, layers.9 invented
    fixed = tmp_path / "fixed.json"
    code, out, _ = run_cli(["validate", "--rebuild", _write(tmp_path, doc), *SPECS, "-o", fixed, "--json"])
    assert code == 1
    assert sorted(v["kind"] for v in json.loads(out)["violations"]) == ["layer_missing", "unknown_layer"]
    assert not fixed.exists()


def test_rebuild_refuses_what_it_cannot_read(run_cli, tmp_path, original):
    code, out, err = run_cli(["validate", "--rebuild", ORIGINAL, *SPECS])
    assert (code, out, err) == (2, "", "error: --rebuild: output: needs -o FIXED, the file to write the "
                                       "rebuilt mapping to\n")
    doc = copy.deepcopy(original)
    del doc["stages"][1]["device"]
    path = _write(tmp_path, doc)
    code, out, err = run_cli(["validate", "--rebuild", path, *SPECS, "-o", tmp_path / "fixed.json"])
    assert (code, out, err) == (2, "", f"error: {path}: /stages/1/device: required: a device id\n")
    code, _, err = run_cli(["validate", ORIGINAL, *SPECS, "-o", tmp_path / "x.json"])
    assert code == 2 and err.startswith("error: -o: output: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["edited.json"]
