"""Attention data parallelism (placer.problem.reductions.attention_dp): per-rank bytes, the plan, the mapping, the
validator's own rule, the simulator's all-to-all and the exports' flags.

Hand figures for DeepSeek-V3 (models/deepseek-v3.yaml, h = 7168, weights 8-bit so one byte a
parameter, KV 16-bit) at 128k context:

* an MoE layer whole: MLA mixer 187,107,328 + 256 routed experts x 3 h 2048 (44,040,192 each)
  + one shared expert 44,040,192 + router 256 h + 256 bias + norms 2 h;
* at tp 8 (experts tensor-split): mixer 7168*1536 + 1536 + 1536*16*192 + 7168*576 + 512
  + 512*16*256 + 16*128*7168 = 36,636,672, experts 256 x 3 h 256, shared 3 h 256, router, norms;
* with attention data parallelism over 8: the mixer, router, shared expert and norms whole, 32
  routed experts;
* KV per request per layer: (512 + 64) x 2 B x 131,072 = 150,994,944 B, whole on a rank in both
  layouts; at 1,024 live requests a TP rank keeps all 1,024, a DP rank its 128.
"""

from __future__ import annotations

import pytest
from dirs import FIXTURES

from placer import plan
from placer.cli.common import load_inputs
from placer.export import ExportOptions, export_mapping
from placer.mapping import check_mapping
from placer.mapping.validate import validate_mapping
from placer.planning.layouts import device_layouts
from placer.planning.requirements import Placement, Requirements, SolverSettings, Targets
from placer.problem.instance import Layout, make_instance
from placer.simulate.cost import group_collectives
from placer.specs.errors import InvalidSpec

H = 7168
EXPERT = 3 * H * 2048                                   # one routed (or the shared) expert: 44,040,192
ROUTER = 256 * H + 256
NORMS = 2 * H
MLA = 187_107_328
MLA_TP8 = 7168 * 1536 + 1536 + 1536 * 16 * 192 + 7168 * 576 + 512 + 512 * 16 * 256 + 16 * 128 * 7168
MOE_TP8 = MLA_TP8 + 256 * 3 * H * 256 + 3 * H * 256 + ROUTER + NORMS
MOE_DP8 = MLA + 32 * EXPERT + EXPERT + ROUTER + NORMS
DENSE = MLA + 3 * H * 18432 + NORMS                     # dense MLP layers 0-2, whole on a DP rank
EMBED = 129280 * H
HEAD = 129280 * H + H                                   # untied LM head and the final norm
KV = 576 * 2 * 131072
CAPACITY = 141_000_000_000 - (14_100_000_000 + 3_500_000_000) - 2 * H * 2   # h200 reserve, activations


def test_hand_figures_are_what_they_claim():
    assert MLA_TP8 == 36_636_672
    assert MOE_TP8 == 1_453_277_440
    assert MOE_DP8 == 1_642_283_264
    assert KV == 150_994_944
    assert DENSE == 583_483_392


@pytest.fixture(scope="module")
def v3_1024():
    return load_inputs("deepseek-v3", "h200", racks=1, concurrency=1024, context="128k")


def test_one_mla_moe_layer_per_rank_at_8_with_attention_dp_and_with_tp(v3_1024):
    m, fleet, wl = v3_1024
    tp = make_instance(m, fleet, wl, layout=Layout(tp=8))
    dp = make_instance(m, fleet, wl, layout=Layout(tp=8, attention_dp=True))
    i = [x.name for x in tp.nodes].index("layers.3")
    assert (tp.weight_bytes[i], tp.request_bytes[i]) == (MOE_TP8, KV)
    assert (dp.weight_bytes[i], dp.request_bytes[i]) == (MOE_DP8, KV)
    # the rank's requests: all 1,024 under TP, ceil(1024 / 8) = 128 under attention DP
    assert tp.workload.concurrency == 1024 and dp.workload.concurrency == 128
    assert tp.demand_bytes[i] == MOE_TP8 + 1024 * KV == 156_072_100_096
    assert dp.demand_bytes[i] == MOE_DP8 + 128 * KV == 20_969_636_096
    assert dp.served_workload.concurrency == 1024
    # a dense layer is whole on a DP rank; its KV too
    assert (dp.weight_bytes[1], dp.request_bytes[1]) == (DENSE, KV)
    assert dp.capacity_bytes[0] == CAPACITY
    # a group's concurrency ceiling is 8 x the rank's: a rank with one MoE layer holds
    # floor((cap - w) / kv) requests
    rank = (CAPACITY - MOE_DP8) // KV
    assert dp.group_requests(dp.max_concurrency([i], 0)) == 8 * rank


def test_uneven_requests_put_the_extra_ones_on_the_heaviest_rank(v3_1024):
    m, fleet, wl = v3_1024
    dp = make_instance(m, fleet, wl.replace(concurrency=1025), layout=Layout(tp=8, attention_dp=True))
    assert dp.workload.concurrency == 129                 # ceil(1025 / 8)
    assert dp.with_live_requests(17).workload.concurrency == 3


@pytest.fixture(scope="module")
def dp_plan():
    """DeepSeek-V3 at 256 live requests of 128k on 5 nodes of 8 H200, attention-DP at tp 8."""
    m, fleet, wl = load_inputs("deepseek-v3", "h200", racks=5, concurrency=256, context="128k")
    p = plan(m, fleet, wl, Requirements(placement=Placement(attention_dp=True, degrees=(8,))),
             SolverSettings(method="dp"))
    return m, fleet, p


def _stage_ceiling(layers: list[str]) -> int:
    """Live requests a stage of an attention-DP group of 8 holds, from the hand figures."""
    w = {"embedding": EMBED, "lm_head": HEAD}
    weights = sum(w.get(n) or (DENSE if int(n.split(".")[1]) < 3 else MOE_DP8) for n in layers)
    per = KV * sum(1 for n in layers if n.startswith("layers."))
    return 8 * ((CAPACITY - weights) // per)


def test_the_mapping_records_attention_dp_with_the_ranks_bytes(dp_plan):
    m, fleet, p = dp_plan
    doc = p.mapping
    check_mapping(doc)
    assert doc["parallel"]["attention_dp"] is True and doc["parallel"]["tp"] == doc["parallel"]["ep"] == 8
    assert doc["workload"]["concurrency"] == 256
    for st in doc["stages"]:
        kv_layers = sum(1 for n in st["layers"] if n.startswith("layers."))
        assert st["bytes"]["kv_reserve"] == 32 * KV * kv_layers         # ceil(256 / 8) requests a rank
        assert st["max_concurrency"] == _stage_ceiling(st["layers"])
    assert doc["summary"]["concurrency_ceiling"] == min(_stage_ceiling(st["layers"]) for st in doc["stages"])
    assert validate_mapping(doc, model=m, fleet=fleet) == []


def test_the_validator_recomputes_the_ranks_bytes_itself(dp_plan):
    m, fleet, p = dp_plan
    doc = p.mapping
    told = {**doc, "stages": [dict(doc["stages"][0], max_concurrency=doc["stages"][0]["max_concurrency"] + 8),
                              *doc["stages"][1:]]}
    assert {v.kind for v in validate_mapping(told, model=m, fleet=fleet)} == {"concurrency_overstated"}
    # read as tensor parallel, every rank would keep all 256 requests' latents: over capacity
    as_tp = {**doc, "parallel": {k: v for k, v in doc["parallel"].items() if k != "attention_dp"}}
    kinds = {v.kind for v in validate_mapping(as_tp, model=m, fleet=fleet)}
    assert {"over_capacity", "bytes_mismatch"} <= kinds


def test_exports_give_the_runtimes_data_parallel_flags(dp_plan):
    m, fleet, p = dp_plan
    doc = p.mapping
    ceiling = doc["summary"]["concurrency_ceiling"]
    vllm = export_mapping(doc, "vllm", model=m, fleet=fleet, options=ExportOptions(force=True)).text.split()
    assert "--data-parallel-size" in vllm and vllm[vllm.index("--data-parallel-size") + 1] == "8"
    assert "--enable-expert-parallel" in vllm and "--tensor-parallel-size" not in vllm
    assert vllm[vllm.index("--max-num-seqs") + 1] == str(ceiling // 8)      # per engine
    sgl = export_mapping(doc, "sglang", model=m, fleet=fleet, options=ExportOptions(force=True)).text.split()
    for flag, value in (("--tp-size", "8"), ("--attn-dp-size", "8"), ("--ep-size", "8"), ("--moe-dense-tp-size", "1")):
        assert sgl[sgl.index(flag) + 1] == value
    assert "--enable-dp-lm-head" in sgl and "--enable-dp-attention" not in sgl and "--dp-size" not in sgl


def test_the_simulator_costs_dispatch_and_combine_only(dp_plan):
    _m, _f, p = dp_plan
    inst, r = p.instance, p.result
    d = r.assignment[[x.name for x in inst.nodes].index("layers.10")]
    nodes = [i for i, a in enumerate(r.assignment) if a == d]
    moe = sum(1 for i in nodes if inst.nodes[i].ffn == "moe")
    (coll,) = group_collectives(inst, d, nodes)
    assert coll.kind == "all_to_all" and coll.group_size == 8 and coll.count == 2 * moe
    assert coll.bytes_per_token == 8 * H * 2              # hidden state at 16 bits to 8 experts
    tp = make_instance(*load_inputs("deepseek-v3", "h200", racks=5, concurrency=16, context="128k"), layout=Layout(tp=8, ep=True))
    kinds = {c.kind for c in group_collectives(tp, 0, nodes)}
    assert kinds == {"all_reduce", "all_to_all"}          # TP keeps its all-reduces


@pytest.mark.slow
def test_deepseek_v3_1024_requests_of_128k_on_1024_h200():
    """13 stages of 8: a stage holds at most 5 MoE layers (6 x 20,969,636,096 B > 123,399,971,328 B),
    a stage with a dense layer at most 4 more (19,910,836,224 + 5 x 20,969,636,096 > capacity) and
    the one with all three dense layers and the embedding 2; 12 stages hold at most 57 of the 58
    MoE layers either way, and 13 hold them (the LM head beside 5 MoE layers fits)."""
    m, fleet, wl = load_inputs("deepseek-v3", "h200", racks=128, concurrency=1024, context="128k")
    assert len(fleet.available) == 1024
    solver = SolverSettings(method="dp")
    with_dp = plan(m, fleet, wl, Requirements(placement=Placement(degrees=(8,))),
                   solver)        # attention_dp None: tried
    assert with_dp.feasible and with_dp.instance.attention_dp
    assert with_dp.devices == 104 and with_dp.result.devices_proven
    assert with_dp.result.concurrency_ceiling >= 1024
    assert validate_mapping(with_dp.mapping, model=m, fleet=fleet) == []
    tried = {s.instance.attention_dp: s.result.feasible for s in with_dp.tried}
    assert tried == {False: False, True: True}
    # under TP every rank keeps all 1,024 latents of a layer, more than a rank holds at any degree
    assert 1024 * KV > CAPACITY
    without = plan(m, fleet, wl, Requirements(placement=Placement(attention_dp=False, degrees=(8,))), solver)
    assert not without.feasible and without.result.status == "infeasible"


def test_layouts_and_requirements_refuse_what_cannot_run():
    m, fleet, _ = load_inputs("llama-3.1-8b", "h200", racks=1)
    found = device_layouts(m, fleet, attention_dp=True)
    assert found.attention_dp == () and not found.allowed
    assert all("no MoE layers" in why for why in found.refused_by_label().values())
    with pytest.raises(InvalidSpec, match="attention_dp"):
        Requirements(placement=Placement(attention_dp=True, mode="split"))


def test_solve_attention_dp_flag(run_cli):
    code, out, err = run_cli(["solve", "deepseek-v3", "--hardware", "h200", "--racks", "5", "--concurrency", "256",
                              "--tp", "8", "--attention-dp", "--method", "dp", "--json"])
    assert code == 0, err
    import json

    doc = json.loads(out)
    assert doc["parallel"]["attention_dp"] is True
    assert doc["summary"]["concurrency_ceiling"] % 8 == 0


def test_the_validators_rule_shares_no_code_with_the_solvers():
    import ast
    from pathlib import Path

    import placer

    root = Path(placer.__file__).parent
    for rel in ("mapping/dp_ranks.py", "mapping/validate.py"):
        tree = ast.parse((root / rel).read_text())
        names = {(n.module or "") + "." + a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                 for a in n.names}
        assert not any("attention_dp" in x or "parallel" in x or "algorithms" in x for x in names), rel


def test_cpsat_concurrency_level_counts_live_requests_of_the_group():
    """CP-SAT maximises the rank's requests; the level reports the group's, 8 times as many, and
    its proof carries over (a rank holding k lets the group hold 8 k and no more)."""
    m, fleet, wl = load_inputs("deepseek-v3", "h200", racks=5, concurrency=256, context="128k")
    p = plan(m, fleet, wl, Requirements(placement=Placement(attention_dp=True, degrees=(8,))),
             SolverSettings(method="cpsat", time_limit=30))
    level = {lv.name: lv for lv in p.result.levels}["concurrency"]
    hand = min(_stage_ceiling(st["layers"]) for st in p.mapping["stages"])
    assert level.value == p.result.concurrency_ceiling == hand
    assert level.proven and level.bound == hand and hand % 8 == 0


def test_compare_lists_attention_dp_rows_with_the_groups_throughput(monkeypatch):
    import placer.simulate
    from placer.planning.studies.compare import compare_degrees

    calls = []
    real = placer.simulate.simulate

    def recording(inst, assignment, traffic, *settings):
        res = real(inst, assignment, traffic, *settings)
        calls.append((inst.attention_dp, traffic.requests, res))
        return res

    monkeypatch.setattr(placer.simulate, "simulate", recording)
    monkeypatch.setattr(placer.simulate.des, "simulate", recording)     # the group's run, simulate_group's
    m, fleet, wl = load_inputs("deepseek-v3", "h200", racks=5, concurrency=256, context="128k")
    doc = compare_degrees(m, fleet, wl, Requirements(placement=Placement(degrees=(8,), expert_parallel=True, attention_dp=True)), SolverSettings(time_limit=20), output_tokens=4)
    (tp_row, dp_row) = doc["degrees"]
    assert tp_row["status"] == "infeasible" and "attention_dp" not in tp_row
    assert dp_row["attention_dp"] is True and dp_row["devices_used"] == 32 and dp_row["live_requests"] == 256
    # the heaviest rank's 32 requests are simulated; the group serves 8 ranks' worth
    (rank,) = [res for dp, n, res in calls if dp and n == 32]
    assert dp_row["aggregate_tokens_per_s"] == pytest.approx(8 * rank.aggregate_tokens_per_s)
    assert dp_row["per_user_tokens_per_s"] == pytest.approx(rank.per_user_tokens_per_s)


def test_simulating_the_mapping_reports_the_group(dp_plan):
    from placer.simulate import Traffic, simulate
    from placer.simulate.des import simulate_mapping

    m, fleet, p = dp_plan
    inst, r = p.instance, p.result
    rank = simulate(inst, r.assignment, Traffic(requests=32, max_live=32, output_tokens=4))
    group = simulate_mapping(p.mapping, model=m, hardware=fleet, requests=256, max_live=256, output_tokens=4)
    assert group.live_requests == 8 * rank.live_requests == 256
    assert group.aggregate_tokens_per_s == pytest.approx(8 * rank.aggregate_tokens_per_s)
    assert group.per_user_tokens_per_s == pytest.approx(rank.per_user_tokens_per_s)
    assert group.power_w == rank.power_w            # every device of every group, counted once by the simulator
    assert group.tokens_per_s_per_mw == pytest.approx(8 * rank.tokens_per_s_per_mw)


def test_an_infeasible_attention_dp_plan_says_what_fits_in_live_requests_of_the_group():
    m, fleet, wl = load_inputs("deepseek-v3", "h200", racks=1, concurrency=1024, context="128k")
    p = plan(m, fleet, wl, Requirements(placement=Placement(attention_dp=True, degrees=(8,))),
             SolverSettings(method="dp"))
    assert not p.feasible
    # one group holds every layer: a rank keeps all weights but 7/8 of the routed experts and
    # floor(free / (61 x KV)) = 2 requests, so the group holds 16
    weights = EMBED + 3 * DENSE + 58 * MOE_DP8 + HEAD
    assert (CAPACITY - weights) // (61 * KV) == 2
    text = p.explain(time_limit=10)
    assert "1024 live requests" in text and "128 a rank" in text
    assert "largest feasible concurrency: 16\n" in text + "\n"


@pytest.mark.parametrize("fmt", ["megatron", "torch", "json"])
def test_formats_without_attention_dp_refuse_such_a_plan(dp_plan, fmt):
    from placer.export import ExportRefused

    m, fleet, p = dp_plan
    with pytest.raises(ExportRefused, match="attention data parallelism"):
        export_mapping(p.mapping, fmt, model=m, fleet=fleet, options=ExportOptions(force=True))


def test_weights_kept_in_stored_formats_by_hand_under_both_rules():
    """DeepSeek-V3 as stored (fp8 128x128 blocks with fp32 scales, bf16 router and norms) at attention
    DP 8: an MoE layer's rank holds 32 of the 256 experts, each at its stored bytes, and everything
    else whole; the solver's rule and the validator's agree, and the instance builds."""
    import json

    from placer.mapping.dp_ranks import dp_rank_refusal, dp_rank_weight_bytes
    from placer.problem.reductions.attention_dp import dp_weight_bytes_per_rank
    from placer.specs.hf import spec_from_hf_config
    from placer.specs.model import model_from_dict
    from placer.specs.workload import workload_for

    cfg = json.loads((FIXTURES / "hf" / "deepseek-v3.json").read_text())
    m = model_from_dict(spec_from_hf_config(cfg, "config.json"))
    stored = workload_for(m)
    assert stored.weights_as_stored
    assert dp_rank_refusal(m.layers, 8, stored) is None
    x, h = next(y for y in m.layers if y.name == "layers.3"), 7168

    def fp8(rows, cols):                                      # 1 byte a weight, a 4-byte scale a 128x128 block
        return rows * cols + -(-rows // 128) * -(-cols // 128) * 4

    expert = 2 * fp8(2048, 7168) + fp8(7168, 2048)
    mla = (fp8(1536, 7168) + fp8(24576, 1536) + fp8(576, 7168) + fp8(32768, 512) + fp8(7168, 16384)
           + 2 * (1536 + 512))                                # q_a, q_b, kv_a, kv_b, o; the two latent norms in bf16
    router = 2 * (256 * 7168 + 256)
    shared = 2 * fp8(2048, 7168) + fp8(7168, 2048)
    hand = mla + router + shared + 32 * expert + 2 * 2 * h
    assert dp_weight_bytes_per_rank(x, h, stored, 8) == hand == dp_rank_weight_bytes(x, h, stored, 8)
    _, fleet, _ = load_inputs("deepseek-v3", "h200", racks=1)
    assert make_instance(m, fleet, stored, layout=Layout(tp=8, attention_dp=True)).attention_dp


def test_a_runtime_without_attention_dp_is_refused_with_it():
    with pytest.raises(InvalidSpec, match="megatron has no attention data parallelism"):
        Requirements(placement=Placement(attention_dp=True, runtime="megatron"))
    assert Requirements(placement=Placement(attention_dp=True, runtime="sglang")).placement.attention_dp


def test_a_speed_floor_plans_attention_dp_groups_at_the_groups_load():
    """A speed floor at attention data parallelism: the replica is a group's placement, its held
    load is the group's live requests (8 per rank-request), and its figures are an independent
    run of one rank's share stated for the group (placer.simulate.data_parallel)."""
    from placer.simulate import Traffic, simulate
    from placer.simulate.data_parallel import for_group

    m, fleet, wl = load_inputs("deepseek-v3", "h200", racks=2, concurrency=40, context=4096)
    req = Requirements(placement=Placement(degrees=(8,), attention_dp=True),
                       targets=Targets(min_user_tps=3.0, output_tokens=4))   # a 4k prompt then 4 tokens: the prompt dominates
    p = plan(m, fleet, wl, req, SolverSettings(method="dp"))
    assert p.speed is not None and p.feasible, p.message
    inst = p.instance
    assert inst.attention_dp and inst.tp == 8
    assert all(s.instance.attention_dp for s in p.speed.shapes)
    load = p.load_per_replica
    rank = simulate(inst, p.solved.per_group.assignment,
                    Traffic(requests=-(-load // 8), max_live=-(-load // 8), output_tokens=4))
    group = for_group(rank, inst)
    assert p.simulation.per_user_tokens_per_s == pytest.approx(group.per_user_tokens_per_s, rel=1e-12)
    assert p.simulation.aggregate_tokens_per_s == pytest.approx(8 * rank.aggregate_tokens_per_s, rel=1e-12)
    assert p.simulation.per_user_tokens_per_s >= 3.0
    assert p.replicas * load >= 40 and p.speed.chosen.shape.layout == "tp 8 attention-dp"
