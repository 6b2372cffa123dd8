"""The layout plot draws a stage on a group of devices as one box labelled with its degrees."""

from __future__ import annotations

import matplotlib
import pytest
from matplotlib.colors import to_hex

from placer.plotting import plot_layout
from placer.plotting.plot_layout import GROUP_COLOR, MEMORY_COLORS, UNUSED_COLOR

matplotlib.use("Agg")


def _stage(index, devices, layers, ep=1):
    return {"index": index, "device": devices[0], "rack": int(devices[0][1]), "layers": layers,
            "group": {"devices": devices, "tp": len(devices), "ep": ep},
            "bytes": {"weights": 50, "kv_reserve": 30, "state": 0, "activations": 0, "reserve": 10, "free": 10}}


# two stages of 2 GPUs in rack 0 and one of 2 in rack 1, on ids placer infers a 2 x 4 fleet from
MAPPING = {
    "schema_version": 2, "model": {"name": "handmade", "sha256": ""},
    "hardware": {"name": "not-in-the-catalog", "sha256": ""},
    "workload": {"context_tokens": 1024, "concurrency": 4}, "mode": "contiguous",
    "stages": [_stage(0, ["r0g0", "r0g1"], ["layers.0"]), _stage(1, ["r0g2", "r0g3"], ["layers.1"], ep=2),
               _stage(2, ["r1g0", "r1g1"], ["layers.2"])],
    "route": ["r0g0", "r0g2", "r1g0"],
    "summary": {"devices_used": 6, "hops": 2, "hop_latency_us": 30.0},
}


def _gids(ax, prefix):
    return {p.get_gid()[len(prefix):]: p for p in ax.patches if (p.get_gid() or "").startswith(prefix)}


def test_groups_are_one_box_around_their_members_with_the_degrees():
    ax = plot_layout(MAPPING)
    devices = _gids(ax, "device:")
    groups = _gids(ax, "group:")
    assert sorted(groups) == ["r0g0", "r0g2", "r1g0"]
    used = {d for d, p in devices.items() if to_hex(p.get_facecolor()) == "#ffffff"}
    assert used == {"r0g0", "r0g1", "r0g2", "r0g3", "r1g0", "r1g1"}
    assert {d for d, p in devices.items() if to_hex(p.get_facecolor()) == UNUSED_COLOR} == {"r1g2", "r1g3"}
    for first, second in (("r0g0", "r0g1"), ("r0g2", "r0g3"), ("r1g0", "r1g1")):
        box, a, b = groups[first], devices[first], devices[second]
        assert to_hex(box.get_edgecolor()) == GROUP_COLOR
        # the outline encloses exactly its two members' boxes (and no other device)
        lo, hi = box.get_y(), box.get_y() + box.get_height()
        assert lo < min(a.get_y(), b.get_y()) and hi > max(a.get_y(), b.get_y()) + a.get_height()
        others = [p for d, p in devices.items() if d not in (first, second) and p.get_x() == a.get_x()]
        assert all(p.get_y() + p.get_height() <= lo or p.get_y() >= hi for p in others)
    labels = {t.get_gid()[len("label:"):]: t.get_text() for t in ax.texts if (t.get_gid() or "").startswith("label:")}
    assert labels == {"r0g0": "s0 L0 tp2", "r0g2": "s1 L1 tp2 ep2", "r1g0": "s2 L2 tp2"}
    # every member carries the per-device memory bar: 6 weight segments, KV segments of 30 / 100
    fills = [p for p in ax.patches if p.get_gid() is None]
    kv = [p for p in fills if to_hex(p.get_facecolor()) == MEMORY_COLORS["kv_reserve"]]
    assert len([p for p in fills if to_hex(p.get_facecolor()) == MEMORY_COLORS["weights"]]) == 6
    assert len(kv) == 6 and kv[0].get_width() == pytest.approx((devices["r0g0"].get_width() - 0.08) * 30 / 100)
    assert sorted(_gids(ax, "hop:")) == ["r0g0->r0g2", "r0g2->r1g0"]
