"""Dollars for disaggregated pools (placer/planning/disagg_price.py): both pools priced by their
devices, ``--objective cost`` choosing the cheaper device type, and $/M output tokens, by hand."""

from __future__ import annotations

import pytest
from disagg_toys import MIXED, MODEL

from placer.planning import Pools, Requirements, SolverSettings, Targets, plan
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import workload_for

ISL, OSL, RATE = 2000, 200, 5.0
PRICE = "price: {{device_hour: {}, source: toy list price, date: '2026-01-01'}},"
# pgpu $1 per device-hour, dgpu $10: the larger (faster-decoding) GPU costs ten times as much
PRICED = MIXED.replace("power: 500 W,", "power: 500 W, " + PRICE.format(1.0)) \
              .replace("power: 800 W,", "power: 800 W, " + PRICE.format(10.0))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("disagg_cost")
    (d / "model.yaml").write_text(MODEL)
    (d / "priced.yaml").write_text(PRICED)
    (d / "unpriced.yaml").write_text(MIXED)
    return d


def _plan(inputs, objective, fleet="priced.yaml"):
    m = load_model(inputs / "model.yaml")
    req = Requirements(targets=Targets(max_ttft_ms=100.0, max_itl_ms=5.0, speed_objective=objective),
                       pools=Pools(rate=RATE, decode_tokens=OSL))
    return plan(m, load_fleet(inputs / fleet), workload_for(m, context=ISL), req, SolverSettings(time_limit=10))


def _types(solved) -> set[str]:
    inst = solved.instance
    return {inst.devices[d].type.name for d in solved.per_group.assignment}


def test_cost_takes_the_cheaper_gpus_and_prices_both_pools(inputs):
    """The model is 4 x 500M params x 2 B = 4 GB, a 2,000-token prompt's KV 0.52 GB: one 16 GB pgpu
    holds a replica of either pool, as one 32 GB dgpu does. Fewest devices: 1 + 1 either way; by
    price: 1 pgpu ($1) + 1 pgpu ($1) = $2 per hour, against $20 on two dgpus. At 5 requests/s x
    200 output tokens = 1,000 tokens/s = 3.6M tokens an hour: $2 / 3.6 = $0.556 per million."""
    cheap = _plan(inputs, "cost").pools
    c = cheap.chosen
    assert (c.x, c.y, c.devices) == (1, 1, 2)
    assert _types(c.prefill.solved) == {"pgpu"} and _types(cheap.decode_solved) == {"pgpu"}
    assert cheap.price_per_hour == pytest.approx(2.0)
    assert cheap.usd_per_million_tokens == pytest.approx(2.0 / 3.6)
    fewest = _plan(inputs, "devices").pools
    assert fewest.chosen.devices == 2
    # whichever type the devices-first plan took, its price is its devices' and never below $2
    by_type = {"pgpu": 1.0, "dgpu": 10.0}
    expected = sum(by_type[t] for s in (fewest.chosen.prefill.solved, fewest.decode_solved) for t in _types(s))
    assert fewest.price_per_hour == pytest.approx(expected) and fewest.price_per_hour >= cheap.price_per_hour
    assert cheap.to_dict()["chosen"]["usd_per_million_tokens"] == pytest.approx(2.0 / 3.6)


def test_cost_needs_a_price_for_every_type(inputs):
    with pytest.raises(InvalidSpec) as info:
        _plan(inputs, "cost", "unpriced.yaml")
    assert info.value.field == "objective"


def test_cli_prints_the_price_and_its_source(inputs, run_cli):
    code, out, err = run_cli(["solve", inputs / "model.yaml", "-H", inputs / "priced.yaml", "--disagg",
                              "--rate", RATE, "--isl", ISL, "--osl", OSL, "--context", ISL + OSL,
                              "--max-ttft-ms", 100, "--max-itl-ms", 5, "--objective", "cost"])
    assert code == 0, err
    assert "$2.00 per hour for both pools, $0.556 per million output tokens at 5 requests/s x 200 tokens" in out
    assert "pgpu: $1 per device-hour: toy list price, 2026-01-01" in out
