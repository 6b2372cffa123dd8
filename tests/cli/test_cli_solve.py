"""placer solve and placer compare as a user runs them."""

from __future__ import annotations

import json

from placer.mapping import read_mapping
from placer.mapping.validate import validate_mapping
from placer.planning.studies.compare import COMPARE_ROWS, compare
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import workload_for

TOY_MODEL = """\
name: toy6
layers:
  - {kind: linear_attention, weight_bytes: 4, state_bytes_per_request: 1}
  - {kind: linear_attention, weight_bytes: 4, state_bytes_per_request: 1}
  - {kind: attention, weight_bytes: 6, kv_bytes_per_token: 1}
  - {kind: linear_attention, weight_bytes: 4, state_bytes_per_request: 1}
  - {kind: linear_attention, weight_bytes: 4, state_bytes_per_request: 1}
  - {kind: attention, weight_bytes: 6, kv_bytes_per_token: 1}
default_workload: {context: 1, concurrency: 1}
"""
TOY_FLEET = """\
name: toy-racks
device: {memory: 10}
fleet: {racks: 3, per_rack: 2, intra_rack_latency_us: 2, inter_rack_latency_us: 3}
"""


def test_solve_dp_prints_stages_and_writes_a_valid_mapping(run_cli, tmp_path):
    out_file = tmp_path / "k.json"
    code, out, err = run_cli(["solve", "kimi-k3", "--hardware", "wse-3t", "--method", "dp", "-o", out_file])
    assert code == 0, err
    assert "devices 70 (lower bound 70), concurrency 184 (ceiling 184), hop latency 161 us over 69 hops" in out
    assert "status optimal (proven" in out
    assert "layers.0-1" not in out and "70 stages (--stages prints the table)" in out
    assert out.splitlines()[-1] == f"wrote {out_file}"
    doc = read_mapping(out_file)
    assert doc["summary"]["devices_used"] == 70 and doc["summary"]["method"] == "dp"
    assert validate_mapping(doc) == []


def test_solve_writes_only_where_o_says_and_says_where(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--method", "typepack", "--json"])
    assert code == 0
    doc = json.loads(out)
    assert doc["mode"] == "free" and doc["summary"]["devices_used"] == 59 and len(doc["stages"]) == 59
    assert list(tmp_path.iterdir()) == [], "solve without -o wrote a file"
    assert err.splitlines()[-1] == "mapping not written (-o FILE writes it)"
    code, out, _ = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--method", "greedy"])
    assert code == 0 and out.splitlines()[-1] == "mapping not written (-o FILE writes it)"
    assert list(tmp_path.iterdir()) == []
    target = tmp_path / "deep" / "k.json"
    code, out, err = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--method", "greedy", "--json", "-o", target])
    assert code == 0 and err.splitlines()[-1] == f"wrote {target}"
    assert json.loads(target.read_text()) == json.loads(out)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["deep", "k.json"]


def test_solve_leads_with_the_summary_and_prints_stages_on_request(run_cli):
    code, out, err = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--method", "dp", "--stages"])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "kimi-k3 on wse-3t, contiguous (layer), method dp: 93 nodes on 70 devices"
    assert lines[1].startswith("workload: context 256k (262,144 tokens), concurrency 184, weights 4-bit")
    assert lines[2].startswith("devices 70 (lower bound 70), concurrency 184")
    table = lines.index(next(x for x in lines if x.lstrip().startswith("stage ")))
    assert table > 2 and len(lines) - table - 1 == 70 + 1     # 70 stage rows, then where the mapping went
    assert lines[table + 1].split()[:3] == ["0", "r0w0", "0"] and "layers.0-1" in lines[table + 1]
    # without --stages the whole answer fits a screen
    code, out, _ = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--method", "dp"])
    assert code == 0 and len(out.splitlines()) <= 12


def test_solve_reports_an_impossible_concurrency_and_writes_nothing(run_cli, tmp_path):
    out_file = tmp_path / "none.json"
    code, out, _ = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--method", "dp", "--concurrency", "200",
                            "--time-limit", "2", "-o", out_file])
    assert code == 1
    assert "layers.3" in out and "largest feasible concurrency: 184" in out
    assert not out_file.exists()
    code, out, _ = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--method", "dp", "--concurrency", "200",
                            "--time-limit", "2", "-o", out_file, "--json"])
    doc = json.loads(out)
    assert code == 1 and doc["status"] == "infeasible" and doc["max_concurrency"] == 184
    assert not out_file.exists()


def test_solve_refuses_a_mode_the_method_does_not_place_in(run_cli):
    code, _, err = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--method", "typepack",
                            "--mode", "contiguous"])
    assert code == 2 and "typepack places in free mode" in err


def test_solve_with_pins(run_cli):
    code, out, err = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--method", "dp", "--pin", "0=r5w1",
                              "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["route"][0] == "r5w1" and doc["summary"]["devices_used"] == 70
    code, _, err = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--method", "dp", "--pin", "0=r99w0"])
    assert code == 2 and "r99w0" in err


def test_compare_library_rows_for_kimi_k3_without_the_solver():
    m = load_model("kimi-k3")
    rows = [r for r in COMPARE_ROWS if r[0] != "cpsat"]
    doc = compare(m, load_fleet("wse-3t"), workload_for(m), rows=rows)
    got = {(r["method"], r["mode"]): r for r in doc["rows"]}
    assert got["typepack", "free"]["devices_used"] == 59
    assert got["ffd", "free"]["devices_used"] == 59
    assert got["greedy", "contiguous"]["devices_used"] == 70
    assert got["dp", "contiguous"]["devices_used"] == 70 and got["dp", "contiguous"]["proven_optimal"]
    assert got["bound", "free"]["lower_bound_devices"] == 59
    assert got["bound", "contiguous"]["lower_bound_devices"] == 70
    assert got["bound", "split"]["granularity"] == "shards:4"
    for r in doc["rows"]:
        assert {"method", "mode", "devices_used", "hops", "hop_latency_us", "concurrency_ceiling",
                "lower_bound_devices", "proven_optimal", "status", "seconds"} <= set(r)


def test_compare_command_on_a_toy_fleet(run_cli, write):
    """Six nodes of 4 4 6 4 4 6 weight bytes + 1 B per live request (one request of one token) on
    10-byte devices: 5 5 7 5 5 7. Contiguous: 5+5 | 7 | 5+5 | 7 = 4 stages; free: no 7 pairs with
    anything, 5s pair: 4 devices, the bound (Martello-Toth). The published rule: 2 + 2 = 4 too."""
    model, hw = write("toy6.yaml", TOY_MODEL), write("toy-racks.yaml", TOY_FLEET)
    code, out, err = run_cli(["compare", model, "-H", hw, "--time-limit", "5", "--json"])
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [(r["method"], r["mode"]) for r in rows] == list(COMPARE_ROWS)
    by = {(r["method"], r["mode"]): r for r in rows}
    assert by["dp", "contiguous"]["devices_used"] == 4 and by["typepack", "free"]["devices_used"] == 4
    assert by["cpsat", "contiguous"]["devices_used"] == 4 and by["cpsat", "free"]["devices_used"] == 4
    assert by["bound", "free"]["lower_bound_devices"] == 4
    for r in rows:
        if r["devices_used"] is not None:
            assert r["devices_used"] >= r["lower_bound_devices"]
    code, out, _ = run_cli(["compare", model, "-H", hw, "--time-limit", "5"])
    assert code == 0 and "typepack  free" in out


def test_solve_progress_names_the_level_its_unit_and_a_valid_bound(run_cli):
    code, out, err = run_cli(["solve", "kimi-k3", "-H", "wse-3t", "--threads", "1", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    latency = doc["summary"]["hop_latency_us"]
    reports = [line for line in err.splitlines() if line.startswith("cpsat, ")]
    assert reports, err
    for line in reports:
        level, rest = line.removeprefix("cpsat, ").split(" level: ")
        assert level in ("devices", "hop latency"), line
        best, bound = (part.removeprefix("best ").removeprefix("lower bound ") for part in rest.split(", ")[:2])
        unit = " devices" if level == "devices" else " us"
        assert best.endswith(unit) and bound.endswith(unit), line
        if level == "hop latency":
            # a lower bound on the level: never above the best found, never the trivial 0 the solver's
            # search starts from (the chain's path bound, 161 us here, is known before it)
            assert float(bound.removesuffix(unit)) <= latency
            assert float(bound.removesuffix(unit)) == 161
