"""The typed view of a mapping document: every field as the JSON states it, the optional ones with
their defaults stated once, read-only, built once from a schema-checked document."""

from __future__ import annotations

import copy
import json
from dataclasses import FrozenInstanceError

import pytest
from mapping_toys import by_hand, toy_instance

from placer.mapping import build_mapping, mapping_view
from placer.mapping.view import MappingView, StageGroup
from placer.specs.errors import InvalidSpec
from placer.specs.reserve import NO_RESERVE
from placer.specs.workload import Workload


@pytest.fixture
def doc(tmp_path):
    inst = toy_instance(tmp_path)
    return json.loads(json.dumps(build_mapping(inst, by_hand(inst, [0, 0, 0, 1, 1, 2, 2, 2]))))


def test_the_view_states_what_the_document_states(doc):
    view = mapping_view(doc)
    assert isinstance(view, MappingView)
    assert view.workload == Workload(**doc["workload"]) and view.mode == doc["mode"]
    assert (view.model.name, view.model.sha256, view.model.granularity) == (
        doc["model"]["name"], doc["model"]["sha256"], doc["model"]["granularity"])
    assert (view.hardware.name, view.hardware.racks) == (doc["hardware"]["name"], doc["hardware"]["racks"])
    assert view.route == tuple(doc["route"])
    for st, raw in zip(view.stages, doc["stages"], strict=True):
        assert (st.index, st.device, st.rack, list(st.layers)) == (raw["index"], raw["device"], raw["rack"],
                                                                   raw["layers"])
        assert st.bytes.to_dict() == raw["bytes"]
        assert (st.max_concurrency, st.next_hop_latency_us) == (raw["max_concurrency"], raw["next_hop_latency_us"])
        assert st.group is None and st.devices == (raw["device"],) and (st.tp, st.ep) == (1, 1)
    s = doc["summary"]
    assert (view.summary.devices_used, view.summary.hops, view.summary.concurrency_ceiling) == (
        s["devices_used"], s["hops"], s["concurrency_ceiling"])
    assert [lv.name for lv in view.summary.levels] == [lv["name"] for lv in s["levels"]]
    assert view.speculative is None and view.serving is None and view.cached_prompt_tokens == 0
    assert view.section("workload") == doc["workload"] and view.section("workload") is not doc["workload"]


def test_groups_and_the_defaults_of_older_documents(doc):
    grouped = copy.deepcopy(doc)
    grouped["stages"][0]["group"] = {"devices": [doc["stages"][0]["device"], "r0w9"], "tp": 2, "ep": 1}
    st = mapping_view(grouped).stages[0]
    assert st.group == StageGroup((doc["stages"][0]["device"], "r0w9"), 2, 1) and st.devices[1] == "r0w9"
    assert st.tp == 2
    old = copy.deepcopy(doc)
    old["schema_version"] = 1
    old.pop("parallel")
    del old["model"]["granularity"]
    view = mapping_view(old)
    assert view.parallel.reserve == NO_RESERVE and (view.parallel.tp, view.parallel.ep) == (1, 1)
    assert view.model.granularity == "layer" and view.model.expert_groups == 8


def test_the_view_is_read_only_and_built_from_a_checked_document(doc):
    view = mapping_view(doc)
    assert mapping_view(view) is view
    with pytest.raises(FrozenInstanceError):
        view.stages[0].device = "elsewhere"
    with pytest.raises(FrozenInstanceError):
        view.mode = "free"
    bad = copy.deepcopy(doc)
    bad["stages"][0]["devcie"] = bad["stages"][0].pop("device")
    with pytest.raises(InvalidSpec, match="/stages/0/devcie"):
        mapping_view(bad, "m.json")
