"""One mapping, one traffic: ``solve``, ``simulate``, ``compare``, ``frontier`` and ``plan()`` answer
the same per-user speed, and each states the same traffic.

llama-3.1-8b on one H100 (tp 1, a single stage, so every command places the same mapping), 4 live
requests of a 1,536-token prompt (256 of it in the prefix cache) then 64 output tokens."""

import json

import pytest

TRAFFIC = ["--isl", "1536", "--osl", 64, "--cached-prompt", 256]
WORKLOAD = ["--context", "2k", "--concurrency", 4]
LIVE = 4


def _per_user(rows, **match):
    return next(r for r in rows if all(r.get(k) == v for k, v in match.items()))["per_user_tokens_per_s"]


def test_every_command_gives_the_same_per_user_speed_for_the_same_mapping_and_traffic(run_cli, tmp_path):
    from placer import Placement, Requirements, SolverSettings, Targets, Traffic, load_fleet, load_model, plan
    from placer.specs.workload import workload_for

    path = tmp_path / "m.json"
    code, out, err = run_cli(["solve", "llama-3.1-8b", "-H", "h100", "--racks", 1, *WORKLOAD, *TRAFFIC, "--tp", 1,
                              "--min-user-tps", 1, "--time-limit", 10, "--threads", 1, "-q", "--json", "-o", path])
    assert code == 0, err
    solved = json.loads(out)
    floor = solved["speed_target"]
    assert floor["chosen"]["load_per_replica"] == LIVE and floor["chosen"]["tp"] == 1
    speed = floor["chosen"]["per_user_tokens_per_s"]
    line = floor["traffic"]["text"]
    assert "each a 1,536-token prompt (256 cached) then 64 output tokens" in line
    # the mapping records the traffic; simulate reads it back, and with the same flags agrees
    assert json.loads(path.read_text())["traffic"]["isl"] == 1536
    for extra in ([], TRAFFIC):
        code, out, err = run_cli(["simulate", path, "--json", *extra])
        assert code == 0, err
        sim = json.loads(out)
        assert sim["live_requests"] == LIVE and sim["traffic"]["text"] == line
        assert sim["per_user_tokens_per_s"] == pytest.approx(speed, rel=1e-6)

    code, out, err = run_cli(["compare", "llama-3.1-8b", "-H", "h100", "--racks", 1, *WORKLOAD, *TRAFFIC, "--tp", 1,
                              "--degrees-only", "--time-limit", 10, "--threads", 1, "-q", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert _per_user(doc["degrees"], tp=1, live_requests=LIVE) == pytest.approx(speed, rel=1e-6)
    assert "each a 1,536-token prompt (256 cached) then 64 output tokens" in doc["traffic"]["text"]

    code, out, err = run_cli(["frontier", "llama-3.1-8b", "-H", "h100", "--context", "2k", *TRAFFIC, "--tp", 1,
                              "--speeds", 1, "--max-target", LIVE, "--time-limit", 10, "--threads", 1, "--jobs", 1,
                              "-q", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert _per_user(doc["rows"], tp=1, live_per_replica=LIVE) == pytest.approx(speed, rel=1e-6)
    assert "each a 1,536-token prompt (256 cached) then 64 output tokens" in doc["traffic"]["text"]

    model = load_model("llama-3.1-8b")
    p = plan(model, load_fleet("h100", racks=1), workload_for(model, context="2k", concurrency=LIVE),
             Requirements(Placement(degrees=(1,)), Targets(min_user_tps=1)),
             SolverSettings(time_limit=10, threads=1),
             traffic=Traffic(prompt_tokens=1536, output_tokens=64, cached_prompt_tokens=256))
    assert p.load_per_replica == LIVE
    assert p.simulation.per_user_tokens_per_s == pytest.approx(speed, rel=1e-6)
    assert p.simulation.traffic.describe() == line
