"""Objective parsing: the aliases, comma lists of levels, and the errors for bad orders."""

from __future__ import annotations

import pytest

from placer.algorithms.objectives import DEFAULT_OBJECTIVE, LEVELS, OBJECTIVE_ALIASES, parse_objective


def test_aliases_expand_to_their_levels():
    assert parse_objective("devices") == ("devices",)
    assert parse_objective("lex") == ("devices", "latency")
    assert parse_objective("lex3") == ("devices", "latency", "bottleneck")
    assert parse_objective("cost") == ("cost", "devices", "concurrency", "latency")
    assert set(OBJECTIVE_ALIASES) == {"devices", "lex", "lex3", "cost"}


def test_comma_lists_keep_their_order_and_concurrency_may_sit_anywhere():
    assert parse_objective(DEFAULT_OBJECTIVE) == ("devices", "concurrency", "latency")
    assert parse_objective(" concurrency , devices,latency ") == ("concurrency", "devices", "latency")
    assert parse_objective("devices,bottleneck") == ("devices", "bottleneck")
    assert parse_objective("devices,latency,bottleneck,concurrency") == (
        "devices", "latency", "bottleneck", "concurrency")
    assert LEVELS == ("moved", "cost", "devices", "concurrency", "latency", "bottleneck")


@pytest.mark.parametrize("text", ["latency,devices", "bottleneck,devices", "devices,bottleneck,latency",
                                  "latency", "concurrency", "concurrency,latency"])
def test_devices_must_come_first_among_the_fixed_levels(text):
    with pytest.raises(ValueError, match="devices must come first"):
        parse_objective(text)


@pytest.mark.parametrize("text", ["", ",", "speed", "devices,speed", "devices,devices", "devices,latency,latency"])
def test_unknown_empty_or_repeated_levels_are_refused_naming_the_objective(text):
    with pytest.raises(ValueError) as exc:
        parse_objective(text)
    assert repr(text) in str(exc.value) and "each once" in str(exc.value)
