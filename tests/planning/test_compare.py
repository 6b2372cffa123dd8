"""placer.planning.studies.compare: rows, and whether a device count is proven."""

from __future__ import annotations

from algo_instances import chain_model, fleet

from placer.planning import Requirements, SolverSettings
from placer.planning.studies.compare import compare, devices_proven, row_of
from placer.problem.placement import Level, Result, Status
from placer.specs.workload import Workload


def _result(**kw):
    base = dict(method="cpsat", mode="free", status=Status.FEASIBLE, assignment=(0, 1), devices_used=2,
                lower_bound_devices=1)
    return Result(**(base | kw))


def test_devices_proven_reads_the_device_level():
    proven = _result(levels=(Level("devices", 2, 2, True), Level("latency", 3.0, 1.0, False)))
    assert devices_proven(proven) and proven.devices_proven
    assert row_of(proven)["devices_proven"] is True
    assert not devices_proven(_result(levels=(Level("devices", 2, 1, False),)))
    assert devices_proven(_result(lower_bound_devices=2))           # meets the bound
    assert devices_proven(_result(proven_optimal=True, status=Status.OPTIMAL))
    assert not devices_proven(_result(assignment=None, devices_used=None))


def test_compare_rows_mark_proven_counts():
    """[6, 6, 6] on devices of 12: two devices, and every exact row proves it."""
    rows = compare(chain_model([6, 6, 6]), fleet(12, per_rack=3), Workload(concurrency=0, context_tokens=1),
                   Requirements(), SolverSettings(time_limit=5, threads=1))["rows"]
    by = {(r["method"], r["mode"]): r for r in rows}
    assert by[("cpsat", "free")]["devices_used"] == 2 and by[("cpsat", "free")]["devices_proven"]
    assert by[("dp", "contiguous")]["devices_proven"]
