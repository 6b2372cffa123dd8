"""The event run's check of a disaggregated plan's prefill pool (placer.planning.disagg_check): a
candidate's prefill replicas are raised until the run's median TTFT meets the target, and the plan
takes the fewest devices among the candidates the run confirms."""

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from placer.planning import disagg_check


@dataclass
class Cand:
    name: str
    x: int
    devices_per: int
    needs: int                  # the x at which the (fake) event run meets the target
    transfer_us: float = 0.0
    rate: float = 1.0
    queue_us: float = 0.0
    closed_x: int | None = None
    event_miss: bool = False
    prefill: object = field(default_factory=lambda: SimpleNamespace(interval_us=1000.0))

    @property
    def devices(self):
        return self.x * self.devices_per


@pytest.fixture
def runs(monkeypatch):
    seen = []

    def fake(c, budget):
        seen.append((c.name, c.x))
        return SimpleNamespace(ttft_p50_us=50.0 if c.x >= c.needs else 1500.0)
    monkeypatch.setattr(disagg_check, "prefill_check", fake)
    return seen


def key(c):
    return (c.devices,)


def test_raised_until_the_run_meets_and_the_next_candidate_is_confirmed(runs):
    # a: 2 x 3 = 6 devices by the closed form, needs x = 4 (12 devices); b: 8 devices, met at once
    a, b = Cand("a", 2, 3, needs=4), Cand("b", 2, 4, needs=2)
    chosen, sim, note = disagg_check.choose_confirmed([a, b], key, 8192, 100.0, lambda c, x: True)
    assert chosen is b and sim.ttft_p50_us == 50.0 and note == ""
    assert (a.x, a.closed_x) == (4, 2) and runs == [("a", 2), ("a", 3), ("a", 4), ("b", 2)]


def test_stops_at_a_closed_form_key_not_below_the_best(runs):
    a, b = Cand("a", 2, 3, needs=3), Cand("b", 3, 3, needs=1)    # a confirmed at 9 devices, b's closed form is 9
    chosen, _, note = disagg_check.choose_confirmed([a, b], key, 8192, 100.0, lambda c, x: True)
    assert chosen is a and "missed the target at 2 prefill replicas" in note and "takes 3" in note
    assert ("b", 3) not in runs


def test_a_candidate_that_never_fits_keeps_its_closed_form_and_is_not_chosen(runs):
    a, b = Cand("a", 1, 1, needs=5), Cand("b", 3, 1, needs=3)
    chosen, _, _ = disagg_check.choose_confirmed([a, b], key, 8192, 100.0, lambda c, x: x <= 2)
    assert chosen is b and a.event_miss and a.x == 1


def test_none_confirmed_reports_the_miss(runs):
    a = Cand("a", 1, 1, needs=9)
    chosen, _, note = disagg_check.choose_confirmed([a], key, 8192, 100.0, lambda c, x: x <= 2)
    assert chosen is a and "1.5 ms misses the target with 1 prefill replicas" in note
