"""``placer simulate MAPPING --sessions``: the session printout, its JSON, a trace file, and the
flags' errors (exit 2, naming the flag)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).parents[2]
MAPPING = ROOT / "solutions" / "llama-3.1-8b__wse-3t__contiguous.json"
TRACE = ROOT / "tests" / "fixtures" / "traces" / "copilot_sessions_sample.jsonl"


def test_sessions_with_a_host_tier(run_cli):
    code, out, err = run_cli(["simulate", MAPPING, "--sessions", "chat", "--session-count", "4", "--tier", "host"])
    assert code == 0, err
    assert "closed loop of 4 sessions (4 started), chat: 4 turns" in out
    assert "tier: host tier: 1,000 GB per device at 300.0 GB/s" in out
    assert "sessions held" in out and "TTFT per turn" in out and "tokens/s per MW" in out
    code, out, err = run_cli(["simulate", MAPPING, "--sessions", "chat", "--session-count", "4", "--tier", "host",
                              "--json"])
    doc = json.loads(out)
    assert doc["sessions_started"] == doc["sessions_ended"] == 4 and doc["turns"] == 16
    assert doc["bytes_parked"] > 0 and doc["tier"] == "host"
    # the tier's 1 kW per wafer is added to the fleet's power
    code, out2, _ = run_cli(["simulate", MAPPING, "--sessions", "chat", "--session-count", "4", "--json"])
    bare = json.loads(out2)
    assert bare["bytes_parked"] == 0 and bare["power_w"] < doc["power_w"]


def test_a_session_trace_runs(run_cli):
    code, out, err = run_cli(["simulate", MAPPING, "--sessions", TRACE, "--tier", "host"])
    assert code == 0, err
    assert "session trace copilot_sessions_sample.jsonl (3 sessions, 6 turns)" in out
    assert "3 started, 3 ended" in out


def test_session_flag_errors(run_cli):
    code, _out, err = run_cli(["simulate", MAPPING, "--tier", "host"])
    assert code == 2 and "--tier" in err and "give --sessions too" in err
    code, _out, err = run_cli(["simulate", MAPPING, "--sessions", "chat", "--tier", "nvme"])
    assert code == 2 and "has no 'nvme' tier" in err
    code, _out, err = run_cli(["simulate", MAPPING, "--sessions", "no-such-preset"])
    assert code == 2 and "--sessions" in err and "coding-agent" in err
    code, _out, err = run_cli(["simulate", MAPPING, "--sessions", "chat", "--session-rate", "1", "--session-count", "2"])
    assert code == 2 and "not both" in err


def test_solve_counts_sessions_held(run_cli):
    args = ["solve", "llama-3.1-8b", "-H", "b200", "--sessions", "chat", "--ttft-target", "500", "-q"]
    code, out, err = run_cli(args)
    assert code == 0, err
    assert "sessions: chat: 4 turns" in out and "sessions held:" in out and "(proven: the KV reserve holds no more)" in out
    code, out, err = run_cli(args + ["--tier", "host"])
    assert code == 0, err
    assert "host tier: KV reserve" in out and "tier size" in out and "bounds at that reserve" in out
    # chat's think times vary: the count is a bound, not proven
    assert "(a bound, not proven: think times vary;" in out
    code, _out, err = run_cli(["solve", "llama-3.1-8b", "-H", "b200", "--sessions", "chat", "-q"])
    assert code == 2 and "--ttft-target" in err
    code, _out, err = run_cli(["solve", "llama-3.1-8b", "-H", "b200", "--tier", "host", "-q"])
    assert code == 2 and "give --sessions too" in err


def test_a_session_plan_validates_simulates_and_exports(run_cli, tmp_path):
    """The done-when check on a GPU plan: solve with a fixed-think preset and a tier (proven), then the
    plan written validates with both tiers, simulates with the tier it records, and exports it."""
    plan = tmp_path / "plan.json"
    code, out, err = run_cli(["solve", "llama-3.1-8b", "-H", "b200", "--sessions", "agent-1m", "--ttft-target",
                              "20000", "--tier", "host", "-q", "-o", plan, "--context", "131072"])
    assert code == 0, err
    held = next(x for x in out.splitlines() if x.startswith("sessions held:"))
    assert "(proven;" in held and "host tier: KV reserve" in out
    doc = json.loads(plan.read_text())
    assert doc["sessions"]["proven"] and doc["sessions"]["tier"] == "host"
    code, out, err = run_cli(["validate", plan])
    assert code == 0 and "valid" in out, err
    code, out, err = run_cli(["simulate", plan, "--sessions", "agent-1m", "--session-count", "2", "--json"])
    assert code == 0, err
    sim = json.loads(out)
    assert sim["tier"] == "host" and sim["turns"] > 0
    code, out, err = run_cli(["export", plan, "--format", "vllm"])
    assert code == 0 and "--kv-offloading-size" in out, err


def test_sessions_need_no_concurrency(run_cli):
    """Under --sessions the plan is for sessions, not a concurrency: kimi-k3's default of 184 live
    requests cannot hold 1M-token contexts, so without the default of 1 the solve would be refused.
    At 1 every wafer holds two layers (2 x 16.13 GB of weights and one 576 MB KV slot of 1M tokens
    fit 44 GB): 93 layers on ceil(93 / 2) = 47 wafers, and the sessions count picks the reserve."""
    code, out, err = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--sessions", "agent-1m", "--ttft-target", "5000",
                              "-q"])
    assert code == 0, err
    assert "concurrency 1," in out and "devices 47 (lower bound 47)" in out
    assert next(x for x in out.splitlines() if x.startswith("sessions held:")).split()[2] == "20"
