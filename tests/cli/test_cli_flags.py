"""Flags and units that mean one thing everywhere: --threads / --jobs, one split granularity, --json
on the catalog listings, one duration format, and a tie in `plan` called a tie."""

from __future__ import annotations

import json

import pytest

from placer.planning.studies.compare import SPLIT_GRANULARITY
from placer.specs.catalog import list_hardware, list_models, project_root
from placer.specs.units import format_duration_us

OK = project_root() / "tests" / "bad_inputs" / "ok"
TINY, TINYHW = OK / "tiny.yaml", OK / "tinyhw.yaml"

# four 2 GB attention layers with 1 GB of KV per request each (context 1) on 20 GB devices: a device
# holds j layers for c requests when j (2 + c) <= 20, so 10 requests need 4 devices in one pipeline
# (j = 1) and 4 in two replicas of 5 (j = 2, 2 devices each): a tie; three replicas of 4 need 6.
TIE_MODEL = """\
name: toy4
layers:
  - {kind: attention, weight_bytes: 2 GB, kv_bytes_per_token: 1 GB}
  - {kind: attention, weight_bytes: 2 GB, kv_bytes_per_token: 1 GB}
  - {kind: attention, weight_bytes: 2 GB, kv_bytes_per_token: 1 GB}
  - {kind: attention, weight_bytes: 2 GB, kv_bytes_per_token: 1 GB}
default_workload: {context: 1, concurrency: 1}
"""
TIE_FLEET = "name: toyhw\ndevice: {memory: 20 GB}\nfleet: {racks: 2, per_rack: 8}\n"


@pytest.mark.parametrize("unit, expected", [
    (0.25, "0.25 us"), (161, "161 us"), (160.5, "160.5 us"), (999.96, "1 ms"), (1543.2, "1.543 ms"),
    (129_679.4, "129.7 ms"), (4_213_000, "4.213 s"), (None, "-"),
])
def test_one_duration_rule(unit, expected):
    assert format_duration_us(unit) == expected


def test_durations_print_by_the_one_rule(run_cli):
    mapping = project_root() / "solutions" / "kimi-k3__wse-3t__contiguous.json"
    if not mapping.exists():
        pytest.skip("solutions/ is empty")
    code, out, err = run_cli(["simulate", mapping, "--requests", "4", "--output-tokens", "2", "--json"])
    assert code == 0, err
    sim = json.loads(out)
    itl, p99 = sim["itl_p50_us"], sim["itl_p99_us"]
    assert itl > 100              # a 70-wafer pipeline's token takes hundreds of microseconds
    code, out, err = run_cli(["simulate", mapping, "--requests", "4", "--output-tokens", "2"])
    line = next(x for x in out.splitlines() if "inter-token latency" in x)
    assert f"p50 {format_duration_us(itl)}," in line and f"p99 {format_duration_us(p99)}" in line
    units = [format_duration_us(v).split()[1] for v in (itl, p99)]
    assert sum(line.count(f" {u}") for u in set(units)) == 2 and line.count(" s ") == 0


def test_threads_and_jobs_are_named_apart(run_cli, tmp_path):
    code, out, err = run_cli(["solve", TINY, "-H", TINYHW, "--threads", "1", "--json"])
    assert code == 0 and "warning" not in err
    threads_doc = json.loads(out)
    # the old spelling still works, says what to write instead, and gives the same answer
    code, out, err = run_cli(["solve", TINY, "-H", TINYHW, "--workers", "1", "--json"])
    assert code == 0
    assert err.splitlines()[0] == "warning: --workers: workers: deprecated; say --threads 1"
    assert json.loads(out)["stages"] == threads_doc["stages"]
    code, _, err = run_cli(["solve", TINY, "-H", TINYHW, "--workers", "1", "--threads", "2"])
    assert (code, err) == (2, "error: --workers: workers: conflicts with --threads 2\n")
    code, out, err = run_cli(["sweep", TINY, "-H", TINYHW, "--concurrency", "1,2", "--jobs", "1", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["jobs"] == 1 and [r["concurrency"] for r in doc["rows"]] == [1, 2]
    code, _, err = run_cli(["sweep", TINY, "-H", TINYHW, "--concurrency", "1", "--workers", "1"])
    assert code == 0 and "warning: --workers: workers: deprecated; say --jobs 1" in err
    for command in ("solve", "compare"):
        _, out, _ = run_cli([command, "--help"])
        assert "--threads" in out and "--workers" not in out
    assert "--jobs" not in run_cli(["compare", "--help"])[1]
    # solve's --jobs is processes for its independent device layouts, apart from CP-SAT's --threads
    _, out, _ = run_cli(["solve", "--help"])
    assert "--jobs" in out and "one process each" in " ".join(out.split())
    _, out, _ = run_cli(["sweep", "--help"])
    assert "--jobs" in out and "--threads" in out and "--workers" not in out


def test_one_default_split_granularity(run_cli):
    assert SPLIT_GRANULARITY == "shards:4"
    for command in ("solve", "compare", "sweep", "plan", "simulate"):
        code, out, _ = run_cli([command, "--help"])
        assert code == 0 and f"(default {SPLIT_GRANULARITY})" in " ".join(out.split()), command
    code, out, err = run_cli(["solve", TINY, "-H", TINYHW, "--mode", "split", "--json"])
    assert code == 0, err
    assert json.loads(out)["model"]["granularity"] == SPLIT_GRANULARITY
    code, out, err = run_cli(["plan", TINY, "-H", TINYHW, "--mode", "split", "-n", "2"])
    assert code == 0, err and f"split ({SPLIT_GRANULARITY})" in out.splitlines()[0]
    code, out, err = run_cli(["simulate", "--compare", "llama-3.1-8b", "-H", "h100", "--modes", "split", "--json",
                              "--time-limit", "2", "--context", "4k"])
    assert code == 0, err
    assert [r["granularity"] for r in json.loads(out)["rows"]] == [SPLIT_GRANULARITY]
    # a sweep over several modes refines only its split points
    code, out, err = run_cli(["sweep", TINY, "-H", TINYHW, "--mode", "contiguous,split", "--concurrency", "2",
                              "--granularity", "shards:2", "--jobs", "1", "--json"])
    assert code == 0, err
    assert {r["mode"]: r["status"] for r in json.loads(out)["rows"]} == {"contiguous": "optimal", "split": "optimal"}


def test_catalog_listings_have_json(run_cli):
    code, out, err = run_cli(["models", "--json"])
    assert code == 0, err
    models = {m["name"]: m for m in json.loads(out)["models"]}
    assert sorted(models) == sorted(p.stem for p in list_models())
    k3 = models["kimi-k3"]
    assert k3["layers"] == {"linear_attention": 69, "attention": 24}
    assert k3["default_workload"]["context_tokens"] == 262_144 and k3["default_workload"]["concurrency"] == 184
    code, out, err = run_cli(["hardware", "--json"])
    assert code == 0, err
    fleets = {f["name"]: f for f in json.loads(out)["hardware"]}
    assert sorted(fleets) == sorted(p.stem for p in list_hardware())
    wse = fleets["wse-3t"]
    assert (wse["devices"], wse["racks"]) == (96, 32)
    assert wse["device_types"][0]["memory_bytes"] == 44 * 10**9
    # the human listings name the same entries
    _, out, _ = run_cli(["hardware"])
    assert [x.split()[0] for x in out.splitlines()[1:]] == sorted(fleets)


def test_plan_calls_a_tie_a_tie(run_cli, write):
    model, fleet = write("toy4.yaml", TIE_MODEL), write("toyhw.yaml", TIE_FLEET)
    code, out, err = run_cli(["plan", model, "-H", fleet, "-n", "10", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert [(r["replicas"], r["total_devices"]) for r in doc["rows"]][:3] == [(1, 4), (2, 4), (3, 6)]
    assert doc["best_replicas"] == 1 and doc["tied_replicas"] == [2] and doc["tie_break"] == "fewest replicas"
    assert "wins by 0" not in doc["summary"]
    assert doc["summary"].endswith("a tie with 2 replicas (2 x 2): the same 4 devices, broken in favour of the "
                                   "fewest replicas")
    code, out, _ = run_cli(["plan", model, "-H", fleet, "-n", "10"])
    rows = [x for x in out.splitlines() if x[:1] in "*="]
    assert [x.split()[:2] for x in rows[:2]] == [["*", "1"], ["=", "2"]]
    # no tie: 18 requests, one pipeline of 4 against 2 x 4 and 3 x 2
    code, out, _ = run_cli(["plan", model, "-H", fleet, "-n", "18", "--json"])
    doc = json.loads(out)
    assert doc["tied_replicas"] == [] and doc["summary"].endswith("one pipeline wins by 2 devices over 3 replicas")
