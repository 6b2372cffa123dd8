"""Instance arithmetic by hand: per-node demand bytes, device capacities, unavailable devices."""

from __future__ import annotations

from algo_instances import fleet, instance

from placer.problem.instance import make_instance
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload


def test_demand_is_weights_plus_concurrency_times_per_request_bytes():
    """Linear attention: 1 B of state per request. Attention: 2 B of KV per token x 4 tokens of
    context = 8 B per request. At 3 live requests: 5 + 3x1 = 8, 7 + 3x8 = 31."""
    inst = instance([5, 7], 40, kv=[0, 2], concurrency=3, context=4)
    assert inst.weight_bytes == (5, 7)
    assert inst.request_bytes == (1, 8)
    assert inst.demand_bytes == (8, 31)
    assert inst.attention_nodes == (1,)
    assert inst.with_concurrency(0).demand_bytes == (5, 7)
    assert inst.with_concurrency(10).demand_bytes == (15, 87)


def test_capacity_is_memory_without_reserve_or_buffers():
    inst = instance([1, 1, 1], 40)
    assert inst.capacity_bytes == (40, 40, 40) and inst.reserve_bytes == (0, 0, 0)


def test_activation_buffers_come_off_every_device():
    """With a hidden size the activation buffers are subtracted from every device's memory."""
    model = model_from_dict({"name": "m", "hidden_size": 8, "layers": [
        {"kind": "linear_attention", "weight_bytes": 10, "state_bytes_per_request": 1}]})
    inst = make_instance(model, fleet(1000, per_rack=2), Workload(concurrency=1, context_tokens=1))
    buf = inst.activation_buffer_bytes
    assert buf > 0
    assert inst.capacity_bytes == (1000 - buf, 1000 - buf)


def test_max_concurrency_on_a_device_by_hand():
    """Nodes of 5 and 7 B with 1 B per request on 20 B: (20 - 12) // 2 = 4 requests; weights that
    overflow give -1."""
    inst = instance([5, 7, 30], 20)
    assert inst.max_concurrency([0, 1], 0) == 4
    assert inst.max_concurrency([2], 0) == -1


def test_unavailable_devices_are_not_devices_of_the_instance():
    inst = instance([1, 1], 10, per_rack=3, unavailable=["r0w1"])
    assert inst.n_devices == 2
    assert [d.id for d in inst.devices] == ["r0w0", "r0w2"]
    assert inst.device_index == {"r0w0": 0, "r0w2": 1}
