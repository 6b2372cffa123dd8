"""Wide expert parallelism: a group of devices that spans nodes.

DeepSeek-class MoE models are served with their experts spread over more ranks than one node
holds: SGLang's large-scale EP decodes on 9 nodes of 8 H100 as one group of 72 (attention data
parallel, DeepEP all-to-alls over InfiniBand), vLLM's wide EP likewise (``--data-parallel-size``
over nodes with ``--enable-expert-parallel``), and a GB200 / GB300 NVL72 rack makes 72 GPUs one
NVLink domain (there one node of 72 in placer's terms, and no group spans nodes).

A degree ``tp`` larger than every node of the fleet forms groups of whole nodes
(:func:`spanning_members`): nodes of one device type whose available devices number the
largest such node's size ``s``, ``tp / s`` of them a group, consecutive in rack order, each
contributing all ``s`` devices (``tp`` must be a multiple of ``s``; a node with failed devices is
left out, as a runtime's ``--nnodes`` launch wants every node alike). Only layouts that spread
experts whole may span nodes (:func:`span_refusal`): expert parallelism with tensor-parallel
attention (``--ep``) or attention data parallelism; tensor parallelism of every weight across
nodes is refused, as before.

What changes for such a group is only where its devices are: every rank's bytes are the same
rules' (:mod:`placer.problem.parallel`, :mod:`placer.problem.reductions.attention_dp`), and the
group's collectives cross the links between its nodes: its all-reduces (``--ep``'s attention) on
their share of the ring steps (:func:`placer.problem.reductions.tensor_parallel.group_link_us`: the
mean of the first member's links to the others), its dispatch and combine all-to-alls at their
message sizes over those links (:mod:`placer.problem.all_to_all`, DeepEP's low-latency figures),
in the hop-latency level as in the simulator.
"""

from __future__ import annotations

from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.fleet import Fleet

__all__ = ["spanning_members", "span_refusal"]


def _nodes(fleet: Fleet) -> dict[str, list[list]]:
    """Per device type, its nodes' available devices in slot order, racks ascending."""
    racks: dict[tuple[str, int], list] = {}
    for d in fleet.available:
        racks.setdefault((d.type.name, d.rack), []).append(d)
    out: dict[str, list[list]] = {}
    for (t, _rack), devs in sorted(racks.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        out.setdefault(t, []).append(sorted(devs, key=lambda d: d.slot))
    return out


def _shape(fleet: Fleet, tp: int) -> tuple[str | None, int, int]:
    """(why no group of ``tp`` spans nodes, or None; node size; nodes per group): the first device
    type whose nodes form such a group."""
    first = None
    for nodes in _nodes(fleet).values():
        size = max(len(n) for n in nodes)
        if tp % size:
            why = (f"an expert-parallel group spanning nodes takes whole nodes: tp {tp} is not a multiple of "
                   f"the node size {size}")
        else:
            full = sum(1 for n in nodes if len(n) == size)
            if full >= tp // size:
                return None, size, tp // size
            why = (f"a group of {tp} spans {tp // size} nodes of {size}; {fleet.name} has {full} with {size} "
                   "available devices")
        first = first or why
    return first or f"{fleet.name} has no available device", 0, 0


def span_refusal(fleet: Fleet, tp: int, spread: bool) -> str | None:
    """Why a group of ``tp`` devices, larger than every node of ``fleet``, cannot be formed
    (``spread``: the layout spreads experts whole), or None."""
    if not spread:
        return _no_node(fleet, tp)     # tensor parallelism of every weight stays inside a node
    why = _shape(fleet, tp)[0]
    return None if why is None else f"{_no_node(fleet, tp)}; {why}"


def _no_node(fleet: Fleet, tp: int) -> str:
    sizes: dict[int, int] = {}
    for d in fleet.available:
        sizes[d.rack] = sizes.get(d.rack, 0) + 1
    return f"no node of {fleet.name} has {tp} available devices (the largest has {max(sizes.values(), default=0)})"


def spanning_members(fleet: Fleet, tp: int) -> list[tuple[str, ...]]:
    """The groups of ``tp`` devices spanning whole nodes (see the module docstring), member ids in
    order; :class:`InvalidSpec` (field ``tp``) when none can be formed."""
    why, size, per = _shape(fleet, tp)
    if why is not None:
        raise InvalidSpec(ARGUMENT, "tp", f"{_no_node(fleet, tp)}; {why}")
    members: list[tuple[str, ...]] = []
    for nodes in _nodes(fleet).values():
        if max(len(n) for n in nodes) != size:
            continue
        full = [n for n in nodes if len(n) == size]
        for k in range(len(full) // per):
            members.append(tuple(d.id for n in full[k * per:(k + 1) * per] for d in n))
    return members

