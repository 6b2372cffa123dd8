"""Solve on a quotient of the fleet: the few devices a plan could use, standing for the many.

A hall of 10,000 wafers holds a plan of 70. Identical devices in identical racks are
interchangeable, so every placement using at most N devices has an image of the same value on a
small sub-fleet; a method solves there and its answer is laid back on the real device ids (the
kept devices keep their own ids, racks and the real fleet's latencies, so the expansion is the
identity on ids). :func:`quotient` keeps, for a bound N on the devices an optimal plan uses
(:func:`plan_limit`):

* **mesh and leaf-spine** (:mod:`placer.specs.fabric`): the a-th leaf of each leaf shape (the
  multiset of its racks' shapes) for a <= N, in it the b-th rack of each rack shape for a b <= N,
  in that rack N // (a b) devices of each device key (type, capacity, group size). Swapping two
  leaves of one shape, two racks of one shape in a leaf, or two devices of one key in a rack
  changes no capacity and no latency (the formula reads racks and leaves only): these are
  automorphisms of the fleet. Take a placement on at most N devices; rank its leaves of a shape by
  the devices they hold (the a-th holds at most N / a), in each leaf its racks of a shape likewise
  (the b-th holds at most N / (a b)): a composition of swaps moves the a-th leaf onto the a-th
  kept one, its b-th rack onto the b-th kept rack, and each device onto a kept device of its key,
  with every level (devices, concurrency, latency, bottleneck) unchanged. A true symmetry
  reduction: proofs stay exact.
* **ring and line** of racks of one shape: in contiguous and split mode a placement's devices
  form a simple path of linked devices; leaving a rack runs through its gateway (slot 0), so the
  path visits a run of consecutive racks, each once. Rotating the ring (an automorphism), or
  shifting the run along the line (the formula reads rack distances only), maps it onto racks
  0..k-1, k <= N. In free mode on a line, the racks a placement uses, moved in order onto
  consecutive racks, come no farther apart: a contraction (latency never grows, links between
  used gateways kept). On a ring the same holds when the ring has at least N (N - 1) racks: cut
  at the largest gap between used racks (at least R / N >= N - 1 racks), two used racks i < j
  end j - i <= N - 1 racks apart, never more than either way round the ring before. A contraction
  keeps the device level, cannot raise the latency optimum and keeps every other level, so the
  optima are equal. Inside every rack, devices of one key other than the gateway are swapped
  freely (an automorphism) down to N. A torus keeps every rack (devices trimmed the same way).

Only where the fabric's formula holds (no extra links, gateways available; the formula is the
real fleet's shortest path), no pin names a device, and devices come first among the levels (a
plan then never uses more devices than its device optimum). N is checked after the solve: when
the plan found uses at most N devices, the optimum uses at most N (the plan is a real one) and
the reduction was exact; otherwise (or when the quotient finds no placement) the caller solves
the whole fleet.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from placer.algorithms.chain import next_fit
from placer.algorithms.packing import ffd_bins
from placer.problem.instance import Instance
from placer.problem.placement import Result
from placer.specs.fabric import GATEWAYS

__all__ = ["Quotient", "quotient", "plan_limit", "QUOTIENT_MIN_DEVICES"]

# fleets smaller than this are solved whole (a quotient would save little)
QUOTIENT_MIN_DEVICES = 256
# the quotient is used only when it keeps at most this share of the devices
QUOTIENT_MAX_SHARE = 0.5


@dataclass(frozen=True)
class Quotient:
    """``instance`` on the kept devices; ``kept[k]``: the full instance's index of its device k;
    ``limit``: the N it keeps enough devices for; ``why``: the reduction in words."""

    instance: Instance
    kept: tuple[int, ...]
    limit: int
    why: str

    def expand(self, result: Result) -> Result:
        """``result`` (on the quotient) on the full instance: the same placement by device ids."""
        kept = self.kept
        stats = dict(result.stats)
        stats["quotient"] = dict(devices=len(kept), limit=self.limit, reduction=self.why)
        return result.replace(
            assignment=None if result.assignment is None else tuple(kept[a] for a in result.assignment),
            order=None if result.order is None else tuple(kept[a] for a in result.order), stats=stats)

    def exact_for(self, result: Result) -> bool:
        """The reduction was exact for this solve: it found a plan of at most ``limit`` devices."""
        return result.assignment is not None and result.devices_used is not None \
            and result.devices_used <= self.limit


def plan_limit(instance: Instance) -> int:
    """N: a device count some placement is expected to meet (first-fit decreasing in free mode,
    next-fit on the smallest device along a chain), at most one device per node. Checked after the
    solve (:meth:`Quotient.exact_for`), never trusted."""
    n = instance.n_nodes
    demand, caps = instance.demand_bytes, instance.capacity_bytes
    count = n
    if instance.mode == "free":
        bins = ffd_bins(demand, sorted(Counter(caps).items(), reverse=True))
        count = len(bins) if bins is not None else n
    elif instance.model.is_chain:
        low = min(caps)
        if demand and max(demand) <= low:
            count = len(next_fit(demand, low))
    return max(1, min(n, count))


def _keys(instance: Instance) -> list[tuple]:
    """Per device: what a swap must keep (type, capacity, group size, gateway of a ring or line)."""
    gate = instance.fleet.fabric.kind in GATEWAYS
    return [(d.type.name, instance.capacity_bytes[i], len(instance.members(i)), gate and d.slot == 0)
            for i, d in enumerate(instance.devices)]


def _trim(members: list[int], keys, limit: int) -> list[int]:
    """The first ``limit`` devices of each key (gateways always kept)."""
    seen: Counter = Counter()
    out = []
    for i in members:
        seen[keys[i]] += 1
        if seen[keys[i]] <= limit or keys[i][3]:
            out.append(i)
    return out


def _shape(members: list[int], keys) -> tuple:
    return tuple(sorted(Counter(keys[i] for i in members).items()))


def _mesh(instance: Instance, racks: dict[int, list[int]], keys, limit: int) -> list[int]:
    """Mesh and leaf-spine: N leaves per leaf shape, N racks per rack shape in a leaf, N devices
    per key in a rack."""
    fabric = instance.fleet.fabric
    leaves: dict[int, list[int]] = {}
    for r in racks:
        leaves.setdefault(fabric.leaf(r), []).append(r)
    kept_leaves: Counter = Counter()
    out: list[int] = []
    for leaf in sorted(leaves):
        shapes = {r: _shape(racks[r], keys) for r in leaves[leaf]}
        leaf_shape = tuple(sorted(Counter(shapes.values()).items()))
        kept_leaves[leaf_shape] += 1
        a = kept_leaves[leaf_shape]
        if a > limit:
            continue
        kept_racks: Counter = Counter()
        for r in sorted(leaves[leaf]):
            kept_racks[shapes[r]] += 1
            b = kept_racks[shapes[r]]
            if a * b <= limit:
                out.extend(_trim(racks[r], keys, limit // (a * b)))
    return out


def _chain_of_racks(instance: Instance, racks: dict[int, list[int]], keys, limit: int) -> tuple[list[int], str]:
    """Ring, line and torus: racks 0..N-1 where the module docstring's argument holds, else every rack;
    N devices per key in a rack either way."""
    fabric = instance.fleet.fabric
    shapes = {_shape(members, keys) for members in racks.values()}
    runs = fabric.kind != "torus" and (instance.mode != "free" or fabric.kind == "line"
                                       or fabric.racks >= limit * (limit - 1))
    if len(shapes) == 1 and len(racks) == fabric.racks and runs:
        chosen = [r for r in sorted(racks) if r < limit]
        why = f"racks 0..{len(chosen) - 1} of the {fabric.kind}"
    else:
        chosen = sorted(racks)
        why = f"every rack of the {fabric.kind}"
    return [i for r in chosen for i in _trim(racks[r], keys, limit)], why


def quotient(instance: Instance, limit: int | None = None, *, force: bool = False) -> Quotient | None:
    """The quotient of ``instance`` keeping enough devices for plans of ``limit`` devices (default
    :func:`plan_limit`), or None where it is no exact reduction (see the module docstring) or,
    unless ``force``, saves too little (:data:`QUOTIENT_MIN_DEVICES`, :data:`QUOTIENT_MAX_SHARE`)."""
    fleet = instance.fleet
    n = instance.n_devices
    if not fleet.formula or any(p.device is not None for p in instance.pins):
        return None
    if not force and n < QUOTIENT_MIN_DEVICES:
        return None
    limit = plan_limit(instance) if limit is None else max(1, int(limit))
    keys = _keys(instance)
    racks: dict[int, list[int]] = {}
    for i, d in enumerate(instance.devices):
        racks.setdefault(d.rack, []).append(i)
    if fleet.fabric.implied:
        kept, why = _mesh(instance, racks, keys, limit), f"{fleet.fabric.kind}: swaps of like leaves, racks, devices"
    else:
        kept, why = _chain_of_racks(instance, racks, keys, limit)
    kept = sorted(kept)
    if len(kept) >= n or (not force and len(kept) > QUOTIENT_MAX_SHARE * n):
        return None
    return Quotient(_sub_instance(instance, kept), tuple(kept), limit, f"{len(kept)} of {n} devices: {why}")


def _sub_instance(instance: Instance, kept: list[int]) -> Instance:
    """``instance`` on the devices ``kept`` (indices), with the full fleet's latencies: the fabric
    is marked as checked on the full fleet (its formula stays the shortest path of the real one)."""
    fleet = instance.fleet
    devices = [instance.devices[i] for i in kept]
    ids = {d.id for d in devices}
    links = tuple(link for link in fleet.links if link[0] in ids and link[1] in ids)
    sub = replace(fleet, devices=tuple(devices), links=links, fabric=replace(fleet.fabric, checked=True))
    layout = instance.layout
    if layout is not None and layout.groups:
        layout = replace(layout, groups=tuple(layout.groups[i] for i in kept))
    return replace(instance, fleet=sub, layout=layout)
