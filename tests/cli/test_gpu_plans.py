"""issue 14's GPU plans end to end through the CLI: Llama-3.1-70B on H100 at 128k x 32, tp 8 and 4:
solved, accepted by the validator, the reserve left free on every GPU, and a vLLM command a user
can paste (its partition fed to vLLM's own get_pp_indices, vendored in tests/vendored)."""

from __future__ import annotations

import json
import shlex
import sys

import pytest
from dirs import VENDORED

sys.path.insert(0, str(VENDORED))

import vllm_0_33_0_pp  # noqa: E402

MODEL_ID = "meta-llama/Llama-3.1-70B-Instruct"


@pytest.mark.parametrize("tp", [8, 4])
def test_llama_70b_h100_plan_validates_and_exports_a_pasteable_vllm_command(tp, run_cli, tmp_path, monkeypatch):
    plan = tmp_path / "plan.json"
    code, out, err = run_cli(["solve", "llama-3.1-70b", "-H", "h100", "--context", "128k", "--concurrency", "32",
                              "--tp", str(tp), "--threads", "1", "--quiet", "-o", plan])
    assert code == 0, err
    code, out, err = run_cli(["validate", plan, "--json"])
    report = json.loads(out)
    assert code == 0 and report["valid"] and report["violations"] == [], out
    doc = json.loads(plan.read_text())
    for st in doc["stages"]:
        b = st["bytes"]
        # the reserve, 0.1 x 80 GB + 3.5 GB, is left free on every GPU of every group
        assert b["reserve"] == 11_500_000_000
        assert b["weights"] + b["kv_reserve"] + b["state"] + b["activations"] <= 80 * 10**9 - b["reserve"]
        assert len(st["group"]["devices"]) == tp
    code, out, err = run_cli(["export", plan, "--format", "vllm", "--served-model", MODEL_ID])
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if not x.startswith("#")]
    words = shlex.split(line)
    env, argv = words[0], words[1:]
    name, partition = env.split("=")
    assert name == "VLLM_PP_LAYER_PARTITION"
    assert argv[:3] == ["vllm", "serve", MODEL_ID]
    flags = dict(zip(argv[3::2], argv[4::2]))
    stages = doc["stages"]
    nodes = {st["rack"] for st in stages}
    assert len(nodes) == 3          # 24 GPUs: three nodes of 8, so vLLM runs on a Ray cluster
    assert flags == {"--pipeline-parallel-size": str(len(stages)), "--tensor-parallel-size": str(tp),
                     "--max-num-seqs": str(doc["summary"]["concurrency_ceiling"]), "--max-model-len": "131072",
                     "--kv-cache-dtype": "bfloat16", "--distributed-executor-backend": "ray"}
    assert "ray start --head --port=6379" in out
    assert len(stages) * tp == 24
    monkeypatch.setenv(name, partition)
    want = [[int(n.split(".")[1]) for n in st["layers"] if n.startswith("layers.")] for st in stages]
    for rank in range(len(stages)):
        start, end = vllm_0_33_0_pp.get_pp_indices(80, rank, len(stages))
        assert list(range(start, end)) == want[rank]


def test_an_explicit_reserve_becomes_vllms_memory_utilization(run_cli, tmp_path):
    plan = tmp_path / "plan.json"
    code, _, err = run_cli(["solve", "llama-3.1-70b", "-H", "h100", "--context", "128k", "--concurrency", "32",
                            "--tp", "8", "--reserve", "0.05+4GB", "--threads", "1", "--quiet", "-o", plan])
    assert code == 0, err
    code, out, err = run_cli(["export", plan, "--format", "vllm"])
    assert code == 0, err
    assert "put the checkpoint's Hugging Face id or local path in its place" in out
    (line,) = [x for x in out.splitlines() if not x.startswith("#")]
    words = shlex.split(line)
    assert words[words.index("--gpu-memory-utilization") + 1] == "0.95"
    doc = json.loads(plan.read_text())
    assert all(st["bytes"]["reserve"] == 4_000_000_000 + 4_000_000_000 for st in doc["stages"])


def test_sglang_published_decode_layout_solves_validates_and_exports(run_cli, tmp_path):
    """issue 30: DeepSeek-V3 on 9 nodes of 8 H100, attention data parallel, experts over 72 ranks with
    32 redundant (288 experts, 4 a rank); a count the ranks do not divide is refused naming the fix."""
    plan = tmp_path / "plan.json"
    code, out, err = run_cli(["solve", "deepseek-v3", "-H", "h100", "--racks", "9", "--attention-dp", "--tp", "72",
                              "--redundant-experts", "32", "--threads", "1", "--quiet", "-o", plan])
    assert code == 0, err
    assert "devices 72 (lower bound 72)" in out and "status optimal (proven)" in out
    assert "256 experts + 32 redundant = 288 physical over 72 ranks, 4 on the heaviest rank" in out
    assert "all-to-all (low-latency, DeepEP figures) at 4 tokens a rank" in out
    # the latency level: the 58 MoE layers' dispatch and combine at ceil(16 / 72) = 1 token a rank,
    # EP 64's low-latency figures (43 / 46 GB/s) and the 4 us hop between nodes paid once each
    # (59,136 B and 114,688 B): not 58 x 2 x 71 ring steps at the mean link (31.32 ms)
    by_hand = 58 * (4 + 59_136 / 43e3 + 4 + 114_688 / 46e3)
    assert f"hop latency {by_hand:.1f} us over 0 hops" in out and f"latency: {by_hand:.1f} us, bound" in out
    assert "1.02x with 32 redundant (EPLB" in out
    code, out, err = run_cli(["validate", plan])
    assert code == 0 and "valid" in out, out + err
    for fmt, flag in (("sglang", "--ep-num-redundant-experts 32"), ("vllm", '"num_redundant_experts":32')):
        code, out, err = run_cli(["export", plan, "--format", fmt])
        assert code == 0 and flag in out, err
    code, out, err = run_cli(["solve", "deepseek-v3", "-H", "h100", "--racks", "9", "--attention-dp", "--tp", "72",
                              "--redundant-experts", "30", "--threads", "1", "--quiet"])
    assert code == 2 and "286 physical experts do not divide over 72 ranks" in err
    assert "--redundant-experts 32 gives 4 a rank" in err


def _untimed(text: str) -> str:
    import re

    return re.sub(r"\b(proven|feasible|unknown)(\)?), [\d,.]+ ?(us|ms|s)\b", r"\1\2, T", text)


@pytest.mark.ray
def test_solve_on_ray_prints_the_plan_of_local_processes(run_cli, local_ray):
    args = ["solve", "llama-3.1-8b", "-H", "h100", "--racks", "1", "--context", "8k", "--concurrency", "32",
            "--threads", "1", "-q"]
    code, local, err = run_cli([*args, "--jobs", "2"])
    assert code == 0, err
    code, on_ray, err = run_cli([*args, "--backend", "ray"])
    assert code == 0, err
    assert "tp 8: 8 devices" in on_ray and _untimed(on_ray) == _untimed(local)


def test_solve_on_ray_without_ray_names_the_extra(run_cli, no_ray):
    code, out, err = run_cli(["solve", "llama-3.1-8b", "-H", "h100", "--racks", "1", "--backend", "ray", "-q"])
    assert code == 2 and "Ray is not installed" in err and "placer[ray]" in err and out == ""
