"""The fleet mapping (several models on one fleet, placer.mapping.fleet_mapping): each pipeline
validated on its own, then no device shared unless every model on it allows it, shared devices
within their memory, and the distinct devices counted."""

from __future__ import annotations

import copy

import pytest

from placer import plan_fleet
from placer.mapping.validate import validate_mapping
from placer.planning.fleet_plan_file import fleet_plan_from_dict
from placer.specs.errors import InvalidSpec


@pytest.fixture(scope="module")
def two_small():
    """Two Llama 3.1 8B, each on one H200 of its own (16 GB of weights + 1 GB of KV: one GPU)."""
    spec = fleet_plan_from_dict({"hardware": "h200", "racks": 1, "models": [
        {"model": "llama-3.1-8b", "name": "a", "tp": 1}, {"model": "llama-3.1-8b", "name": "b", "tp": 1}]})
    fp = plan_fleet(spec)
    assert (fp.value, fp.proven) == (2, True)
    return fp.mapping


def _onto_first(doc: dict, *, share: bool) -> dict:
    """``doc`` with model b's pipeline moved onto model a's device."""
    doc = copy.deepcopy(doc)
    a, b = (m["pipelines"][0] for m in doc["models"])
    for st_a, st_b in zip(a["stages"], b["stages"]):
        st_b["device"], st_b["rack"] = st_a["device"], st_a["rack"]
    b["route"] = [a["stages"][0]["device"]] * len(b["route"])
    for m in doc["models"]:
        m["share"] = share
    doc["summary"]["devices_used"] = 1
    return doc


def test_the_planned_document_is_valid(two_small):
    assert validate_mapping(two_small) == []
    a, b = (m["pipelines"][0]["stages"][0]["device"] for m in two_small["models"])
    assert a != b


def test_a_device_held_by_two_models_without_sharing(two_small):
    kinds = [v.kind for v in validate_mapping(_onto_first(two_small, share=False))]
    assert kinds == ["fleet_device_shared"]


def test_sharing_models_fit_one_device_side_by_side(two_small):
    """Two 8B replicas: 2 x (16.06 GB + KV) + the 17.6 GB reserve < 141 GB."""
    assert validate_mapping(_onto_first(two_small, share=True)) == []


def test_shared_bytes_beyond_memory(two_small):
    """Nine 8B replicas on one H200: 9 x 16.06 GB of weights alone pass its 141 GB."""
    doc = _onto_first(two_small, share=True)
    b = doc["models"][1]
    doc["models"] += [dict(copy.deepcopy(b), name=f"copy{k}") for k in range(7)]
    assert b["pipelines"][0]["stages"][0]["bytes"]["weights"] * 9 > 141 * 10**9
    assert [v.kind for v in validate_mapping(doc)] == ["fleet_device_overflow"]


def test_devices_used_counts_distinct_devices(two_small):
    doc = copy.deepcopy(two_small)
    doc["summary"]["devices_used"] = 3
    assert [v.kind for v in validate_mapping(doc)] == ["fleet_devices_mismatch"]


def test_a_pipeline_is_a_one_pool_mapping(two_small):
    doc = copy.deepcopy(two_small)
    doc["models"][0]["pipelines"][0]["schema_version"] = 4
    with pytest.raises(InvalidSpec) as info:
        validate_mapping(doc)
    assert info.value.field == "/models/0/pipelines/0/schema_version"
