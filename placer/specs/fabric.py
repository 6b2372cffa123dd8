"""The inter-rack fabric of a fleet as a formula: latencies between devices without a table.

A hardware spec joins its racks by ``inter_rack_topology``:

* ``full``: every device pair of two racks is linked at ``inter_rack_latency_us`` (a switch fabric
  seen as a mesh);
* ``leaf-spine``: racks (NVLink nodes, CS systems) hang ``racks_per_leaf`` to a leaf switch; two
  racks of one leaf are linked at ``inter_rack_latency_us``, of two leaves at that plus
  ``spine_latency_us`` (the hop up to a spine and down);
* ``ring`` / ``line``: slot 0 of consecutive racks is linked (the last to the first on a ring of
  more than two racks);
* ``torus``: the racks in rows of ``racks_per_row``, slot 0 of each linked to its neighbours in
  its row and column, both wrapping round (a 2-D torus; a dimension of two racks has one link).

Inside a rack every pair is linked at ``intra_rack_latency_us`` (a rack-scale domain). The mesh
and leaf-spine links are implied by the fabric, never listed (a listed full mesh of n devices
holds n^2 / 2 links); the ring and line links are listed (one per rack).

:meth:`Fabric.path_us` is the shortest-path latency between two devices, as Dijkstra over the
listed and implied links would find it, whenever :meth:`Fabric.exact_for` holds: no extra links
(which could short-cut any path), every ring or line gateway (slot 0) available (a path between
racks runs through them), and an intra-rack link no dearer than two inter-rack hops (else a path
between two devices of one rack may leave the rack). Why the formula is then the shortest path:

* same rack: the direct link; any other path leaves the rack and comes back, two inter-rack hops
  at least (on a ring or line through the rack's one gateway, which a simple path cannot do);
* two racks of a mesh (or of one leaf): the direct link; any other path holds at least one
  inter-rack hop plus another hop;
* two leaves: the direct link (inter + spine); any other path crosses leaves once at least;
* ring / line / torus: leave through the gateway (an intra hop unless the device is the
  gateway), the rack distance (the shorter way round a ring; on a torus the shorter way round in
  each dimension, added) in inter-rack hops between gateways, enter through the other gateway.
  Gateways are the only links between racks, so every path does this.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Fabric", "TOPOLOGIES", "shortest_paths", "DENSE_DIJKSTRA_DEVICES"]

TOPOLOGIES = ("full", "ring", "line", "leaf-spine", "torus")
# topologies whose racks are joined only through one gateway device each (slot 0)
GATEWAYS = ("ring", "line", "torus")
# topologies whose inter-rack links are implied by the fabric instead of listed
IMPLIED = ("full", "leaf-spine")


@dataclass(frozen=True)
class Fabric:
    """``kind`` (one of :data:`TOPOLOGIES`), the latencies (us) and bandwidths (B/s) of the spec,
    ``racks`` the number of racks, ``racks_per_leaf`` and ``spine_us`` for a leaf-spine fabric,
    ``extra`` whether the spec adds links of its own (the formula then is no shortest path)."""

    kind: str
    intra_us: float
    inter_us: float
    racks: int
    intra_bw: float | None = None
    inter_bw: float | None = None
    racks_per_leaf: int = 0
    spine_us: float = 0.0
    racks_per_row: int = 0          # torus: racks per row (the rows are racks / racks_per_row)
    extra: bool = False
    # the formula was checked on the full fleet this one is a part of (placer.algorithms.quotient):
    # it stays the shortest path of the full fleet, whose racks and gateways this part may lack
    checked: bool = False

    @property
    def implied(self) -> bool:
        """Inter-rack links are implied (mesh, leaf-spine), not listed in the fleet's links."""
        return self.kind in IMPLIED

    def leaf(self, rack: int) -> int:
        return rack // self.racks_per_leaf if self.kind == "leaf-spine" and self.racks_per_leaf else 0

    def exact_for(self, devices) -> bool:
        """Whether :meth:`path_us` is the shortest path among ``devices`` (the available ones; see
        the module docstring)."""
        if self.checked:
            return True
        if self.extra or self.intra_us > 2 * self.inter_us:
            return False
        if self.kind in GATEWAYS:
            return {d.rack for d in devices if d.slot == 0} == set(range(self.racks))
        return True

    def rack_distance(self, ra, rb):
        """Inter-rack hops between the gateways of racks ``ra`` and ``rb`` (ring, line, torus; ints or
        numpy arrays)."""
        if self.kind == "torus":
            width = self.racks_per_row
            return _wrapped(ra % width, rb % width, width) + _wrapped(ra // width, rb // width,
                                                                       self.racks // width)
        if self.kind == "ring":
            return _wrapped(ra, rb, self.racks)
        return abs(ra - rb)

    def link_us(self, a, b) -> float | None:
        """Latency of the direct link between devices ``a`` and ``b`` (objects with ``rack`` and
        ``slot``) that the fabric makes: intra-rack, implied, or a ring/line gateway link; None when
        the fabric links them not (extra links aside)."""
        if a.rack == b.rack:
            return self.intra_us
        if self.kind == "full":
            return self.inter_us
        if self.kind == "leaf-spine":
            return self.inter_us + (self.spine_us if self.leaf(a.rack) != self.leaf(b.rack) else 0.0)
        if a.slot == 0 and b.slot == 0 and self.rack_distance(a.rack, b.rack) == 1:
            return self.inter_us
        return None

    def link_bw(self, a, b) -> float | None:
        return self.intra_bw if a.rack == b.rack else self.inter_bw

    def path_us(self, a, b) -> float:
        """Shortest-path latency between devices ``a`` and ``b`` (exact when :meth:`exact_for`)."""
        if a.id == b.id:
            return 0.0
        if a.rack == b.rack or self.kind in IMPLIED:
            return self.link_us(a, b)
        total = self.intra_us if a.slot != 0 else 0.0
        for _ in range(self.rack_distance(a.rack, b.rack)):
            total += self.inter_us          # hop by hop, the sums Dijkstra forms (the same floats)
        return total + self.intra_us if b.slot != 0 else total

    def matrix(self, devices) -> np.ndarray:
        """:meth:`path_us` between every pair of ``devices``, vectorised (the same sums in the same
        order, so the same floats)."""
        rack = np.array([d.rack for d in devices], dtype=np.int64)
        slot = np.array([d.slot for d in devices], dtype=np.int64)
        same = rack[:, None] == rack[None, :]
        if self.kind in IMPLIED:
            out = np.full(same.shape, float(self.inter_us))
            if self.kind == "leaf-spine" and self.racks_per_leaf:
                leaf = rack // self.racks_per_leaf
                out = np.where(leaf[:, None] != leaf[None, :], float(self.inter_us + self.spine_us), out)
        else:
            d = self.rack_distance(rack[:, None], rack[None, :])
            # sums[s, k]: leave (s: through an intra hop) then k inter-rack hops, added hop by hop
            sums = np.zeros((2, int(d.max()) + 1 if d.size else 1))
            sums[1, 0] = self.intra_us
            for k in range(1, sums.shape[1]):
                sums[:, k] = sums[:, k - 1] + self.inter_us
            out = sums[(slot != 0).astype(np.int64)[:, None], d]
            out = np.where(slot[None, :] != 0, out + self.intra_us, out)
        out = np.where(same, float(self.intra_us), out)
        np.fill_diagonal(out, 0.0)
        return out

    def implied_links(self, devices):
        """The implied inter-rack links among ``devices``: ``(a, b, latency, bandwidth)``, each
        pair once (mesh and leaf-spine; nothing for ring and line, whose links are listed)."""
        if not self.implied:
            return
        devices = list(devices)
        for i, a in enumerate(devices):
            for b in devices[i + 1:]:
                if a.rack != b.rack:
                    yield a.id, b.id, self.link_us(a, b), self.inter_bw


def _wrapped(a, b, size: int):
    """Steps between positions a and b of a cycle of ``size`` (a path when size <= 2)."""
    d = abs(a - b)
    return np.minimum(d, size - d) if size > 2 else d


# fleets of up to this many available devices run Dijkstra in numpy (milliseconds; importing
# scipy for it would cost more than the search)
DENSE_DIJKSTRA_DEVICES = 400


def _all_pairs_dijkstra(n: int, rows, cols, vals) -> np.ndarray:
    """Shortest-path lengths between all ``n`` nodes of the undirected graph with edges
    ``rows[k] - cols[k]`` of length ``vals[k] >= 0`` (inf when unreachable).

    Dijkstra from every node at once on the dense length matrix: each round settles, for every
    source, its nearest unsettled node ``u`` and relaxes ``dist[u] + length(u, v)``, the sum
    Dijkstra forms, so the floats equal those of any other Dijkstra (scipy's, networkx's).
    """
    w = np.full((n, n), np.inf)
    for a, b, x in zip(rows, cols, vals):
        if a != b and x < w[a, b]:
            w[a, b] = w[b, a] = x
    dist = np.full((n, n), np.inf)
    np.fill_diagonal(dist, 0.0)
    settled = np.zeros((n, n), dtype=bool)
    every = np.arange(n)
    for _ in range(n):
        u = np.where(settled, np.inf, dist).argmin(axis=1)
        settled[every, u] = True
        dist = np.minimum(dist, dist[every, u][:, None] + w[u])
    return dist


def shortest_paths(n: int, rows, cols, vals) -> np.ndarray:
    """Shortest-path lengths between all ``n`` nodes of the undirected graph with edges ``rows[k] -
    cols[k]`` of length ``vals[k] >= 0`` (at least one edge): in numpy up to
    :data:`DENSE_DIJKSTRA_DEVICES` nodes (importing scipy would cost more than the search), else in
    compiled code (scipy.sparse.csgraph). Both relax the same sums, so they give the same floats."""
    if n <= DENSE_DIJKSTRA_DEVICES:
        return _all_pairs_dijkstra(n, rows, cols, vals)
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components, shortest_path

    if min(vals) <= 0.0:
        # scipy's sparse graphs drop zero-weight edges: contract every group of devices joined by
        # 0 us links into one node (all at distance 0), run Dijkstra on the positive rest, expand
        zero = [(r, c) for r, c, v in zip(rows, cols, vals) if v <= 0.0]
        zr, zc = zip(*zero)
        _, label = connected_components(csr_matrix((np.ones(len(zero)), (zr, zc)), shape=(n, n)),
                                        directed=False)
        k = int(label.max()) + 1
        best: dict[tuple[int, int], float] = {}
        for r, c, v in zip(rows, cols, vals):
            a, b = int(label[r]), int(label[c])
            if v > 0.0 and a != b:
                key = (min(a, b), max(a, b))
                best[key] = min(best.get(key, np.inf), v)
        if best:
            (qa, qb), qv = zip(*best.keys()), list(best.values())
            quotient = shortest_path(csr_matrix((qv, (qa, qb)), shape=(k, k)), method="D", directed=False)
        else:
            quotient = np.full((k, k), np.inf)
            np.fill_diagonal(quotient, 0.0)
        return quotient[np.ix_(label, label)]
    graph = csr_matrix((vals, (rows, cols)), shape=(n, n))
    return shortest_path(graph, method="D", directed=False)
