"""The guard place() runs before any method: each reason, with its bytes, and the weights_alone flag."""

from __future__ import annotations

from algo_instances import instance

from placer.algorithms.guards import infeasibility
from placer.problem.instance import Pin


def test_a_feasible_instance_has_no_reason():
    assert infeasibility(instance([5, 5, 4], 10)) is None


def test_a_node_heavier_than_every_device_is_blamed_on_its_weights():
    """Weights 12 B on devices of 10 B: no concurrency can help."""
    reason, alone = infeasibility(instance([3, 12], 10))
    assert alone is True
    assert "node layers.1 needs 12 B for its weights alone" in reason
    assert "the largest device (r0w0) holds 10 B" in reason


def test_a_node_that_fits_without_requests_is_blamed_on_the_concurrency():
    """8 B of weights + 5 requests x 1 B of state = 13 B > 10 B, but 8 B alone fits."""
    reason, alone = infeasibility(instance([8, 2], 10, concurrency=5))
    assert alone is False
    assert "node layers.0 needs 8 B of weights + 5 live requests x 1 B = 13 B" in reason


def test_pinned_nodes_that_overflow_one_device_are_named():
    """Nodes 0 and 1 pinned together: 6 + 6 = 12 B > 10 B, by weights alone."""
    inst = instance([6, 6, 3], 10, pins=(Pin((0, 1), None),))
    reason, alone = infeasibility(inst)
    assert alone is True
    assert reason == "the pinned nodes layers.0..layers.1 need 12 B together; any device holds 10 B"


def test_pinned_nodes_that_overflow_only_with_requests_are_not_weights_alone():
    """5 + 4 = 9 B of weights fit 10 B; with 1 request each, 11 B do not."""
    inst = instance([5, 4, 3], 10, concurrency=1, pins=(Pin((0, 1), "r0w2"),))
    reason, alone = infeasibility(inst)
    assert alone is False
    assert reason == "the pinned nodes layers.0..layers.1 need 11 B together; device r0w2 holds 10 B"


def test_conflicting_pins_are_reported_as_weights_alone():
    inst = instance([1, 1], 10, pins=(Pin((0,), "r0w0"), Pin((0,), "r0w1")))
    reason, alone = infeasibility(inst)
    assert alone is True and "pinned to both r0w0 and r0w1" in reason


def test_too_few_devices_for_the_lower_bound():
    """7 + 7 + 7 B on two devices of 10 B: no two layers share one (14 > 10), so 3 are needed."""
    reason, alone = infeasibility(instance([7, 7, 7], 10, per_rack=2))
    assert alone is False
    assert reason.startswith("at least 3 devices are needed (")
    assert reason.endswith("bound); the fleet has 2 available")
