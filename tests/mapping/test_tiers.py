"""The validator's check of a session plan's two tiers (placer.mapping.tiers): the plan `placer solve
--sessions ... --tier host -o` writes validates, and a copy whose on-chip KV reserve, tier bytes
or counts are broken is reported with its kind; documents without a session record still validate."""

from __future__ import annotations

import copy
import json

import pytest

from placer.mapping import read_mapping
from placer.mapping.validate import validate_mapping
from placer.specs.errors import InvalidSpec


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    from conftest import run_cli

    out = tmp_path_factory.mktemp("tiers") / "plan.json"
    code, _out, err = run_cli(["solve", "llama-3.1-8b", "-H", "wse-3t", "--sessions", "chat", "--ttft-target", "500",
                               "--tier", "host", "-q", "-o", out])
    assert code == 0, err
    return read_mapping(out)


def _kinds(doc) -> set[str]:
    return {v.kind for v in validate_mapping(doc)}


def test_the_plan_records_its_tier_and_validates(plan):
    rec = plan["sessions"]
    assert rec["preset"] == "chat" and rec["tier"] == "host" and rec["ttft_target_ms"] == 500
    assert rec["sessions_held"] == rec["resident"] + rec["parked"] > rec["kv_reserve_sessions"] > 0
    # the wafer's host tier is 1 TB (hardware/wse-3t.yaml): the plan reserves no more
    assert 0 < rec["tier_bytes_per_device"] <= 10**12
    assert validate_mapping(plan) == []


def test_a_document_without_a_session_record_still_validates(plan):
    doc = copy.deepcopy(plan)
    del doc["sessions"]
    assert validate_mapping(doc) == []


def test_parked_sessions_past_the_tier_bytes_reserved(plan):
    doc = copy.deepcopy(plan)
    rec = doc["sessions"]
    rec["parked"] += 1
    rec["sessions_held"] += 1
    found = validate_mapping(doc)
    assert {v.kind for v in found} == {"tier_overflow"}
    assert "parked sessions of 3,200 tokens need" in found[0].message and "reserved" in found[0].message


def test_tier_bytes_past_the_device_tier(plan):
    doc = copy.deepcopy(plan)
    doc["sessions"]["tier_bytes_per_device"] = 10**12 + 1
    found = validate_mapping(doc)
    assert {v.kind for v in found} == {"tier_overflow"} and "> its 1,000,000,000,000 B per device" in found[0].message


def test_a_tier_the_hardware_does_not_have(plan):
    doc = copy.deepcopy(plan)
    doc["sessions"]["tier"] = "nvme"
    found = validate_mapping(doc)
    assert {v.kind for v in found} == {"tier_overflow"} and "has no 'nvme' tier" in found[0].message


def test_a_kv_reserve_past_the_chip(plan):
    doc = copy.deepcopy(plan)
    doc["sessions"]["kv_reserve_sessions"] += 1      # the plan's reserve is the chip's ceiling at 3,200 tokens
    found = validate_mapping(doc)
    assert {v.kind for v in found} == {"over_capacity"} and "KV reserve of" in found[0].message


def test_counts_that_do_not_add_up(plan):
    doc = copy.deepcopy(plan)
    doc["sessions"]["sessions_held"] += 5
    assert _kinds(doc) == {"sessions_mismatch"}
    doc = copy.deepcopy(plan)
    doc["sessions"]["tier"] = None
    assert _kinds(doc) == {"sessions_mismatch"}


def test_the_schema_refuses_a_misspelt_field(plan, run_cli, tmp_path):
    doc = copy.deepcopy(plan)
    doc["sessions"]["tier_byte"] = 1
    with pytest.raises(InvalidSpec, match="sessions"):
        validate_mapping(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    code, _out, err = run_cli(["validate", path])
    assert code == 2 and "sessions" in err
