"""Benchmark instances for placer's solvers, generated from a seed.

* :func:`falkenauer_uniform`: Falkenauer's "u" class (OR-Library binpack1-4): ``n`` item sizes
  uniform in [20, 100], bins of 150.
* :func:`falkenauer_triplets`: Falkenauer's "t" class (binpack5-8): bins of 1000 filled by exactly
  three items in [250, 500], so the optimum is n / 3 by construction.
* :func:`binpacking_instance`: a placer :class:`~placer.problem.instance.Instance` in free mode whose nodes
  are the items (bytes = size x ``unit_bytes``) on a fleet of identical devices (memory = bin
  capacity x ``unit_bytes``).
* :func:`cut_devices`: a perfect packing: full devices cut into layers (known optimum).
* :func:`sparse_fleet_instance`: a chain of random layer sizes on a sparse, irregular fleet (racks
  of 3 on a ring plus random chords of random latency): no ultrametric structure to exploit.
"""

from __future__ import annotations

import random

from placer.problem.instance import make_instance
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

__all__ = ["falkenauer_uniform", "falkenauer_triplets", "binpacking_instance", "cut_devices", "items_model",
           "sparse_fleet_instance", "sparse_ring_specs", "sparse_ring_instance"]


def falkenauer_uniform(n: int, seed: int) -> tuple[list[int], int]:
    """(sizes, capacity): ``n`` sizes uniform in [20, 100], capacity 150."""
    rng = random.Random(seed)
    return [rng.randint(20, 100) for _ in range(n)], 150


def falkenauer_triplets(n: int, seed: int) -> tuple[list[int], int]:
    """(sizes, capacity): ``n`` (a multiple of 3) sizes in [250, 500] that fill n / 3 bins of 1000
    exactly, three items per bin, shuffled."""
    if n % 3:
        raise ValueError("triplet instances have a multiple of 3 items")
    rng = random.Random(seed)
    sizes = []
    for _ in range(n // 3):
        a = rng.randint(380, 490)
        b = rng.randint(max(250, 500 - a), 750 - a)
        sizes.extend([a, b, 1000 - a - b])
    rng.shuffle(sizes)
    return sizes, 1000


def items_model(sizes_bytes, name: str = "items"):
    """A chain model whose node i weighs ``sizes_bytes[i]`` bytes and needs nothing else at
    concurrency 0 (one byte of state per request, no activation buffers)."""
    layers = [{"kind": "linear_attention", "weight_bytes": int(s), "state_bytes_per_request": 1}
              for s in sizes_bytes]
    return model_from_dict({"name": name, "layers": layers})


def binpacking_instance(sizes, capacity: int, *, devices: int | None = None, unit_bytes: int = 10**8,
                        mode: str = "free"):
    """The bin-packing instance as a placer instance on one rack of identical devices."""
    n_dev = devices or len(sizes)
    model = items_model([s * unit_bytes for s in sizes])
    fleet = fleet_from_dict({"name": "bins", "device": {"memory": capacity * unit_bytes},
                             "fleet": {"racks": 1, "per_rack": n_dev, "intra_rack_latency_us": 2}})
    return make_instance(model, fleet, Workload(concurrency=0, context_tokens=1), mode=mode)


def cut_devices(capacities, pieces: int, seed: int) -> list[list[int]]:
    """Cut each capacity into ``pieces`` positive parts (random cut points): every part list fills
    its device exactly, so placing them needs exactly len(capacities) devices."""
    rng = random.Random(seed)
    out = []
    for cap in capacities:
        cuts = sorted(rng.sample(range(1, cap), pieces - 1))
        bounds = [0, *cuts, cap]
        out.append([b - a for a, b in zip(bounds, bounds[1:])])
    return out


def sparse_fleet_instance(racks: int, layers: int, seed: int):
    """``layers`` layers of 9, 12, 17 or 21 GB on ``racks`` racks of 3 (half 44 GB, half 64 GB
    devices) joined in a ring through slot 0, plus two random chords per rack (3-5 us)."""
    rng = random.Random(seed)
    extra, seen = [], set()
    for r in range(racks):
        for s in (1, 2):
            t = (r + rng.randint(1, racks - 1)) % racks
            a, b = f"r{r}w{s}", f"r{t}w{rng.randint(0, 2)}"
            if frozenset((a, b)) in seen:
                continue
            seen.add(frozenset((a, b)))
            extra.append({"a": a, "b": b, "latency_us": rng.choice([3, 4, 5])})
    spec = {"name": "sparse", "device_types": {"a": {"memory": "44 GB"}, "b": {"memory": "64 GB"}},
            "fleet": {"groups": [{"device": "a", "racks": racks // 2, "per_rack": 3},
                                 {"device": "b", "racks": racks - racks // 2, "per_rack": 3}],
                      "intra_rack_latency_us": 2, "inter_rack_latency_us": 3, "inter_rack_topology": "ring",
                      "extra_links": extra}}
    sizes = [rng.choice([9, 12, 17, 21]) * 10**9 for _ in range(layers)]
    return make_instance(items_model(sizes, name=f"random-{layers}"), fleet_from_dict(spec),
                         Workload(concurrency=0, context_tokens=1))


def sparse_ring_specs(racks: int, layers: int, seed: int, *, chords: bool = True) -> tuple[dict, dict]:
    """(model spec, hardware spec) of :func:`sparse_ring_instance`, as ``placer solve`` reads them."""
    rng = random.Random(seed)
    types = [rng.choice("ab") for _ in range(racks)]
    groups, start = [], 0
    for r in range(1, racks + 1):      # consecutive runs of one type become one group of racks
        if r == racks or types[r] != types[start]:
            groups.append({"device": types[start], "racks": r - start, "per_rack": 1})
            start = r
    extra, seen = [], set()
    for _ in range(racks // 4 if chords else 0):
        a = rng.randrange(racks)
        b = (a + rng.randint(2, racks - 2)) % racks
        pair = frozenset((a, b))
        if pair in seen:
            continue
        seen.add(pair)
        extra.append({"a": f"r{a}w0", "b": f"r{b}w0", "latency_us": rng.choice([4, 5, 6])})
    hardware = {"name": f"ring-{racks}", "device_types": {"a": {"memory": "44 GB"}, "b": {"memory": "64 GB"}},
                "fleet": {"groups": groups, "intra_rack_latency_us": 1, "inter_rack_latency_us": 3,
                          "inter_rack_topology": "ring", "extra_links": extra}}
    sizes = [rng.choice([14, 17, 20, 24, 29]) * 10**9 for _ in range(layers)]
    model = {"name": f"random-{layers}",
             "layers": [{"kind": "linear_attention", "weight_bytes": s, "state_bytes_per_request": 1} for s in sizes]}
    return model, hardware


def sparse_ring_instance(racks: int, layers: int, seed: int, *, chords: bool = True, mode: str = "contiguous"):
    """``layers`` layers of 14, 17, 20, 24 or 29 GB on a ring of ``racks`` single-device racks (each
    device 44 GB or 64 GB at random, 3 us between neighbours) plus, with ``chords``, one random
    chord per four racks (4-6 us). Sparse (every device has two or three links) and tight: the
    pipeline needs most of the ring."""
    model, hardware = sparse_ring_specs(racks, layers, seed, chords=chords)
    return make_instance(model_from_dict(model), fleet_from_dict(hardware),
                         Workload(concurrency=0, context_tokens=1), mode=mode)
