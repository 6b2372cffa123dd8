"""An independent brute-force oracle for small placement instances.

It shares no code with placer: it reads the same plain spec dicts the tests give placer, computes
demands with its own byte arithmetic (weights + concurrency x context x KV bytes per token), builds
its own fleet graph (racks, topology, extra links, unavailable devices) with its own shortest
paths, and enumerates every assignment of nodes to devices. Latencies are compared as exact
decimals (``Fraction(str(x))``), so the oracle itself rounds nothing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

INF = None


@dataclass(frozen=True)
class Optimum:
    devices: int | None                      # fewest devices; None: no placement
    latency: Fraction | None                 # least hop latency among placements with that count
    concurrency: int | None = None           # (with devices fixed) the largest smallest-stage ceiling


def _dec(x) -> Fraction:
    return Fraction(str(x))


def fleet_devices(spec: dict) -> tuple[list[str], dict[str, int], dict[tuple[str, str], Fraction]]:
    """(available device ids in spec order, memory per id, direct links as exact decimals)."""
    f = spec["fleet"]
    types = spec.get("device_types") or {"t": spec["device"]}
    groups = f.get("groups") or [{"device": "t", "racks": f["racks"], "per_rack": f["per_rack"]}]
    racks: list[list[str]] = []
    memory: dict[str, int] = {}
    for g in groups:
        for _ in range(g["racks"]):
            r = len(racks)
            ids = [f"r{r}w{s}" for s in range(g["per_rack"])]
            for i in ids:
                memory[i] = int(types[g["device"]]["memory"])
            racks.append(ids)
    gone = set(f.get("unavailable", ()))
    links: dict[frozenset, Fraction] = {}

    def add(a, b, lat):
        key = frozenset((a, b))
        lat = _dec(lat)
        if key not in links or links[key] > lat:
            links[key] = lat

    for ids in racks:
        for a, b in itertools.combinations(ids, 2):
            add(a, b, f["intra_rack_latency_us"])
    topo = f.get("inter_rack_topology", "full")
    if topo in ("full", "leaf-spine"):
        # leaf-spine: racks_per_leaf racks per leaf switch, spine_latency_us more between leaves
        per_leaf = f.get("racks_per_leaf") or len(racks)
        for r1, r2 in itertools.combinations(range(len(racks)), 2):
            lat = _dec(f["inter_rack_latency_us"])
            if topo == "leaf-spine" and r1 // per_leaf != r2 // per_leaf:
                lat += _dec(f.get("spine_latency_us", 0))
            for a in racks[r1]:
                for b in racks[r2]:
                    add(a, b, lat)
    else:
        pairs = [(r, r + 1) for r in range(len(racks) - 1)]
        if topo == "ring" and len(racks) > 2:
            pairs.append((len(racks) - 1, 0))
        for r1, r2 in pairs:
            add(racks[r1][0], racks[r2][0], f["inter_rack_latency_us"])
    for link in f.get("extra_links", ()):
        add(link["a"], link["b"], link["latency_us"])
    alive = [i for ids in racks for i in ids if i not in gone]
    direct = {}
    for key, lat in links.items():
        a, b = tuple(key)
        if a in gone or b in gone:
            continue
        direct[a, b] = direct[b, a] = lat
    return alive, memory, direct


def hop_costs(alive, direct) -> dict[tuple[str, str], Fraction | None]:
    """A hop's cost: the direct link when there is one, else the shortest path (None: unreachable)."""
    dist = {(a, b): (Fraction(0) if a == b else direct.get((a, b))) for a in alive for b in alive}
    for k in alive:
        for a in alive:
            if dist[a, k] is None:
                continue
            for b in alive:
                if dist[k, b] is None:
                    continue
                via = dist[a, k] + dist[k, b]
                if dist[a, b] is None or via < dist[a, b]:
                    dist[a, b] = via
    return {(a, b): (direct[a, b] if (a, b) in direct else dist[a, b]) for a in alive for b in alive}


def demands(layers: list[dict], concurrency: int, context: int) -> tuple[list[int], list[int]]:
    """(demand bytes, bytes per live request) per layer of an explicit spec (no activation buffers)."""
    per = [int(x.get("kv_bytes_per_token", 0)) * context + int(x.get("state_bytes_per_request", 0))
           for x in layers]
    return [int(x["weight_bytes"]) + concurrency * p for x, p in zip(layers, per)], per


def solve(layers: list[dict], fleet_spec: dict, *, mode: str, concurrency: int = 0, context: int = 1,
          pins: dict[int, str] | None = None, together: list[tuple[int, ...]] = (),
          attention_per_stage: bool = False, decoder_per_stage: bool = False,
          embedding_first_head_last: bool = False) -> Optimum:
    """Fewest devices, then least hop latency, by enumeration (chains only).

    ``decoder_per_stage``: every used device holds a layer of kind attention or linear_attention;
    ``embedding_first_head_last``: the embedding's device holds the chain's first node and the LM
    head's its last node."""
    alive, memory, direct = fleet_devices(fleet_spec)
    cost = hop_costs(alive, direct)
    demand, per_request = demands(layers, concurrency, context)
    weights = [int(x["weight_bytes"]) for x in layers]
    n = len(layers)
    pins = pins or {}
    best = None
    for assign in itertools.product(alive, repeat=n):
        if any(assign[i] != d for i, d in pins.items()):
            continue
        if any(len({assign[i] for i in grp}) > 1 for grp in together):
            continue
        load: dict[str, int] = {}
        for i, d in enumerate(assign):
            load[d] = load.get(d, 0) + demand[i]
        if any(load[d] > memory[d] for d in load):
            continue
        if mode == "contiguous":
            stages = [assign[0]]
            for d in assign[1:]:
                if d != stages[-1]:
                    stages.append(d)
            if len(stages) != len(set(stages)):
                continue
            if any((a, b) not in direct for a, b in zip(stages, stages[1:])):
                continue
        held: dict[str, list[int]] = {}
        for i, d in enumerate(assign):
            held.setdefault(d, []).append(i)
        if attention_per_stage and any(not any(layers[i]["kind"] == "attention" for i in nodes)
                                       for nodes in held.values()):
            continue
        if decoder_per_stage and any(not any(layers[i]["kind"] in ("attention", "linear_attention") for i in nodes)
                                     for nodes in held.values()):
            continue
        if embedding_first_head_last and any(
                assign[i] != assign[end] for i, x in enumerate(layers)
                for kind, end in (("embedding", 0), ("lm_head", n - 1)) if x["kind"] == kind):
            continue
        lat = Fraction(0)
        ok = True
        for i in range(n - 1):
            a, b = assign[i], assign[i + 1]
            if a != b:
                if cost[a, b] is None:
                    ok = False
                    break
                lat += cost[a, b]
        if not ok:
            continue
        ceilings = []
        for d, nodes in held.items():
            per = sum(per_request[i] for i in nodes)
            if per:
                ceilings.append((memory[d] - sum(weights[i] for i in nodes)) // per)
        ceiling = min(ceilings) if ceilings else None
        key = (len(held), lat)
        if best is None or key < best[0]:
            best = (key, ceiling)
    if best is None:
        return Optimum(None, None)
    return Optimum(best[0][0], best[0][1], best[1])


def fewest_segments(demand: list[int], cap: int, most: int) -> int | None:
    """Fewest contiguous segments of ``demand`` (at most ``most``) each within ``cap``, over every
    set of cut points (2^(n-1) splits); None when no such split exists."""
    n = len(demand)
    for k in range(1, min(n, most) + 1):
        for mask in range(1 << (n - 1)):
            if bin(mask).count("1") != k - 1:
                continue
            seg, ok = 0, True
            for i in range(n):
                seg += demand[i]
                if seg > cap:
                    ok = False
                    break
                if i < n - 1 and mask >> i & 1:
                    seg = 0
            if ok:
                return k
    return None


def packs_brute(sizes: list[int], rooms: list[int]) -> bool:
    """Whether ``sizes`` fit into ``rooms``, by trying every labelling of items to rooms."""
    for labels in itertools.product(range(len(rooms)), repeat=len(sizes)):
        loads = [0] * len(rooms)
        for s, b in zip(sizes, labels):
            loads[b] += s
        if all(x <= r for x, r in zip(loads, rooms)):
            return True
    return False
