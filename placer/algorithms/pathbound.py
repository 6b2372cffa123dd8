"""Fewest devices of a contiguous chain on a sparse fleet graph: a Lagrangian relaxation of simple
paths, which gives a lower bound that sees the graph and, often, an optimal path.

A contiguous placement is a simple path of directly linked devices d_1, ..., d_S with the chain cut
into S stages, stage k fitting d_k. Order-free bounds (a Pareto DP over capacity classes) ignore
the graph: on a ring with a few chords the devices they pick cannot be visited in one path, and the
bound stays far below the fewest devices any path needs. Here the path is relaxed to a
*non-backtracking walk* (consecutive stages on linked devices, never straight back to the device
before), found exactly by a dynamic program over (chain position, last link), and the rule "each
device at most once" is priced in (Held & Karp's device prices, a subgradient method):

    L(price) = min over walks of sum over stages (1 + price[d_k])  -  sum over devices price[d]

For prices >= 0, a simple path of S stages costs at most S + sum of prices, so every placement
needs at least ceil(L(price)) devices: a valid bound for any prices. The program runs on integer
prices (units of 2^-20 device), so the bound is exact integer arithmetic, never a rounding. A walk
that visits no device twice is itself a placement (stages fit by construction, links are direct):
the best one found is returned too, and every few rounds a beam search over simple paths, ranked
by the current prices plus the priced walk covering the rest of the chain (the same program on the
reversed chain), looks for a better one. Pure function of plain lists (numpy inside); no solver.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from placer.algorithms.deadline import Deadline

__all__ = ["PathRelaxation", "path_relaxation"]

SCALE = 1 << 20            # price units per device
INF = np.int64(1) << 62


@dataclass(frozen=True)
class PathRelaxation:
    """``bound``: no contiguous placement uses fewer devices (None: the walk program found no walk,
    so nothing is claimed); ``order`` / ``ends``: the best simple path found (stage k on
    ``order[k]`` holding nodes up to ``ends[k]`` exclusive), or None; ``iterations``: programs
    solved."""

    bound: int | None
    order: list[int] | None
    ends: list[int] | None
    iterations: int


class _Walks:
    """The walk program's fixed parts: arcs (start arcs -1 -> v first), predecessors, reach."""

    def __init__(self, demand, capacities, links):
        self.n = n = len(demand)
        self.d = D = len(capacities)
        arcs = [(-1, v) for v in range(D)]
        arcs += sorted({(int(a), int(b)) for a, b in links if a != b})
        self.arcs = arcs
        A = len(arcs)
        into: dict[int, list[int]] = {}
        for k, (u, v) in enumerate(arcs):
            if u >= 0:
                into.setdefault(v, []).append(k)
        preds = [[] if v < 0 else [a for a in into.get(v, []) + [v] if arcs[a][0] != w] for v, w in arcs]
        width = max(1, max(len(p) for p in preds))
        self.pred = np.full((A, width), -1, dtype=np.int64)
        for k, p in enumerate(preds):
            self.pred[k, :len(p)] = p
        self.head = np.array([w for _, w in arcs], dtype=np.int64)
        self.is_start = np.array([u < 0 for u, _ in arcs])
        prefix = np.zeros(n + 1, dtype=np.int64)
        prefix[1:] = np.cumsum(np.asarray(demand, dtype=np.int64))
        cap = np.asarray(capacities, dtype=np.int64)[self.head]
        # reach[j, b]: the furthest end of a stage starting at node j on the head of arc b
        self.reach = np.searchsorted(prefix, prefix[:-1, None] + cap[None, :], side="right") - 1
        self.longest = int(max(1, (self.reach - np.arange(n)[:, None]).max())) if n else 1

    def solve(self, weight, *, table: bool = False):
        """(least walk cost, walk as [(device, end)]) for integer stage weights per device; with
        ``table``, the table f[j, arc] (least cost of a walk covering nodes [0, j) whose last stage
        is on the arc's head) instead of the walk."""
        n, A, L = self.n, len(self.arcs), self.longest
        cost = np.asarray(weight, dtype=np.int64)[self.head]
        valid = self.pred >= 0
        safe = np.where(valid, self.pred, 0)
        g = np.full((n + 1, A), INF, dtype=np.int64)        # before a stage on arc b starting at j
        g_arg = np.full((n + 1, A), -1, dtype=np.int64)
        f = np.full((n + 1, A), INF, dtype=np.int64)        # a stage on arc b ending at j
        f_len = np.zeros((n + 1, A), dtype=np.int64)
        g[0] = np.where(self.is_start, 0, INF)
        rows = np.arange(A)
        for j in range(1, n + 1):
            lo = max(0, j - L)
            starts = np.arange(lo, j)
            cand = g[lo:j] + cost[None, :]
            cand = np.where((self.reach[lo:j] >= j) & (g[lo:j] < INF), cand, INF)
            k = cand.argmin(axis=0)
            f[j] = cand[k, rows]
            f_len[j] = j - starts[k]
            if j < n:
                vals = np.where(valid, f[j][safe], INF)
                p = vals.argmin(axis=1)
                g[j] = np.where(self.is_start, INF, vals[rows, p])
                g_arg[j] = self.pred[rows, p]
        if table:
            return f
        b = int(f[n].argmin())
        best = int(f[n, b])
        if best >= INF:
            return None, None
        walk = []
        j = n
        while j > 0:
            walk.append((int(self.head[b]), j))
            j -= int(f_len[j, b])
            if j > 0:
                b = int(g_arg[j, b])
        walk.reverse()
        return best, walk


def path_relaxation(demand, capacities, links, *, upper: int | None = None, iterations: int = 150,
                    beam_every: int = 10, beam_width: int = 40, patience: int = 40,
                    deadline: Deadline | None = None) -> PathRelaxation:
    """Lower bound on the devices of any contiguous placement of the chain ``demand`` (bytes) on
    devices of ``capacities`` (bytes) joined by directed ``links`` [(a, b)], and the best simple
    path found (see the module docstring).

    Prices follow the subgradient of the device rule (Polyak steps towards the best path known,
    halved when the bound stalls). Every walk that visits no device twice is a placement; every
    ``beam_every`` programs a beam search of ``beam_width`` states per stage, ranked by the
    current prices, looks for one. ``upper``: a known device count; the search stops when the
    bound meets the best path, when neither moved in ``patience`` programs, after ``iterations``
    programs, or at ``deadline``.
    """
    if not demand or not capacities:
        return PathRelaxation(None, None, None, 0)
    links = [(int(a), int(b)) for a, b in links if a != b]
    walks = _Walks(demand, capacities, links)
    D = walks.d
    price = np.zeros(D)
    bound = None
    order = ends = None
    best_count = upper if upper is not None else D + 1
    theta, stall, best_value = 1.0, 0, -math.inf
    done = last_gain = 0
    for it in range(iterations):
        if deadline is not None and deadline.expired():
            break
        if it - last_gain >= patience:
            break                   # neither the bound nor the best path moved for a while
        lam = np.floor(price * SCALE).astype(np.int64)
        weight = SCALE + lam
        value, walk = walks.solve(weight)
        done += 1
        if walk is None:
            break
        got = -((int(lam.sum()) - value) // SCALE)      # ceil((value - sum) / SCALE), exactly
        if bound is None or got > bound:
            bound, last_gain = got, it
        devices = [d for d, _ in walk]
        uses = np.bincount(devices, minlength=D)
        if uses.max() <= 1 and len(walk) < best_count:
            best_count, last_gain = len(walk), it
            order, ends = devices, [e for _, e in walk]
        if bound < best_count and beam_every and it % beam_every == beam_every - 1:
            found = _beam(walks, demand, capacities, links, weight, width=beam_width, stop=deadline)
            if found is not None and len(found[0]) < best_count:
                best_count, last_gain = len(found[0]), it
                order, ends = found
        if bound >= best_count:
            break
        exact = (value - int(lam.sum())) / SCALE
        if exact > best_value + 1e-9:
            best_value, stall = exact, 0
        else:
            stall += 1
            if stall >= 8:
                theta, stall = theta / 2, 0
                if theta < 1e-3:
                    break
        sub = uses - 1.0
        norm = float((sub * sub).sum())
        if norm == 0:
            break
        target = best_count if best_count <= D else len(walk) + 1
        price = np.maximum(0.0, price + theta * max(target - exact, 0.05) / norm * sub)
    return PathRelaxation(bound, order, ends, done)


def _beam(walks: _Walks, demand, capacities, links, weight, *, width: int, stop: Deadline | None):
    """A simple path by beam search, stage by stage, ranked by the priced cost so far plus the
    priced cost of the cheapest walk covering the rest (the walk program on the reversed chain):
    (order, ends) of the first complete path, or None."""
    n, D = walks.n, walks.d
    back = _Walks(list(demand)[::-1], capacities, [(b, a) for a, b in links])
    rest_f = back.solve(weight, table=True)                # rest_f[i, arc]: the last i nodes
    rest = np.full((n + 1, D), INF, dtype=np.int64)
    for k, w in enumerate(back.head.tolist()):
        np.minimum(rest[:, w], rest_f[:, k], out=rest[:, w])
    rest[0, :] = 0
    prefix = [0]
    for x in demand:
        prefix.append(prefix[-1] + int(x))
    near: list[list[int]] = [[] for _ in range(D)]
    for a, b in links:
        if a != b:
            near[a].append(b)
    weight = [int(x) for x in weight]
    caps = [int(c) for c in capacities]

    def ends_from(j: int, d: int) -> list[int]:
        # every end of a stage on d starting at j, longest first (at most 3)
        out, e = [], j
        while e < n and prefix[e + 1] - prefix[j] <= caps[d]:
            e += 1
        while e > j and len(out) < 3:
            out.append(e)
            e -= 1
        return out

    def estimate(e: int, d: int, seen: int) -> int:
        if e == n:
            return 0
        row = rest[n - e]
        return min((int(row[w]) for w in near[d] if not seen >> w & 1), default=int(INF))

    layer = []
    for d in range(D):
        for e in ends_from(0, d):
            h = estimate(e, d, 1 << d)
            if h < INF:
                layer.append((weight[d] + h, weight[d], e, d, 1 << d, None))
    while layer:
        if stop is not None and stop.expired():
            return None
        layer.sort(key=lambda s: (s[0], -s[2]))
        kept, seen_keys = [], set()
        for state in layer:
            key = (state[2], state[3])
            if key in seen_keys:
                continue
            seen_keys.add(key)
            kept.append(state)
            if len(kept) >= width:
                break
        for state in kept:
            if state[2] == n:
                order, ends = [], []
                node = state
                while node is not None:
                    order.append(node[3])
                    ends.append(node[2])
                    node = node[5]
                return order[::-1], ends[::-1]
        layer = []
        for state in kept:
            _, g, j, d, seen, _ = state
            for w in near[d]:
                if seen >> w & 1:
                    continue
                for e in ends_from(j, w):
                    h = estimate(e, w, seen | 1 << w)
                    if h >= INF:
                        continue
                    layer.append((g + weight[w] + h, g + weight[w], e, w, seen | 1 << w, state))
    return None
