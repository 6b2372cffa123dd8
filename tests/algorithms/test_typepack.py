"""typepack, the published rule: dense attention one per device, the other layers next-fit by kind."""

from __future__ import annotations

from algo_instances import brute_bin_packing, fleet, instance

from placer.algorithms.typepack import typepack
from placer.problem.instance import Pin
from placer.problem.placement import Status

# a 6-layer hybrid: attention (4 B) every third layer, linear attention (3 B) between
HYBRID = dict(weights=[4, 3, 3, 4, 3, 3], kv=[1, 0, 0, 1, 0, 0])


def test_the_rule_on_a_six_layer_hybrid_by_hand():
    """Devices of 10 B. The two attention layers get r0w0 and r0w1 alone (their KV reserve is the
    rest); the four linear layers of 3 B go next-fit, three per device (9 <= 10): layers 1, 2, 4 on
    r0w2, layer 5 on r0w3. Four devices, where two suffice (4+3+3 twice)."""
    inst = instance(HYBRID["weights"], 10, mode="free", kv=HYBRID["kv"])
    r = typepack(inst)
    assert r.status == Status.HEURISTIC and not r.proven_optimal
    assert [inst.devices[d].id for d in r.assignment] == ["r0w0", "r0w2", "r0w2", "r0w1", "r0w2", "r0w3"]
    assert r.devices_used == 4
    assert r.stats["devices_by_kind"] == {"dense": 2, "linear_attention": 2}
    assert r.objective == 4.0
    assert brute_bin_packing(HYBRID["weights"], 10) == 2


def test_devices_are_taken_largest_first():
    """Two types: 20 B (r0w*) and 30 B (r1w*). The attention layers take the two 30 B devices; the
    linear layers fill a 20 B device (12 B)."""
    fl = fleet(None, groups=[(20, 1, 2), (30, 1, 2)])
    inst = instance(HYBRID["weights"], mode="free", kv=HYBRID["kv"], fleet_spec=fl)
    r = typepack(inst)
    ids = [inst.devices[d].id for d in r.assignment]
    caps = {inst.devices[d].id: inst.capacity_bytes[d] for d in range(inst.n_devices)}
    assert caps[ids[0]] == 30 and caps[ids[3]] == 30 and ids[0] != ids[3]
    assert len({ids[1], ids[2], ids[4], ids[5]}) == 1 and caps[ids[1]] == 20
    assert r.devices_used == 3


def test_it_places_in_free_mode_only_and_takes_no_pins():
    r = typepack(instance(HYBRID["weights"], 10, mode="contiguous", kv=HYBRID["kv"]))
    assert r.status == Status.UNKNOWN and "free mode only" in r.message
    r = typepack(instance(HYBRID["weights"], 10, mode="free", kv=HYBRID["kv"], pins=(Pin((1,), "r0w0"),)))
    assert r.status == Status.UNKNOWN and "no pins" in r.message


def test_running_out_of_devices_is_unknown_not_infeasible():
    """Three devices of 10 B could hold the hybrid in two, but the rule needs 4: with three it gives
    up, claiming nothing about feasibility."""
    inst = instance(HYBRID["weights"], 10, mode="free", kv=HYBRID["kv"], per_rack=3)
    r = typepack(inst)
    assert r.status == Status.UNKNOWN and r.assignment is None
    assert "run out while packing linear_attention nodes" in r.message
