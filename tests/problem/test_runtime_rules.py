"""Each runtime's rules as requirement kinds (placer.problem.runtime_rules), and plans solved under them
that the runtime's own partition code runs as written."""

from __future__ import annotations

import sys

import pytest
from dirs import VENDORED

from placer.algorithms import place
from placer.export import ExportOptions, export_mapping
from placer.mapping import build_mapping
from placer.problem.instance import REQUIREMENTS, make_instance
from placer.problem.placement import Status
from placer.problem.runtime_rules import (
    RUNTIMES,
    check_runtime_request,
    runtime_modes,
    runtime_requirements,
    runtime_rules,
)
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import workload_for

sys.path.insert(0, str(VENDORED))

import vllm_0_33_0_pp  # noqa: E402

# the partition rules every runtime here shares
PIPELINE = ("decoder-per-stage", "embedding-first-head-last", "uniform-degree")


@pytest.fixture(scope="module")
def kimi():
    return load_model("kimi-k3-hf")


def test_each_runtime_states_its_rules(kimi):
    dense = load_model("llama-3.1-8b")
    assert runtime_requirements("vllm") == runtime_requirements("sglang") == PIPELINE
    assert runtime_requirements("vllm", kimi) == PIPELINE
    # the optional part: a hybrid's ranks without full attention need --block-size, which the export gives
    assert runtime_rules("vllm", kimi).optional == ("attention-per-stage",)
    assert runtime_rules("vllm", dense).optional == runtime_rules("sglang", kimi).optional == ()
    # Megatron's GPT layout accepts a stage without decoder layers; its hybrid pattern does not
    assert runtime_requirements("megatron", dense) == ("embedding-first-head-last", "uniform-degree")
    assert runtime_requirements("megatron", kimi) == PIPELINE
    assert runtime_requirements("torch") == ("embedding-first-head-last", "uniform-degree")
    assert runtime_rules("torch").degrees == (1,)
    for runtime in RUNTIMES:
        assert runtime_modes(runtime) == ("contiguous",)
        assert set(runtime_requirements(runtime, kimi)) <= set(REQUIREMENTS)


@pytest.mark.parametrize("runtime, kwargs, field, words", [
    ("vllm", {"mode": "free"}, "mode", "vLLM runs contiguous stages, not free"),
    ("sglang", {"mode": "split"}, "mode", "SGLang runs contiguous stages, not split"),
    ("torch", {"degrees": [1, 2]}, "tp", "runs tensor-parallel degree 1 only, not 2"),
    ("megatron", {"per_stage": True}, "per_stage_tp", "one tensor-parallel degree for every stage"),
    ("trtllm", {}, "runtime", "unknown runtime 'trtllm' (one of vllm, sglang, megatron, torch)"),
])
def test_what_a_runtime_cannot_run_is_refused_before_solving(runtime, kwargs, field, words):
    with pytest.raises(InvalidSpec) as err:
        check_runtime_request(runtime, **kwargs)
    assert err.value.field == field and words in err.value.message


def test_check_runtime_request_passes_what_the_runtime_runs():
    assert check_runtime_request("vllm", mode="contiguous", degrees=[1, 2, 8]).runtime == "vllm"
    assert check_runtime_request("torch", mode="contiguous", degrees=[1]).degrees == (1,)


@pytest.mark.slow
def test_kimi_k3_hf_under_vllm_rules_is_proven_and_runs_in_vllm(kimi, monkeypatch):
    """At the catalog's 182 live requests the last MLA layer and its KV reserve leave 23 MB on a
    wafer, so the 2.35 GB LM head takes a wafer of its own, which vLLM cannot build. Under vLLM's
    rules every rank holds a decoder layer, which holds at most 166 live requests (dp proves 167
    infeasible in exact bytes); at 166 CP-SAT proves 69 wafers, the concurrency and the latency, and
    vLLM's own get_pp_indices gives every rank its stage's layers."""
    fleet = load_fleet("wse-3t")
    wl = workload_for(kimi)
    rules = runtime_requirements("vllm", kimi)
    over = place(make_instance(kimi, fleet, wl.replace(concurrency=167), require=rules), "dp")
    assert over.status == Status.INFEASIBLE and over.max_concurrency == 166
    inst = make_instance(kimi, fleet, wl.replace(concurrency=166), require=rules)
    r = place(inst, "cpsat", time_limit=120, threads=2, objective="devices,concurrency,latency")
    assert r.proven_optimal and r.devices_used == 69, r.message
    assert [lv.name for lv in r.levels] == ["devices", "concurrency", "latency"]
    assert r.level("concurrency").value == 166
    assert place(inst, "dp").devices_used == 69
    doc = build_mapping(inst, r)
    assert doc["require"] == list(rules)
    text = export_mapping(doc, "vllm", options=ExportOptions(bare=True)).text
    counts = [int(x) for x in text.split(",")]
    assert len(counts) == 69 and min(counts) >= 1 and sum(counts) == 93
    monkeypatch.setenv("VLLM_PP_LAYER_PARTITION", text)
    start = 0
    for rank, stage in enumerate(doc["stages"]):
        layers = [int(n.split(".")[1]) for n in stage["layers"] if n.startswith("layers.")]
        assert list(range(*vllm_0_33_0_pp.get_pp_indices(93, rank, 69))) == layers == list(range(start, start + counts[rank]))
        start += counts[rank]
    assert doc["stages"][0]["layers"][:2] == ["vision_tower", "embedding"] and doc["stages"][-1]["layers"][-1] == "lm_head"


HEAD_HEAVY = """\
name: head-heavy
layers:
  - {kind: embedding, weight_bytes: 2}
  - {kind: attention, weight_bytes: 10, kv_bytes_per_token: 1}
  - {kind: attention, weight_bytes: 10, kv_bytes_per_token: 1}
  - {kind: attention, weight_bytes: 25, kv_bytes_per_token: 1}
  - {kind: lm_head, weight_bytes: 12}
"""
THIRTY_TWO = """\
name: thirty-two
device: {memory: 32}
fleet: {racks: 1, per_rack: 4, intra_rack_latency_us: 1, inter_rack_latency_us: 2}
"""


def test_the_cli_solves_under_a_requirement_and_says_when_none_fits(run_cli, write, tmp_path):
    """The last layer (25 B) and the head (12 B) never share a 32 B device: without the rule the
    head gets a device of its own, which the vLLM export refuses; with decoder-per-stage no
    placement exists, and the solve says so in exact bytes."""
    m, h = write("head-heavy.yaml", HEAD_HEAVY), write("thirty-two.yaml", THIRTY_TWO)
    out = tmp_path / "m.json"
    code, _, err = run_cli(["solve", m, "-H", h, "--context", "1", "--concurrency", "0", "-o", out])
    assert code == 0, err
    code, _, err = run_cli(["export", out, "--format", "vllm"])
    assert code == 2 and "holds no decoder layer (only the LM head)" in err
    code, text, err = run_cli(["solve", m, "-H", h, "--context", "1", "--concurrency", "0",
                               "--require", "decoder-per-stage", "--method", "dp"])
    assert code == 1 and "no placement" in text
    assert "the requirements (decoder-per-stage) are what no placement meets: without them one exists" in text
