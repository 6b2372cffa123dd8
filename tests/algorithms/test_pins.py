"""Pin groups: merging by shared node or device, widening to runs in pipeline modes, conflicts, and
the arrays a next-fit scan reads."""

from __future__ import annotations

import pytest
from algo_instances import instance

from placer.algorithms.chain import NO_PINS
from placer.algorithms.pins import PinConflict, PinGroup, chain_pins, pin_groups
from placer.problem.instance import Pin


def _inst(pins, mode="contiguous"):
    return instance([1] * 6, 10, mode=mode, pins=tuple(pins))


def test_no_pins_no_groups():
    assert pin_groups(_inst([])) == []
    assert chain_pins(_inst([])) is NO_PINS


def test_pins_sharing_a_device_merge_and_widen_only_in_pipeline_modes():
    """Nodes 0 and 3 both on r0w1: one group; contiguous mode widens it to the run 0..3."""
    pins = [Pin((3,), "r0w1"), Pin((0,), "r0w1")]
    assert pin_groups(_inst(pins, "free")) == [PinGroup((0, 3), 1)]
    assert pin_groups(_inst(pins, "contiguous")) == [PinGroup((0, 1, 2, 3), 1)]
    assert pin_groups(_inst(pins, "free"), contiguous=True) == [PinGroup((0, 1, 2, 3), 1)]


def test_pins_sharing_a_node_merge_and_groups_are_sorted_by_first_node():
    """(4,5) unpinned-to-device and (5,) on r0w0 share node 5; (1,2) stands alone."""
    pins = [Pin((4, 5), None), Pin((5,), "r0w0"), Pin((1, 2), None)]
    assert pin_groups(_inst(pins, "free")) == [PinGroup((1, 2), None), PinGroup((4, 5), 0)]


def test_overlapping_spans_merge_in_contiguous_mode():
    """Spans 0..2 and 2..4 (the second via nodes 2 and 4) overlap on node 2: one run 0..4;
    in free mode they stay apart."""
    pins = [Pin((0, 2), None), Pin((3, 4), None), Pin((1, 3), None)]
    assert pin_groups(_inst(pins, "contiguous")) == [PinGroup((0, 1, 2, 3, 4), None)]
    assert pin_groups(_inst([Pin((0, 2), None), Pin((3, 4), None)], "free")) == [
        PinGroup((0, 2), None), PinGroup((3, 4), None)]


def test_a_node_on_two_devices_is_a_conflict():
    with pytest.raises(PinConflict, match="node layers.1 is pinned to both r0w0 and r0w2"):
        pin_groups(_inst([Pin((1,), "r0w0"), Pin((1,), "r0w2")], "free"))


def test_a_run_holding_two_pinned_devices_is_a_conflict_only_in_pipeline_modes():
    """0 and 2 on one device; 1 on r0w0, 2 on r0w1. Free: {0,2} on r0w1, {1} on r0w0. Contiguous:
    the run 0..2 holds node 1, so it would need both devices."""
    pins = [Pin((0, 2), None), Pin((1,), "r0w0"), Pin((2,), "r0w1")]
    assert pin_groups(_inst(pins, "free")) == [PinGroup((0, 2), 1), PinGroup((1,), 0)]
    with pytest.raises(PinConflict, match=r"a device holds one run, layers.0..layers.2\) but are pinned "
                                          r"to r0w0, r0w1"):
        pin_groups(_inst(pins, "contiguous"))


def test_chain_pins_arrays_by_hand():
    """Six nodes, run 1..3 on r0w1 and node 5 on r0w4. A stage may not end inside 1..3 (cuts 2 and
    3 are forbidden), so the last allowed cut at or before j is 0,1,1,1,4,5,6. A stage starting at
    0..3 reaches the r0w1 run first and may extend to node 5 (exclusive), pinned elsewhere; from
    4 or 5 it reaches node 5, the last pinned node, and may run to the end."""
    cp = chain_pins(_inst([Pin((1, 3), "r0w1"), Pin((5,), "r0w4")]))
    assert cp.groups == (PinGroup((1, 2, 3), 1), PinGroup((5,), 4))
    assert cp.floor_cut == (0, 1, 1, 1, 4, 5, 6)
    assert cp.next_pinned == (1, 1, 2, 3, 5, 5, 6)
    assert cp.max_end == (5, 5, 5, 5, 6, 6, 6)
    assert cp.device_of == {1: 1, 2: 1, 3: 1, 5: 4}
