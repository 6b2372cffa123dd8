"""Plots: the patches drawn (devices, kind bands, memory bars, hops) and the files written."""

from __future__ import annotations

import json

import matplotlib
import pytest
from matplotlib.colors import to_hex

from placer.plotting import plot_frontier, plot_layout, save
from placer.plotting.plot_layout import KIND_COLORS, MEMORY_COLORS, UNUSED_COLOR

matplotlib.use("Agg")

# Hand-written mapping on a fleet of 2 racks x 3 devices that placer does not know by name.
MAPPING = {
    "schema_version": 1,
    "model": {"name": "handmade", "sha256": ""},
    "hardware": {"name": "not-in-the-catalog", "sha256": ""},
    "workload": {"context_tokens": 1024, "concurrency": 4, "weight_bits": 8, "kv_bits": 8, "state_bits": 32,
                 "micro_batch": 1},
    "mode": "contiguous",
    "stages": [
        {"index": 0, "device": "r0w0", "rack": 0, "layers": ["layers.0", "layers.1"],
         "bytes": {"weights": 60, "kv_reserve": 0, "state": 10, "activations": 0, "free": 30}},
        {"index": 1, "device": "r1w2", "rack": 1, "layers": ["layers.2"],
         "bytes": {"weights": 30, "kv_reserve": 50, "state": 0, "activations": 0, "free": 20}},
        {"index": 2, "device": "r1w1", "rack": 1, "layers": ["layers.3"],
         "bytes": {"weights": 40, "kv_reserve": 0, "state": 20, "activations": 0, "free": 40}},
    ],
    "route": ["r0w0", "r0w0", "r1w2", "r1w1"],
    "summary": {"devices_used": 3, "hops": 2, "hop_latency_us": 5.0},
}


def _gids(ax, prefix):
    return {p.get_gid()[len(prefix):]: p for p in ax.patches if (p.get_gid() or "").startswith(prefix)}


def test_layout_of_a_hand_written_mapping(tmp_path):
    ax = plot_layout(MAPPING)
    devices = _gids(ax, "device:")
    # no fleet known: racks 0..1 and slots 0..2 inferred from the ids
    assert sorted(devices) == ["r0w0", "r0w1", "r0w2", "r1w0", "r1w1", "r1w2"]
    used = {d for d, p in devices.items() if to_hex(p.get_facecolor()) == "#ffffff"}
    grey = {d for d, p in devices.items() if to_hex(p.get_facecolor()) == UNUSED_COLOR}
    assert used == {"r0w0", "r1w1", "r1w2"} and grey == {"r0w1", "r0w2", "r1w0"}
    # kinds from the bytes: KV reserve -> full attention, state -> linear attention
    fills = [to_hex(p.get_facecolor()) for p in ax.patches if p.get_gid() is None]
    assert fills.count(KIND_COLORS["attention"]) == 1
    assert fills.count(KIND_COLORS["linear_attention"]) == 2
    # memory bars: one segment per non-zero part; KV on one device, state on two, free on all three
    assert fills.count(MEMORY_COLORS["kv_reserve"]) == 1
    assert fills.count(MEMORY_COLORS["state"]) == 2
    assert fills.count(MEMORY_COLORS["weights"]) == 3
    kv = next(p for p in ax.patches if p.get_gid() is None and to_hex(p.get_facecolor()) == MEMORY_COLORS["kv_reserve"])
    box = devices["r1w2"]
    assert kv.get_width() == pytest.approx((box.get_width() - 0.08) * 50 / 100)
    # the path: r0w0 -> r1w2 -> r1w1
    assert sorted(_gids(ax, "hop:")) == ["r0w0->r1w2", "r1w2->r1w1"]
    png = tmp_path / "layout.png"
    save(ax.figure, png)
    assert png.stat().st_size > 5000 and png.read_bytes()[:4] == b"\x89PNG"


def test_layout_uses_a_given_fleet_and_greys_unavailable_devices():
    from placer.specs.fleet import fleet_from_dict

    fleet = fleet_from_dict({"name": "t", "device": {"memory": "100 B"},
                             "fleet": {"racks": 3, "per_rack": 3, "unavailable": ["r2w0"]}})
    ax = plot_layout(MAPPING, fleet=fleet)
    devices = _gids(ax, "device:")
    assert len(devices) == 9
    assert devices["r2w0"].get_hatch() == "////"
    assert sum(to_hex(p.get_facecolor()) == "#ffffff" for p in devices.values()) == 3


def test_layout_of_kimi_k3_on_96_wafers():
    from placer import load_fleet, load_model, make_instance, workload_for
    from placer.algorithms import place
    from placer.mapping import build_mapping

    m = load_model("kimi-k3")
    inst = make_instance(m, load_fleet("wse-3t"), workload_for(m, concurrency=64))
    result = place(inst, method="dp")
    doc = json.loads(json.dumps(build_mapping(inst, result)))
    ax = plot_layout(doc)
    devices = _gids(ax, "device:")
    assert len(devices) == 96
    used = {d for d, p in devices.items() if to_hex(p.get_facecolor()) == "#ffffff"}
    assert used == {s["device"] for s in doc["stages"]} and len(used) == result.devices_used == 47
    # kinds from the catalog model: 24 full-attention layers, 69 linear ones, bands in proportion
    attention = [p for p in ax.patches if p.get_gid() is None and
                 to_hex(p.get_facecolor()) == KIND_COLORS["attention"]]
    assert sum(p.get_width() for p in attention) == pytest.approx(
        sum(1.0 * sum(n in {f"layers.{4 * k + 3}" for k in range(23)} | {"layers.92"} for n in s["layers"])
            / len(s["layers"]) for s in doc["stages"]))
    assert len(_gids(ax, "hop:")) == 46


def _rows():
    ok = "optimal"
    return [
        dict(mode="contiguous", context_tokens=32768, weight_bits=4, kv_bits=8, concurrency=1, devices_used=47,
             status=ok, proven_optimal=True, pareto=False),
        dict(mode="contiguous", context_tokens=32768, weight_bits=4, kv_bits=8, concurrency=512, devices_used=70,
             status=ok, proven_optimal=True, pareto=True),
        dict(mode="free", context_tokens=32768, weight_bits=4, kv_bits=8, concurrency=512, devices_used=59,
             status="feasible", proven_optimal=False, pareto=True),
        dict(mode="free", context_tokens=32768, weight_bits=4, kv_bits=8, concurrency=1, devices_used=47,
             status=ok, proven_optimal=True, pareto=True),
        dict(mode="free", context_tokens=32768, weight_bits=4, kv_bits=8, concurrency=1024, devices_used=None,
             status="infeasible", proven_optimal=False, pareto=False),
    ]


def test_frontier_lines_follow_the_rows(tmp_path):
    ax = plot_frontier(_rows(), references={"published: 59": 59}, fleet_devices=96)
    lines = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    assert sorted(lines) == ["32k contiguous", "32k free"]
    assert list(lines["32k contiguous"].get_xdata()) == [1, 512]
    assert list(lines["32k free"].get_ydata()) == [47, 59]          # the infeasible point is left out
    assert lines["32k free"].get_linestyle() == "--"
    hlines = [ln for ln in ax.get_lines() if ln.get_label().startswith("_")]
    assert sorted(ln.get_ydata()[0] for ln in hlines) == [59, 96]
    assert ax.get_xscale() == "log"
    png = tmp_path / "f.png"
    save(ax.figure, png)
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_frontier_draws_on_a_given_axes():
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2)
    assert plot_frontier(_rows(), ax=b) is b
    assert not a.get_lines() and b.get_lines()
    plt.close(fig)


def test_plot_cli(run_cli, tmp_path, write):
    mapping = write("m.json", json.dumps(MAPPING))
    png = tmp_path / "m.png"
    code, out, err = run_cli(["plot", mapping, "-o", png])
    assert code == 0, err
    assert png.stat().st_size > 5000
    broken = write("bad.json", json.dumps({"stages": [{"layers": []}]}))
    code, out, err = run_cli(["plot", broken, "-o", png])
    assert code == 2 and "stages.0.device" in err
    code, out, err = run_cli(["plot", tmp_path / "missing.json", "-o", png])
    assert code == 2 and "file not found" in err


def test_frontiers_one_panel_per_mode():
    from placer.plotting import plot_frontiers

    fig = plot_frontiers(_rows(), references={"published: 59": 59})
    left, right = fig.axes
    assert left.get_title() == "contiguous placement" and right.get_title() == "free placement"
    labels = [[ln.get_label() for ln in ax.get_lines() if not ln.get_label().startswith("_")] for ax in fig.axes]
    assert labels == [["32k contiguous"], ["32k free"]]
    # one mode per panel: solid lines; both panels share the device axis
    assert right.get_lines()[0].get_linestyle() == "-"
    assert left.get_shared_y_axes().joined(left, right)


def test_plot_cli_draws_a_results_csv(run_cli, tmp_path):
    from placer.planning.studies.sweep import write_rows

    rows = [dict(r, setup="s", model="m", hardware="h", fleet_devices=96, method="dp") for r in _rows()]
    write_rows(tmp_path / "r.csv", rows)
    code, out, err = run_cli(["plot", tmp_path / "r.csv", "-o", tmp_path / "f.png", "--reference", "published=59"])
    assert code == 0, err
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    code, out, err = run_cli(["plot", tmp_path / "r.csv", "-o", tmp_path / "f.png", "--reference", "59"])
    assert code == 2 and "LABEL=N" in err


def test_layout_extends_a_catalog_fleet_to_the_racks_a_mapping_uses():
    # a mapping made on wse-3t resized to more racks: the catalog's 32 racks, then racks 32..40
    doc = json.loads(json.dumps(MAPPING))
    doc["hardware"]["name"] = "wse-3t"
    doc["stages"][2]["device"] = "r40w1"
    doc["route"][-1] = "r40w1"
    devices = _gids(plot_layout(doc), "device:")
    assert len(devices) == 96 + 9 * 3
    assert to_hex(devices["r40w1"].get_facecolor()) == "#ffffff"
    assert to_hex(devices["r39w0"].get_facecolor()) == UNUSED_COLOR
