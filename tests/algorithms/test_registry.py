"""placer.algorithms.registry: the one table of methods, and the options it checks."""

from __future__ import annotations

import pytest

from placer.algorithms import registry
from placer.specs.errors import InvalidSpec


def test_table_rows():
    assert registry.METHODS == ("cpsat", "dp", "greedy", "pathwalk", "typepack", "ffd", "bound")
    assert registry.MODES_OF["ffd"] == ("free",) and registry.default_mode("ffd") == "free"
    assert registry.default_mode("dp") == "contiguous"
    assert registry.method("dp").function.__name__ == "dp"


def test_unknown_method_names_the_field():
    with pytest.raises(InvalidSpec) as exc:
        registry.method("simplex")
    assert exc.value.field == "method" and "simplex" in exc.value.message


def test_options_are_checked():
    cp = registry.method("cpsat")
    assert cp.parse_options({"time_limit": 3}).time_limit == 3
    with pytest.raises(TypeError):
        cp.parse_options({"colour": "red"})
    with pytest.raises(ValueError):
        cp.parse_options({"time_limit": 0})
    with pytest.raises(ValueError):
        cp.parse_options({"objective": "speed"})
    # a method without options ignores the solver's (one call may try every method) ...
    assert registry.method("greedy").parse_options({"seed": 1}) is None
    # ... but not a name no method takes
    with pytest.raises(TypeError):
        registry.method("greedy").parse_options({"colour": "red"})
