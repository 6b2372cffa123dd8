"""Re-placement after failures (placer.planning.replan, placer replan): the committed Kimi K3
mapping with a failed wafer and a failed rack, a tensor-parallel plan with a failed GPU, bad input."""

from __future__ import annotations

import json

import pytest
from dirs import SOLUTIONS

from placer.mapping import read_mapping
from placer.mapping.validate import validate_mapping
from placer.planning.replan import RELOAD_BANDWIDTH, failed_devices, replan
from placer.planning.requirements import SolverSettings
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.fleet import load_fleet

KIMI = SOLUTIONS / "kimi-k3__wse-3t__contiguous.json"


def _stage_bytes(doc, device):
    return next(s["bytes"]["weights"] for s in doc["stages"] if s["device"] == device)


@pytest.mark.slow
def test_one_failed_wafer_moves_only_its_bytes_proven_and_fewer_than_a_fresh_solve(run_cli, tmp_path):
    doc = read_mapping(KIMI)
    wafer = doc["stages"][17]["device"]
    out = replan(KIMI, [wafer], solver=SolverSettings(time_limit=60, threads=1))
    assert out.feasible and out.proven and not out.violations
    assert [lv.name for lv in out.solved.result.levels] == ["moved", "devices", "concurrency", "latency"]
    assert out.moved == _stage_bytes(doc, wafer) == out.solved.result.level("moved").value
    assert out.fresh is not None and out.fresh_moved > out.moved
    assert out.solved.result.devices_used == doc["summary"]["devices_used"]
    new = out.mapping
    assert wafer not in {s["device"] for s in new["stages"]}
    assert validate_mapping(new, fleet=load_fleet("wse-3t").without([wafer])) == []
    assert out.reload_seconds(out.moved) == pytest.approx(out.moved / RELOAD_BANDWIDTH)
    # the command: both plans' bytes, the reload times, the validator, the mapping written and exported
    target = tmp_path / "k3.json"
    code, text, err = run_cli(["replan", KIMI, "--failed", wafer, "-q", "--threads", "1", "-o", target])
    assert code == 0, err
    assert f"1 device failed ({wafer}); 95 devices left" in text
    assert "moved: 16.13 GB, bound 16.13 GB, proven" in text
    assert "moves 16.13 GB of weights (16,129,032,258 B)" in text and "610.9 ms to reload" in text
    assert "fresh solve on the survivors: 70 devices, proven, moves" in text
    assert "validated:" in text and text.splitlines()[-1] == f"wrote {target}"
    assert read_mapping(target)["stages"] == new["stages"]
    code, text, err = run_cli(["export", target, "--format", "vllm"])
    assert code == 0, err


@pytest.mark.slow
def test_a_failed_rack_and_a_chosen_bandwidth(run_cli):
    doc = read_mapping(KIMI)
    rack = doc["stages"][30]["rack"]
    lost = [s["device"] for s in doc["stages"] if s["rack"] == rack]
    code, text, err = run_cli(["replan", KIMI, "--failed", f"rack:{rack}", "--reload-bandwidth", "1 TB/s", "--json",
                               "-q", "--no-fresh", "--threads", "1"])
    assert code == 0, err
    got = json.loads(text)
    assert sorted(got["failed"]) == sorted(d.id for d in load_fleet("wse-3t").devices if d.rack == rack)
    assert got["replan"]["moved_bytes"] == sum(_stage_bytes(doc, d) for d in lost)
    assert got["replan"]["proven"] and got["fresh"] is None and got["violations"] == []
    assert got["replan"]["reload_seconds"] == pytest.approx(got["replan"]["moved_bytes"] / 1e12)


@pytest.mark.slow
def test_a_failed_gpu_of_a_tensor_parallel_plan(run_cli, tmp_path):
    plan_file = tmp_path / "l405.json"
    code, _, err = run_cli(["solve", "llama-3.1-405b", "-H", "h100", "--tp", "8", "-q", "-o", plan_file])
    assert code == 0, err
    doc = read_mapping(plan_file)
    group = doc["stages"][1]["group"]["devices"]
    out = replan(plan_file, [group[3]], solver=SolverSettings(time_limit=60, threads=1))
    assert out.feasible and out.proven and not out.violations
    # the group's node is gone: its stage's weights, on all 8 GPUs, are loaded onto another node
    assert out.moved == 8 * doc["stages"][1]["bytes"]["weights"] == out.solved.result.level("moved").value
    assert out.fresh_moved > out.moved
    kept = {tuple(s["group"]["devices"]) for s in out.mapping["stages"]}
    assert tuple(doc["stages"][0]["group"]["devices"]) in kept and tuple(group) not in kept
    assert out.solved.result.level("devices").value == doc["summary"]["devices_used"]


def test_failed_devices_are_ids_or_racks_and_bad_ones_name_the_flag(run_cli):
    fleet = load_fleet("wse-3t")
    assert failed_devices(fleet, ["r3w1", "rack:3"]) == ("r3w1", "r3w0", "r3w2")
    for bad in (["r99w1"], ["rack:x"], ["rack:99"], []):
        with pytest.raises(InvalidSpec) as exc:
            failed_devices(fleet, bad)
        assert (exc.value.source, exc.value.field) == (ARGUMENT, "failed")
    code, out, err = run_cli(["replan", KIMI, "--failed", "nope"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--failed" in err
    code, out, err = run_cli(["replan", "missing.json", "--failed", "r0w0"])
    assert code == 2 and "missing.json" in err and len(err.strip().splitlines()) == 1
    code, out, err = run_cli(["replan", KIMI, "--failed", "r0w0", "--reload-bandwidth", "fast"])
    assert code == 2 and "--reload-bandwidth" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_failed_gpu_takes_only_its_own_group_out(run_cli, tmp_path):
    plan_file = tmp_path / "l405tp4.json"
    code, _, err = run_cli(["solve", "llama-3.1-405b", "-H", "h100", "--tp", "4", "-q", "-o", plan_file])
    assert code == 0, err
    doc = read_mapping(plan_file)
    groups = [tuple(s["group"]["devices"]) for s in doc["stages"]]
    hit = next(k for k, g in enumerate(groups) if any(g[0][:2] == h[0][:2] for h in groups if h != g))
    out = replan(plan_file, [groups[hit][1]], solver=SolverSettings(time_limit=60, threads=1), fresh=False)
    assert out.feasible and out.proven and not out.violations
    # the failed GPU's group is out; its node's other group keeps its stage and its weights
    assert out.moved == 4 * doc["stages"][hit]["bytes"]["weights"]
    kept = {tuple(s["group"]["devices"]) for s in out.mapping["stages"]}
    assert set(groups) - kept == {groups[hit]}
