"""Speculative decoding in the plan (placer.specs.speculative): the drafter's nodes placed on the LM
head's stage (mtp-with-head) by every exact method against the brute-force oracle, checked by the
validator, MTP layers from a real config placed, validated and exported with the runtimes' own
flag names (their parsers' tables vendored from the wheels), a draft model placed beside the
target, and the published acceptance lengths."""

from __future__ import annotations

import json
import random
import shlex
import sys
from dataclasses import replace
from fractions import Fraction
from typing import get_args

import pytest
from dirs import FIXTURES, VENDORED
from oracle import solve as oracle_solve

from placer.algorithms import place
from placer.export import ExportOptions, export_mapping
from placer.mapping import dumps_mapping, read_mapping
from placer.mapping.validate import validate_mapping
from placer.planning import Placement, Requirements, SolverSettings, SpecDecoding, Targets, plan
from placer.problem.instance import make_instance
from placer.problem.placement import Status
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import fleet_from_dict, load_fleet
from placer.specs.model import load_model, model_from_dict
from placer.specs.speculative import accept_table, default_accept, with_draft
from placer.specs.workload import Workload

sys.path.insert(0, str(VENDORED))

import sglang_0_5_23_spec  # noqa: E402
import vllm_0_33_0_spec  # noqa: E402

DEEPSEEK = FIXTURES / "hf" / "deepseek-v3.json"


def _flat(literal) -> set[str]:
    out: set[str] = set()
    for a in get_args(literal):
        out |= _flat(a) if get_args(a) else {a}
    return out


def _argv(text: str) -> list[str]:
    return shlex.split("\n".join(x for x in text.splitlines() if not x.startswith("#")))


# ----------------------------------------------------------------------------- exact methods vs the oracle
def _case(seed: int):
    rng = random.Random(seed)
    layers = [{"kind": "embedding", "weight_bytes": rng.randint(2, 15)}]
    for _ in range(rng.randint(1, 3)):
        layers.append({"kind": "attention", "weight_bytes": rng.randint(5, 25), "kv_bytes_per_token": rng.randint(1, 3)})
    for k in range(rng.randint(1, 2)):
        layers.append({"kind": "mtp", "name": f"mtp.{k}", "weight_bytes": rng.randint(3, 20),
                       "kv_bytes_per_token": rng.randint(1, 2)})
    layers.append({"kind": "lm_head", "weight_bytes": rng.randint(3, 20)})
    spec = {"name": "hw", "device": {"memory": rng.randint(28, 50)},
            "fleet": {"racks": 2, "per_rack": 2, "intra_rack_latency_us": round(rng.uniform(0.5, 2), 3),
                      "inter_rack_latency_us": round(rng.uniform(2, 5), 4)}}
    return layers, spec, rng.randint(0, 2)


def _model(layers):
    """The explicit spec as placer reads it, its ``mtp`` entries made MTP nodes (kind mtp, no
    decoder index) as the model builder makes them from a checkpoint's MTP layers."""
    plain = [dict(x, kind="attention") if x["kind"] == "mtp" else x for x in layers]
    m = model_from_dict({"name": "m", "layers": plain})
    nodes = tuple(replace(x, kind="mtp", index=None) if spec["kind"] == "mtp" else x
                  for x, spec in zip(m.layers, layers))
    return replace(m, layers=nodes, num_hidden_layers=sum(x.index is not None for x in nodes))


def _instance(layers, spec, concurrency, require, mode="contiguous"):
    model = _model(layers)
    return make_instance(model, fleet_from_dict(spec), Workload(concurrency=concurrency, context_tokens=1),
                         mode=mode, require=require)


@pytest.mark.parametrize("seed", range(24))
@pytest.mark.parametrize("mode", ["contiguous", "free"])
def test_exact_methods_meet_the_optimum_with_the_drafter_on_the_head_stage(seed, mode):
    layers, spec, concurrency = _case(seed)
    n = len(layers)
    # the oracle's own reading: every MTP node on the device of the LM head (the chain's last node)
    together = [tuple(i for i, x in enumerate(layers) if x["kind"] == "mtp") + (n - 1,)]
    opt = oracle_solve(layers, spec, mode=mode, concurrency=concurrency, together=together)
    inst = _instance(layers, spec, concurrency, ("mtp-with-head",), mode)
    for method in (("cpsat", "dp") if mode == "contiguous" else ("cpsat",)):
        opts = {"time_limit": 10, "threads": 1, "seed": 0, "objective": "lex"} if method == "cpsat" else {}
        r = place(inst, method, **opts)
        if opt.devices is None:
            assert not r.feasible, (method, r.message)
            continue
        assert r.status != Status.INFEASIBLE, (method, r.message)
        if not r.feasible:
            continue
        assert len({r.assignment[i] for i in together[0]}) == 1, (method, r.assignment)
        if r.devices_proven:
            assert r.devices_used == opt.devices, (method, r.message)
        if method == "cpsat":
            assert r.proven_optimal and r.devices_used == opt.devices, r.message
            assert abs(Fraction(str(r.hop_latency_us)) - opt.latency) <= Fraction(1, 10**9), r.message


def test_an_mtp_layer_that_cannot_join_the_head_refuses_the_plan():
    """Embedding 2 B, one 6 B layer, a 3 B MTP layer and an 8 B head on 10 B devices: without the
    rule three devices place it ([embedding, layer] + [mtp] + [head]: no two neighbours beside
    these fit one device); with mtp-with-head the MTP layer must share the head's device, and
    3 + 8 = 11 B exceed its 10 B: proven infeasible by both methods."""
    layers = [{"kind": "embedding", "weight_bytes": 2},
              {"kind": "attention", "weight_bytes": 6, "kv_bytes_per_token": 1},
              {"kind": "mtp", "name": "mtp.0", "weight_bytes": 3, "kv_bytes_per_token": 1},
              {"kind": "lm_head", "weight_bytes": 8}]
    spec = {"name": "hw", "device": {"memory": 10},
            "fleet": {"racks": 1, "per_rack": 4, "intra_rack_latency_us": 1, "inter_rack_latency_us": 2}}
    loose = place(_instance(layers, spec, 0, ()), "dp")
    assert loose.devices_used == 3 and loose.assignment[2] != loose.assignment[3]
    for method in ("cpsat", "dp"):
        r = place(_instance(layers, spec, 0, ("mtp-with-head",)), method)
        assert r.status == Status.INFEASIBLE, (method, r.message)


# ----------------------------------------------------------------------------- a real config
@pytest.fixture(scope="module")
def deepseek_plan():
    """DeepSeek-V3's config.json (num_nextn_predict_layers: 1) with its MTP layer, 8-bit weights,
    on H200s as a pipeline (tp 1), planned for 3 draft tokens per step."""
    model = load_model(DEEPSEEK, mtp=True)
    fleet = load_fleet("h200")
    wl = Workload(concurrency=8, context_tokens=4096, weight_bits=8)
    req = Requirements(placement=Placement(degrees=(1,)), speculation=SpecDecoding(tokens=3))
    return model, plan(model, fleet, wl, req, SolverSettings(method="dp"))


def test_deepseek_mtp_layer_has_its_decoder_layer_and_projection_bytes():
    model = load_model(DEEPSEEK, mtp=True)
    h = json.loads(DEEPSEEK.read_text())["hidden_size"]
    mtp = next(x for x in model.layers if x.name == "mtp.0")
    last = next(x for x in model.layers if x.name == "layers.60")
    # DeepSeek-V3's MTP module: a decoder layer of the MoE type plus enorm, hnorm (h each), the
    # 2h -> h eh_proj and the shared head's norm (h)
    assert mtp.params - last.params == 2 * h * h + 3 * h
    assert mtp.kv_elements_per_token == last.kv_elements_per_token == 512 + 64   # the MLA latent and rope key


def test_deepseek_mtp_on_the_last_stage_validated(deepseek_plan, tmp_path):
    model, planned = deepseek_plan
    doc = planned.mapping
    assert planned.result.feasible and planned.result.devices_proven
    assert doc["require"] == ["mtp-with-head"] and doc["model"]["mtp"] is True
    last = doc["stages"][-1]
    assert "mtp.0" in last["layers"] and "lm_head" in last["layers"]
    assert all("mtp.0" not in st["layers"] for st in doc["stages"][:-1])
    assert doc["speculative"]["method"] == "mtp" and doc["speculative"]["tokens"] == 3
    stated = planned.to_dict()          # the plan states the drafter's rule and the speculation
    assert stated["require"] == ["mtp-with-head"] and stated["speculative"] == doc["speculative"]
    assert doc["speculative"]["accept"] == 2.18          # lm-sys MTP blog, 3-token window
    # past one rank the drafter holds its own copy of the embedding on the last rank: vocab x h
    # parameters at 8 bits, as the target's embedding
    cfg = json.loads(DEEPSEEK.read_text())
    assert "mtp.embed_tokens" in last["layers"] and doc["model"]["draft_embedding"] is True
    placed = planned.instance.model
    copy = next(x for x in placed.layers if x.name == "mtp.embed_tokens")
    assert copy.params == cfg["vocab_size"] * cfg["hidden_size"] == 129280 * 7168
    # written and read back: the MTP layer is reloaded from the config the mapping names
    path = tmp_path / "ds.json"
    path.write_text(dumps_mapping(doc))
    back = read_mapping(path)
    assert validate_mapping(back) == []
    # moved off the head's stage, the validator reports it (beside the bytes it no longer matches)
    moved = json.loads(json.dumps(back))
    moved["stages"][-1]["layers"].remove("mtp.0")
    moved["stages"][-2]["layers"].append("mtp.0")
    kinds = {v.kind: v.message for v in validate_mapping(moved)}
    assert "mtp-with-head: mtp.0 is on stage" in kinds["requirement_violated"]
    # without the drafter's embedding copy a pipeline is short of the bytes the runtimes hold
    short = json.loads(json.dumps(back))
    short["model"].pop("draft_embedding")
    short["stages"][-1]["layers"].remove("mtp.embed_tokens")
    short["route"].pop(short["route"].index(short["stages"][-1]["device"]))
    messages = [v.message for v in validate_mapping(short) if v.kind == "requirement_violated"]
    assert any("mtp.embed_tokens" in m and "not placed" in m for m in messages), messages


def test_deepseek_exports_use_the_runtimes_own_flags(deepseek_plan):
    model, planned = deepseek_plan
    doc = planned.mapping
    served = ExportOptions(served_model="deepseek-ai/DeepSeek-V3")
    vllm = _argv(export_mapping(doc, "vllm", model=model, options=served).text)
    config = json.loads(vllm[vllm.index("--speculative-config") + 1])      # vLLM: optional_type(json.loads)
    assert config == {"method": "mtp", "num_speculative_tokens": 3}
    assert set(config) <= set(vllm_0_33_0_spec.SPECULATIVE_CONFIG_FIELDS)
    assert config["method"] in _flat(vllm_0_33_0_spec.SpeculativeMethod)
    # vLLM replaces every per-model MTP name (deepseek_mtp, ...) by mtp with a deprecation warning
    assert config["method"] == "mtp" or config["method"] not in _flat(vllm_0_33_0_spec.MTPModelTypes)

    sglang = _argv(export_mapping(doc, "sglang", model=model, options=served).text)
    flags = {a for a in sglang if a.startswith("--speculative")}
    names = {sglang_0_5_23_spec._field_to_cli_name(f) for f in sglang_0_5_23_spec.SPEC_FIELDS}
    assert flags and flags <= names
    algorithm = sglang[sglang.index("--speculative-algorithm") + 1]
    assert algorithm == "EAGLE" and algorithm in sglang_0_5_23_spec.SpeculativeAlgorithm.__members__
    assert sglang[sglang.index("--speculative-num-steps") + 1] == "3"
    assert sglang[sglang.index("--speculative-num-draft-tokens") + 1] == "4"      # a chain: k + 1 positions
    # SGLang takes DeepSeek-V3's MTP draft from the target checkpoint: no draft path
    assert "--speculative-draft-model-path" not in sglang


# ----------------------------------------------------------------------------- a draft model
DRAFT = """\
name: tiny-draft
layers:
  - {kind: attention, params: 1000, kv_bytes_per_token: 64}
  - {kind: lm_head, weight_bytes: 40000000}
"""


def test_a_draft_model_is_placed_with_the_head_and_exported(tmp_path):
    draft_path = tmp_path / "draft.yaml"
    draft_path.write_text(DRAFT)
    draft = load_model(draft_path)
    target = load_model("llama-3.1-8b")
    merged = with_draft(target, draft)
    names = [x.name for x in merged.layers]
    assert names[-3:] == ["draft.layers.0", "draft.lm_head", "lm_head"] and merged.is_chain
    assert merged.num_hidden_layers == target.num_hidden_layers
    assert next(x for x in merged.layers if x.name == "draft.layers.0").kind == "mtp"

    fleet = load_fleet("h100")
    wl = Workload(concurrency=4, context_tokens=2048)
    req = Requirements(placement=Placement(degrees=(1,)),
                       speculation=SpecDecoding(tokens=4, method="eagle3", draft_model=draft))
    planned = plan(target, fleet, wl, req, SolverSettings(method="dp"))
    doc = planned.mapping
    assert doc["speculative"]["draft"]["name"] == "tiny-draft"
    assert doc["speculative"]["accept"] == 3.08         # EAGLE-3 on Llama-3.1-8B, vLLM, k = 4
    last = doc["stages"][-1]["layers"]
    assert {"draft.layers.0", "draft.lm_head", "lm_head"} <= set(last)
    path = tmp_path / "m.json"
    path.write_text(dumps_mapping(doc))
    back = read_mapping(path)
    assert validate_mapping(back) == []          # the draft reloaded from the file the mapping names
    text = export_mapping(back, "vllm", options=ExportOptions(served_draft_model="org/eagle3")).text
    config = json.loads(_argv(text)[_argv(text).index("--speculative-config") + 1])
    assert config == {"method": "eagle3", "model": "org/eagle3", "num_speculative_tokens": 4}
    sg = _argv(export_mapping(back, "sglang", options=ExportOptions(served_draft_model="org/eagle3")).text)
    assert sg[sg.index("--speculative-algorithm") + 1] == "EAGLE3"
    assert sg[sg.index("--speculative-draft-model-path") + 1] == "org/eagle3"


def test_the_draft_weights_and_kv_are_counted_on_the_last_stage(tmp_path):
    """The same plan with and without the draft: the last stage's weights grow by exactly the
    draft's bytes (1,000 parameters at 16 bits + the 40 MB head) and its KV per request by the
    draft layer's 64 B per token."""
    draft_path = tmp_path / "draft.yaml"
    draft_path.write_text(DRAFT)
    draft = load_model(draft_path)
    target = load_model("llama-3.1-8b")
    fleet = load_fleet("h100")
    wl = Workload(concurrency=4, context_tokens=2048)
    base = plan(target, fleet, wl, Requirements(placement=Placement(degrees=(1,))),
                SolverSettings(method="dp")).mapping
    with_d = plan(target, fleet, wl, Requirements(placement=Placement(degrees=(1,)), speculation=SpecDecoding(tokens=2, method="draft_model", draft_model=draft, accept=2.0)), SolverSettings(method="dp"))
    doc = with_d.mapping
    assert len(doc["stages"]) == len(base["stages"]) == 1
    assert doc["stages"][-1]["bytes"]["weights"] - base["stages"][-1]["bytes"]["weights"] == 1000 * 2 + 40_000_000
    assert doc["speculative"]["accept"] == 2.0 and doc["speculative"]["accept_source"] == "given"


# ----------------------------------------------------------------------------- acceptance defaults and checks
def test_default_accept_takes_the_largest_measured_k_not_above():
    ds = load_model(DEEPSEEK, mtp=True)
    assert default_accept(ds, "mtp", 3)[0] == 2.18
    assert default_accept(ds, "mtp", 6)[0] == 2.44       # measured at 4: the largest k up to 6
    assert default_accept(ds, "mtp", 2)[0] == 1.875      # the tech report's one-token figure
    llama = load_model("llama-3.1-8b")
    assert default_accept(llama, "eagle3", 1) is None     # first measured at k = 2
    assert default_accept(llama, "eagle3", 9)[0] == 3.54
    assert default_accept(llama, "mtp", 3) is None
    assert all(r.source and r.status in ("V", "S", "U", "D") for r in accept_table())


def test_speculation_requests_are_checked():
    with pytest.raises(InvalidSpec) as err:
        Requirements(speculation=SpecDecoding(accept=2.0))
    assert err.value.field == "spec_accept"
    with pytest.raises(InvalidSpec) as err:
        Requirements(speculation=SpecDecoding(tokens=2, accept=3.5))
    assert err.value.field == "spec_accept" and "spec_tokens + 1 = 3" in err.value.message
    with pytest.raises(InvalidSpec) as err:
        plan(load_model("llama-3.1-8b"), load_fleet("h100"), Workload(concurrency=1, context_tokens=128),
             Requirements(speculation=SpecDecoding(tokens=2)), SolverSettings(method="dp"))
    assert err.value.field == "spec_method" and "no MTP layers" in err.value.message


def test_solve_and_export_from_the_command_line(run_cli, tmp_path):
    out = tmp_path / "ds.json"
    # --spec-tokens with the model's own MTP layers places them (no --mtp needed)
    code, stdout, _ = run_cli(["solve", str(DEEPSEEK), "-H", "h200", "--weight-bits", "8", "--tp", "8",
                               "--context", "4096", "--concurrency", "8", "--method", "dp", "--spec-tokens", "2",
                               "-q", "-o", str(out)])
    assert code == 0, stdout
    assert "speculative decoding: 2 draft token(s) per step with the model's MTP layers" in stdout
    assert "acceptance length 1.875" in stdout
    # one stage of 8 (the whole model fits one group): the drafter shares the target's embedding
    assert "mtp.embed_tokens" not in out.read_text()
    code, stdout, _ = run_cli(["export", str(out), "--format", "vllm"])
    assert code == 0
    assert json.loads(_argv(stdout)[_argv(stdout).index("--speculative-config") + 1]) == {
        "method": "mtp", "num_speculative_tokens": 2}


def test_split_plan_places_every_drafter_shard_with_the_head():
    model = load_model(DEEPSEEK, mtp=True)
    wl = Workload(concurrency=4, context_tokens=8192, weight_bits=8)
    planned = plan(model, load_fleet("wse-3t"), wl,
                   Requirements(placement=Placement(mode="split"), speculation=SpecDecoding(tokens=1)),
                   SolverSettings(method="dp"))
    doc = planned.mapping
    assert len(doc["stages"]) > 1 and validate_mapping(doc) == []
    last = set(doc["stages"][-1]["layers"])
    drafter = [n for st in doc["stages"] for n in st["layers"] if n.startswith("mtp.")]
    assert {"mtp.0.shard0", "mtp.embed_tokens.shard0"} <= set(drafter) <= last


def test_vllm_and_sglang_rules_put_the_drafter_with_the_head():
    from placer.problem.runtime_rules import runtime_requirements

    with_mtp, plain = load_model(DEEPSEEK, mtp=True), load_model(DEEPSEEK)
    for runtime in ("vllm", "sglang"):
        assert "mtp-with-head" in runtime_requirements(runtime, with_mtp)
        assert "mtp-with-head" not in runtime_requirements(runtime, plain)
    # Megatron-LM accepts MTP layers off the last rank ("MTP standalone")
    assert "mtp-with-head" not in runtime_requirements("megatron", with_mtp)


def test_a_speculative_mapping_is_simulated_with_its_drafts(deepseek_plan):
    """The mapping's speculation (3 draft tokens, acceptance length 2.18) is the simulation's unless
    the caller says otherwise; the drafter's nodes (the MTP layer and its embedding copy) run as
    draft passes only, on the last stage."""
    from placer.simulate.des import simulate_mapping
    from placer.simulate.speculative import target_and_draft

    model, planned = deepseek_plan
    doc = planned.mapping
    res = simulate_mapping(doc, model=model, requests=2, output_tokens=4, decode_only=True)
    assert (res.spec_k, res.spec_accept) == (3, 2.18)
    plain = simulate_mapping(doc, model=model, requests=2, output_tokens=4, decode_only=True, spec_k=0)
    assert plain.spec_k == 0
    inst = planned.instance
    from placer.simulate.des import Simulation, Traffic

    sim = Simulation(inst, [inst.device_index[d] for d in doc["route"]],
                     Traffic(requests=1, output_tokens=2, decode_only=True))
    target, draft = target_and_draft(inst, sim.segs)
    drafted = {inst.nodes[i].name for s in draft for i in s.nodes}
    assert drafted == {"mtp.0", "mtp.embed_tokens"}
    assert all(inst.nodes[i].name not in drafted for s in target for i in s.nodes)


def test_a_speed_floor_is_judged_with_the_speculation_it_plans(tmp_path):
    """A speed floor planned with an EAGLE-3 draft simulates its replica with that draft (4 tokens,
    the published 3.08): the chosen replica's figures are those of an independent run with the
    speculation given explicitly, and faster per user than the same placement without it."""
    from placer.simulate import Serving, Traffic, simulate

    draft_path = tmp_path / "draft.yaml"
    draft_path.write_text(DRAFT)
    target = load_model("llama-3.1-8b")
    req = Requirements(placement=Placement(degrees=(1,)), targets=Targets(min_user_tps=10),
                       speculation=SpecDecoding(tokens=4, method="eagle3",
                                                draft_model=load_model(draft_path)))
    planned = plan(target, load_fleet("h100"), Workload(concurrency=4, context_tokens=2048), req,
                   SolverSettings(method="dp"))
    sim = planned.simulation
    assert (sim.spec_k, sim.spec_accept) == (4, 3.08)
    load, assignment = planned.load_per_replica, planned.solved.per_group.assignment
    again = simulate(planned.instance, assignment,
                     Traffic(requests=load, max_live=load, output_tokens=req.targets.output_tokens),
                     Serving(spec_k=4, spec_accept=3.08))
    assert again.per_user_tokens_per_s == sim.per_user_tokens_per_s
    plain = simulate(planned.instance, assignment,
                     Traffic(requests=load, max_live=load, output_tokens=req.targets.output_tokens),
                     Serving(spec_k=0))
    assert plain.spec_k == 0 and plain.per_user_tokens_per_s < sim.per_user_tokens_per_s


def test_a_draft_pass_pays_the_moe_cost_of_its_own_layers_only(deepseek_plan):
    """The MTP pass runs one routed-expert layer (mtp.0), so it pays one per-MoE-layer cost, not
    those of every layer on its stage; the verify pass pays the target's 58 (61 layers, the first 3
    dense)."""
    from placer.simulate.des import Simulation, Traffic
    from placer.simulate.speculative import target_and_draft

    _model, planned = deepseek_plan
    inst, doc = planned.instance, planned.mapping
    sim = Simulation(inst, [inst.device_index[d] for d in doc["route"]],
                     Traffic(requests=1, output_tokens=2, decode_only=True))
    target, draft = target_and_draft(inst, sim.segs)
    assert sum(s.moe_layers for s in draft) == 1
    assert sum(s.moe_layers for s in target) == 58
    assert sum(s.moe_layers for s in sim.segs) == 59
    (last,) = [s for s in draft]
    per_moe = last.overhead_moe_layer_us
    assert per_moe > 0 and last.fixed_us(1) == pytest.approx(
        last.overhead_stage_us + (last.overhead_layer_us + last.overhead_layer_request_us) * last.layers + per_moe)


def test_where_speculation_stops_paying(deepseek_plan, tmp_path, run_cli):
    """The gain at each load is the ratio of two independent runs (with and without the drafts);
    it stops paying at the first load whose gain is below 1; the command prints the same rows."""
    from placer.simulate import Serving, Traffic, simulate
    from placer.simulate.spec_gain import speculation_gain

    model, planned = deepseek_plan
    inst, assignment = planned.instance, planned.solved.per_group.assignment
    gain = speculation_gain(inst, assignment, spec_k=3, spec_accept=2.18, cap=8, output_tokens=8)
    assert [r["live"] for r in gain.rows] == [1, 2, 4, 8]
    for r in gain.rows:
        on = simulate(inst, assignment,
                      Traffic(requests=r["live"], max_live=r["live"], output_tokens=8, decode_only=True),
                      Serving(spec_k=3, spec_accept=2.18))
        off = simulate(inst, assignment,
                       Traffic(requests=r["live"], max_live=r["live"], output_tokens=8, decode_only=True),
                       Serving(spec_k=0))
        assert r["gain"] == pytest.approx(on.aggregate_tokens_per_s / off.aggregate_tokens_per_s, rel=1e-12)
        assert (r["per_user_with"], r["per_user_without"]) == (on.per_user_tokens_per_s, off.per_user_tokens_per_s)
    below = [r["live"] for r in gain.rows if r["gain"] < 1]
    assert gain.stops_paying_at == (below[0] if below else None)
    path = tmp_path / "ds.json"
    path.write_text(dumps_mapping(planned.mapping))
    code, out, err = run_cli(["simulate", path, "--spec-gain", "--requests", 8, "--output-tokens", 8, "--json",
                              "--model", DEEPSEEK])
    assert code == 0, err
    assert [round(r["gain"], 9) for r in json.loads(out)["rows"]] == [round(r["gain"], 9) for r in gain.rows]


def test_a_floor_only_drafts_reach_is_planned_with_them(tmp_path):
    """A floor 30% above the fastest plain single-request speed: without drafts no placement meets
    it (said with the fastest speed); with the EAGLE-3 draft (4 tokens, 3.08) one does, its speed
    simulated with the drafts."""
    draft_path = tmp_path / "draft.yaml"
    draft_path.write_text(DRAFT)
    target = load_model("llama-3.1-8b")
    fleet, wl = load_fleet("h100"), Workload(concurrency=2, context_tokens=2048)
    plain = plan(target, fleet, wl,
                 Requirements(placement=Placement(degrees=(1,)),
                              targets=Targets(min_user_tps=1.0)), SolverSettings(method="dp"))
    floor = 1.3 * plain.speed.fastest.alone_tokens_per_s
    none = plan(target, fleet, wl,
                Requirements(placement=Placement(degrees=(1,)),
                             targets=Targets(min_user_tps=floor)), SolverSettings(method="dp"))
    assert not none.feasible and "cannot be met" in none.message
    req = Requirements(placement=Placement(degrees=(1,)), targets=Targets(min_user_tps=floor),
                       speculation=SpecDecoding(tokens=4, method="eagle3",
                                                draft_model=load_model(draft_path)))
    spec = plan(target, fleet, wl, req, SolverSettings(method="dp"))
    assert spec.feasible, spec.message
    assert spec.simulation.spec_k == 4 and spec.simulation.per_user_tokens_per_s >= floor
