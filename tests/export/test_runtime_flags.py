"""Every flag placer's SGLang and vLLM exports launch with, checked against the runtimes' own
argument definitions, read from their wheels (tests/vendored/extract.py: SGLang 0.5.23's server
fields with their flags, aliases, CLI exclusions and choices; vLLM 0.33.0's engine flags and the
fields and roles of its KV-transfer config). Neither runtime imports on this machine, so their
parsers cannot run; these tables are what the parsers are built from.

The exports: every committed solution, a speculative plan, an attention-data-parallel plan and a
two-pool (disaggregated) plan. The SGLang router (``sglang_router``, a separate package) is not
checked."""

from __future__ import annotations

import json
import shlex
import sys

import pytest
from dirs import FIXTURES, VENDORED
from dirs import SOLUTIONS as SOLUTIONS_DIR

from placer.export import ExportOptions, export_mapping
from placer.mapping import read_mapping

sys.path.insert(0, str(VENDORED))

import sglang_0_5_23_cli as sglang_cli  # noqa: E402
import vllm_0_33_0_cli as vllm_cli  # noqa: E402
import vllm_0_33_0_spec  # noqa: E402

SOLUTIONS = sorted((SOLUTIONS_DIR).glob("*__contiguous.json"))

VLLM_FLAGS = set(vllm_cli.ENGINE_FLAGS) | set(vllm_cli.FRONTEND_FLAGS)
SGLANG_FLAGS = {flag: info for info in sglang_cli.FIELDS.values() if not info["no_cli"] for flag in info["flags"]}
SGLANG_EXCLUDED = {flag for info in sglang_cli.FIELDS.values() if info["no_cli"] for flag in info["flags"]}
# vLLM 0.33.0's EPLBConfig fields (vllm/config/parallel.py lines 64-128 of the wheel, as the project's
# reference fleet_facts.md section 2b lists them; the vendored tables do not extract this class)
EPLB_CONFIG_FIELDS = {"window_size", "step_interval", "num_redundant_experts", "log_balancedness",
                      "log_balancedness_interval", "use_async", "policy", "communicator"}


def _launches(text: str, marker: str) -> list[list[str]]:
    """The argument lists after ``marker`` on every launch line of an export."""
    out = []
    for line in text.splitlines():
        if line.startswith("#") or marker not in line:
            continue
        words = shlex.split(line)
        out.append(words[words.index(marker.split()[-1]) + 1:])
    return out


def _flags(argv: list[str]) -> list[tuple[str, str | None]]:
    """``(flag, value or None)`` in order (a value is the next word unless it is a flag itself)."""
    out = []
    for i, w in enumerate(argv):
        if w.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
            out.append((w, nxt))
    return out


def check_sglang(text: str) -> int:
    n = 0
    for argv in _launches(text, "-m sglang.launch_server"):
        for flag, value in _flags(argv):
            assert flag not in SGLANG_EXCLUDED, f"{flag}: SGLang 0.5.23 registers no such flag (no_cli)"
            assert flag in SGLANG_FLAGS, f"{flag}: not a flag of SGLang 0.5.23"
            choices = SGLANG_FLAGS[flag]["choices"]
            if choices is not None and value is not None:
                assert value in choices, f"{flag} {value}: not one of {choices}"
            n += 1
    return n


def check_vllm(text: str) -> int:
    n = 0
    for argv in _launches(text, "vllm serve"):
        for flag, value in _flags(argv[1:]):     # argv[0]: the served model
            assert flag in VLLM_FLAGS, f"{flag}: not a flag of vLLM 0.33.0's server"
            if flag == "--kv-transfer-config":
                cfg = json.loads(value)
                assert set(cfg) <= set(vllm_cli.KV_TRANSFER_FIELDS) and cfg["kv_role"] in vllm_cli.KV_ROLES
            if flag == "--speculative-config":
                assert set(json.loads(value)) <= set(vllm_0_33_0_spec.SPECULATIVE_CONFIG_FIELDS)
            if flag == "--eplb-config":
                assert set(json.loads(value)) <= EPLB_CONFIG_FIELDS
            n += 1
    return n


def test_the_tables_hold_the_flags_they_were_read_for():
    # read from the classes: a mistake in the extraction would empty them or lose these
    assert SGLANG_FLAGS["--disaggregation-mode"]["choices"] == ("null", "prefill", "decode")
    assert "mooncake" in SGLANG_FLAGS["--disaggregation-transfer-backend"]["choices"]
    assert SGLANG_FLAGS["--tensor-parallel-size"] is SGLANG_FLAGS["--tp-size"]        # an alias
    assert "--enable-dp-attention" in SGLANG_EXCLUDED and "--attn-dp-size" in SGLANG_FLAGS
    assert {"--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size", "--enable-expert-parallel",
            "--kv-transfer-config", "--speculative-config"} <= set(vllm_cli.ENGINE_FLAGS)
    assert "--pp-size" not in VLLM_FLAGS and {"--port", "--host"} <= set(vllm_cli.FRONTEND_FLAGS)
    assert set(vllm_cli.KV_ROLES) == {"kv_producer", "kv_consumer", "kv_both"}


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_committed_solutions_launch_with_flags_the_runtimes_define(path):
    doc = read_mapping(path)
    opts = ExportOptions(force=True)
    assert check_sglang(export_mapping(doc, "sglang", options=opts).text) > 0
    assert check_vllm(export_mapping(doc, "vllm", options=opts).text) > 0


def test_speculative_attention_dp_and_disaggregated_exports(tmp_path):
    from placer import Placement, Pools, Requirements, SolverSettings, SpecDecoding, Targets, plan
    from placer.cli.common import load_inputs
    from placer.specs.fleet import load_fleet
    from placer.specs.model import load_model
    from placer.specs.workload import Workload, workload_for

    # speculative: DeepSeek-V3's MTP layer, 3 drafts
    ds = load_model(FIXTURES / "hf" / "deepseek-v3.json", mtp=True)
    spec = plan(ds, load_fleet("h200"), Workload(concurrency=8, context_tokens=4096, weight_bits=8),
                Requirements(placement=Placement(degrees=(1,)),
                             speculation=SpecDecoding(tokens=3)), SolverSettings(method="dp"))
    # attention data parallelism at tp 8
    m, fleet, wl = load_inputs("deepseek-v3", "h200", racks=5, concurrency=256, context="128k")
    dp = plan(m, fleet, wl, Requirements(placement=Placement(attention_dp=True, degrees=(8,))),
              SolverSettings(method="dp"))
    # two pools on a mixed fleet
    from disagg_toys import MIXED, MODEL

    (tmp_path / "m.yaml").write_text(MODEL)
    (tmp_path / "f.yaml").write_text(MIXED)
    toy = load_model(tmp_path / "m.yaml")
    pd = plan(toy, load_fleet(tmp_path / "f.yaml"), workload_for(toy, context=2000),
              Requirements(targets=Targets(max_ttft_ms=100.0, max_itl_ms=5.0),
                           pools=Pools(prefill_fleet="pgpu", rate=80.0,
                                       decode_tokens=200)), SolverSettings(time_limit=10))
    opts = ExportOptions(force=True)
    for p, model, launches in ((spec, ds, 1), (dp, m, 1), (pd, toy, 2)):
        sg = export_mapping(p.mapping, "sglang", model=model, options=opts).text
        vl = export_mapping(p.mapping, "vllm", model=model, options=opts).text
        assert len(_launches(sg, "-m sglang.launch_server")) == launches == len(_launches(vl, "vllm serve"))
        assert check_sglang(sg) > 0 and check_vllm(vl) > 0
    assert "--attn-dp-size" in export_mapping(dp.mapping, "sglang", model=m, options=opts).text
    assert "--disaggregation-mode" in export_mapping(pd.mapping, "sglang", model=toy, options=opts).text


@pytest.mark.parametrize("hardware, racks", [("h100", 9), ("gb200-nvl72", 1)])
def test_wide_expert_parallel_plans_with_redundant_experts_launch_with_defined_flags(hardware, racks):
    """SGLang's published decode layout (9 nodes of 8 H100, attention data parallelism, experts over
    72 ranks, 32 redundant: 288 experts, 4 a rank), and the same on one GB200 NVL72 rack."""
    from placer import Placement, Requirements, SolverSettings, plan
    from placer.cli.common import load_inputs
    from placer.mapping.validate import validate_mapping

    m, fleet, wl = load_inputs("deepseek-v3", hardware, racks=racks, redundant_experts=32)
    p = plan(m, fleet, wl, Requirements(placement=Placement(attention_dp=True, degrees=(72,))),
             SolverSettings(time_limit=20, threads=1))
    assert p.result.proven_optimal and p.result.devices_used == 72
    assert validate_mapping(p.mapping) == []
    sg = export_mapping(p.mapping, "sglang").text
    vl = export_mapping(p.mapping, "vllm").text
    assert check_sglang(sg) > 0 and check_vllm(vl) > 0
    assert "--ep-size 72 --attn-dp-size 72" in sg and "--ep-num-redundant-experts 32 --enable-eplb" in sg
    assert """--enable-eplb --eplb-config '{"num_redundant_experts":32}'""" in vl
    spans = racks > 1            # the H100 group spans 9 nodes: DeepEP all-to-alls, 9 SGLang nodes
    assert ("--moe-a2a-backend deepep" in sg) == spans and ("--nnodes 9" in sg) == spans
    assert ("--all2all-backend deepep_low_latency" in vl) == spans


def test_sglang_export_warns_when_experts_do_not_divide_over_the_ranks():
    from placer import Placement, Requirements, SolverSettings, plan
    from placer.cli.common import load_inputs

    m, fleet, wl = load_inputs("deepseek-v3", "h100", racks=9)
    p = plan(m, fleet, wl, Requirements(placement=Placement(attention_dp=True, degrees=(72,))),
             SolverSettings(time_limit=20, threads=1))
    out = export_mapping(p.mapping, "sglang")
    # 256 experts over 72 ranks: SGLang asserts (experts + redundant) % ep_size == 0
    assert any("re-solve with --redundant-experts 32 (4 a rank)" in w and "first 40 ranks" in w for w in out.warnings)
    assert check_sglang(out.text) > 0 and "--ep-num-redundant-experts" not in out.text
