"""Every command states the workload it assumed, in its human output and its JSON; odd workloads warn."""

from __future__ import annotations

import json

import pytest

from placer.specs.catalog import project_root

OK = project_root() / "tests" / "bad_inputs" / "ok"
TINY, TINYHW = OK / "tiny.yaml", OK / "tinyhw.yaml"
MAPPING = project_root() / "tests" / "bad_inputs" / "map_for_other_model.json"   # tiny on tinyhw, context 1k
DEEPSEEK = project_root() / "tests" / "fixtures" / "hf" / "deepseek-v3.json"   # max_position_embeddings 163840

# command -> argv (the tiny companions at --context 4k --concurrency 3 where the command takes them)
WL = ["--context", "4k", "--concurrency", "3"]
RUNS = {
    "inspect": ["inspect", TINY, "-H", TINYHW, *WL],
    "solve": ["solve", TINY, "-H", TINYHW, "--method", "dp", *WL],
    "compare": ["compare", TINY, "-H", TINYHW, "--time-limit", "2", *WL],
    "plan": ["plan", TINY, "-H", TINYHW, "-n", "3", "--context", "4k"],
    "sweep": ["sweep", TINY, "-H", TINYHW, "--context", "4k", "--concurrency", "3", "--jobs", "1"],
    "validate": ["validate", MAPPING, "--model", TINY, "-H", TINYHW],
    "simulate": ["simulate", "--compare", "llama-3.1-8b", "-H", "h100", "--modes", "contiguous", "--context", "4k",
                 "--time-limit", "2"],
    "run": ["run", MAPPING, "--model", TINY, "-H", TINYHW, "--requests", "2", "--tokens", "2"],
}
# what each states: (context tokens, concurrency) -- a mapping's own workload for validate and run
EXPECTED = {"validate": (1024, 2), "run": (1024, 2), "simulate": (4096, 1), "plan": (4096, 3)}


@pytest.mark.parametrize("command", RUNS)
def test_every_command_states_its_workload(command, run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    context, concurrency = EXPECTED.get(command, (4096, 3))
    code, out, err = run_cli(RUNS[command])
    assert code == 0, err
    line = next((x for x in out.splitlines() if "workload: context " in x), None)
    assert line is not None, out
    assert f"({context:,} tokens)" in line or command == "sweep"
    assert "weights 16-bit" in line and "KV 16-bit" in line and "state 32-bit" in line
    assert "runtime reserve" in line
    if concurrency is not None and command != "sweep":
        assert f"concurrency {concurrency}" in line
    code, out, err = run_cli([*RUNS[command], "--json"])
    assert code == 0, err
    wl = json.loads(out)["workload"]
    assert (wl["weight_bits"], wl["kv_bits"], wl["state_bits"]) == (16, 16, 32)
    if command == "sweep":
        return          # the grid sets context and concurrency per row; the rows carry them
    assert wl["context_tokens"] == context
    if concurrency is not None:
        assert wl["concurrency"] == concurrency


def test_zero_concurrency_is_explained(run_cli):
    code, out, err = run_cli(["solve", TINY, "-H", TINYHW, "--method", "dp", "--concurrency", "0", "--json"])
    assert code == 0
    assert err.splitlines()[0] == ("warning: --concurrency: concurrency: 0 live requests: the plan holds the "
                                   "weights alone, with no KV cache or state reserved, and serves no request")
    doc = json.loads(out)
    assert doc["workload"]["concurrency"] == 0
    assert all(s["bytes"]["kv_reserve"] == 0 and s["bytes"]["state"] == 0 for s in doc["stages"])
    code, _, err = run_cli(["solve", TINY, "-H", TINYHW, "--method", "dp", "--concurrency", "1"])
    assert code == 0 and "warning" not in err


def test_a_context_past_the_models_window_warns(run_cli):
    code, out, err = run_cli(["inspect", DEEPSEEK, "--context", "1M", "--json"])
    assert code == 0
    # an imported model also says where its workload defaults come from ("note: " lines)
    assert [x for x in err.splitlines() if not x.startswith("note: ")] == [
        "warning: --context: context: 1,048,576 tokens is beyond DeepSeek-V3's 163,840-token window "
        "(max_position_embeddings); the memory is planned as asked"]
    assert json.loads(out)["workload"]["context_tokens"] == 2**20
    code, _, err = run_cli(["inspect", DEEPSEEK, "--context", "160k"])
    assert code == 0 and not [x for x in err.splitlines() if not x.startswith("note: ")]
    # a sweep warns for each context of its grid that is too long, once
    code, _, err = run_cli(["sweep", DEEPSEEK, "-H", "wse-3t", "--context", "32k,1M,2M", "--concurrency", "1",
                            "--method", "greedy", "--jobs", "1", "--json"])
    assert code == 0, err
    warnings = [x for x in err.splitlines() if x.startswith("warning: ")]
    assert [w.split(": ")[3].split(" tokens")[0] for w in warnings] == ["1,048,576", "2,097,152"]
