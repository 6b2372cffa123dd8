"""The fleet's shortest-path latency matrix against networkx's Dijkstra."""

from __future__ import annotations

import math

import networkx as nx
import pytest

from placer.specs.fleet import fleet_from_dict


def _spec(**fleet):
    base = {"racks": 5, "per_rack": 3, "intra_rack_latency_us": 2, "inter_rack_latency_us": 7,
            "inter_rack_topology": "ring"}
    base.update(fleet)
    return {"name": "t", "device": {"memory": "1 GB"}, "fleet": base}


@pytest.mark.parametrize("extra", [
    [],
    [{"a": "r0w1", "b": "r3w2", "latency_us": 1.5}],
    [{"a": "r0w1", "b": "r3w2", "latency_us": 0}],   # zero-latency link: networkx path
])
def test_matrix_equals_networkx(extra):
    f = fleet_from_dict(_spec(extra_links=extra, unavailable=["r2w0"]))
    ids = [d.id for d in f.available]
    ref = dict(nx.all_pairs_dijkstra_path_length(f.graph, weight="latency_us"))
    m = f.latency_matrix
    assert m.shape == (len(ids), len(ids))
    for i, a in enumerate(ids):
        for j, b in enumerate(ids):
            assert m[i, j] == ref[a].get(b, math.inf)


def test_disconnected_devices_are_infinitely_far():
    # r2w0 carries the ring link between racks 1-2 and 2-3; without it rack 2's other wafers are cut off
    f = fleet_from_dict(_spec(inter_rack_topology="line", unavailable=["r2w0"]))
    ids = [d.id for d in f.available]
    m = f.latency_matrix
    assert math.isinf(m[ids.index("r0w0"), ids.index("r2w1")])
    assert m[ids.index("r2w1"), ids.index("r2w2")] == 2.0
    # line: r0w0 -> r1w0 -> (r1w0 to r2w0 is gone) so rack 3 is unreachable from rack 0 as well
    assert math.isinf(m[ids.index("r0w0"), ids.index("r3w0")])
    assert "r2w1" not in f.shortest_latency_us["r0w0"]


def test_zero_latency_links_match_networkx():
    """0 us links (scipy drops zero weights, so placer contracts them) give networkx's distances."""
    import random

    import networkx as nx
    import numpy as np

    from placer.specs.fleet import fleet_from_dict

    rng = random.Random(1)
    for _ in range(30):
        spec = {"name": "x", "device": {"memory": 10},
                "fleet": {"racks": rng.randint(1, 5), "per_rack": rng.randint(1, 4),
                          "intra_rack_latency_us": rng.choice([0, 0, 1, 2.5]),
                          "inter_rack_latency_us": rng.choice([0, 3, 1.5]),
                          "inter_rack_topology": rng.choice(["full", "line", "ring"])}}
        fl = fleet_from_dict(spec)
        ids = [d.id for d in fl.available]
        dist = dict(nx.all_pairs_dijkstra_path_length(fl.graph, weight="latency_us"))
        ref = np.array([[dist[a].get(b, np.inf) for b in ids] for a in ids])
        assert np.array_equal(ref, fl.latency_matrix), spec


def test_small_fleets_shortest_paths_equal_scipys():
    """Fleets up to DENSE_DIJKSTRA_DEVICES devices get their shortest paths without scipy; the
    floats are exactly scipy's (the oracle) on random fleets with 0 us links, unavailable devices
    and pieces, and on the catalog's dense wafer fleet."""
    import random

    import numpy as np
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    from placer.specs.fabric import _all_pairs_dijkstra
    from placer.specs.fleet import fleet_from_dict, load_fleet

    rng = random.Random(3)
    fleets = [load_fleet("wse-3t")]
    for _ in range(25):
        racks, per = rng.randint(1, 6), rng.randint(1, 5)
        ids = [f"r{r}w{s}" for r in range(racks) for s in range(per)]
        fleets.append(fleet_from_dict({"name": "r", "device": {"memory": 1000}, "fleet": {
            "racks": racks, "per_rack": per, "intra_rack_latency_us": rng.choice([0, 0.3, 1.7, 4.2]),
            "inter_rack_latency_us": rng.choice([0.1, 2.9, 7.3]),
            "inter_rack_topology": rng.choice(["line", "ring", "full"]),
            "unavailable": rng.sample(ids, rng.randint(0, len(ids) // 3))}}))
    for fleet in fleets:
        ids = [d.id for d in fleet.available]
        index = {d: k for k, d in enumerate(ids)}
        rows = [index[a] for a, _ in fleet.link_table]
        cols = [index[b] for _, b in fleet.link_table]
        vals = [lat for lat, _ in fleet.link_table.values()]
        n = len(ids)
        mine = _all_pairs_dijkstra(n, rows, cols, vals)
        assert np.array_equal(mine, fleet.latency_matrix)
        positive = [(r, c, v) for r, c, v in zip(rows, cols, vals) if v > 0]
        if len(positive) == len(vals) and vals:       # scipy drops 0-weight entries: compare where it can
            pr, pc, pv = zip(*positive)
            ref = shortest_path(csr_matrix((pv, (pr, pc)), shape=(n, n)), method="D", directed=False)
            assert np.array_equal(mine, ref)
