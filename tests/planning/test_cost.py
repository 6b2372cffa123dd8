"""Dollars: price: blocks in the hardware specs, CP-SAT's cost level (--objective cost), which picks
cheaper hardware than the device count does where prices and capacities disagree."""

from __future__ import annotations

import json

import pytest
import yaml

from placer.algorithms import place
from placer.algorithms.cpsat.cost import price_of
from placer.algorithms.objectives import parse_objective
from placer.planning import Placement, Requirements, SolverSettings, Targets, plan
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import fleet_from_dict, load_fleet
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

MODEL = """\
name: toy4
layers:
  - {kind: linear_attention, weight_bytes: 5, state_bytes_per_request: 1}
  - {kind: linear_attention, weight_bytes: 5, state_bytes_per_request: 1}
  - {kind: linear_attention, weight_bytes: 5, state_bytes_per_request: 1}
  - {kind: linear_attention, weight_bytes: 5, state_bytes_per_request: 1}
default_workload: {context: 1, concurrency: 1}
"""
# two platforms in one fleet: one big device holds the model alone, two small ones cost less
FLEET = """\
name: two-platforms
device_types:
  big:
    memory: 24
    price: {device_hour: 10.0, source: "test figure", date: "2026-01-01"}
  small:
    memory: 12
    price: {system_hour: 12.0, source: "test figure", date: "2026-01-01", assumption: true}
    devices_per_system: 4
fleet:
  groups:
    - {device: big, racks: 1, per_rack: 2}
    - {device: small, racks: 2, per_rack: 2}
  intra_rack_latency_us: 2
  inter_rack_latency_us: 3
"""


def _types(p):
    return sorted(p.instance.devices[d].type.name for d in set(p.result.assignment))


def test_prices_are_read_with_their_source_and_per_device():
    h100 = load_fleet("h100").device_types["h100"]
    assert h100.price_per_hour == pytest.approx(39.33 / 8)
    assert "AWS EC2 Capacity Blocks" in h100.price_source and "2025-01-01" in h100.price_source
    assert "(assumption)" in load_fleet("wse-3t").device_types["wse-3t"].price_source
    assert load_fleet("wse-2").device_types["wse-2"].price_per_hour is None
    with pytest.raises(InvalidSpec, match="device_hour or system_hour"):
        fleet_from_dict({"name": "x", "device": {"memory": 10, "price": {"source": "s", "date": "d"}},
                         "fleet": {"racks": 1, "per_rack": 1}})


def test_the_cost_objective_picks_the_cheaper_platform():
    model, fleet = model_from_dict(yaml.safe_load(MODEL)), fleet_from_dict(yaml.safe_load(FLEET))
    wl = Workload(concurrency=1, context_tokens=1)
    solver = SolverSettings(time_limit=20, threads=1)
    by_devices = plan(model, fleet, wl, Requirements(Placement(mode="contiguous")), solver)
    by_cost = plan(model, fleet, wl, Requirements(Placement(mode="contiguous"), Targets(objective="cost")), solver)
    assert _types(by_devices) == ["big"] and by_devices.result.devices_used == 1
    assert _types(by_cost) == ["small", "small"] and by_cost.proven
    cost = by_cost.result.level("cost")
    assert cost.value == 6.0 == price_of(by_cost.instance, by_cost.result.assignment) and cost.proven
    assert [lv.name for lv in by_cost.result.levels] == ["cost", "devices", "concurrency", "latency"]
    assert price_of(by_devices.instance, by_devices.result.assignment) == 10.0


def test_solve_objective_cost_on_the_command_line(run_cli, write):
    model, fleet = write("toy4.yaml", MODEL), write("two.yaml", FLEET)
    code, out, err = run_cli(["solve", model, "-H", fleet, "-q"])
    assert code == 0, err
    assert "on 1 devices" in out
    code, out, err = run_cli(["solve", model, "-H", fleet, "--objective", "cost", "-q", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["summary"]["devices_used"] == 2
    assert doc["summary"]["levels"][0] == dict(name="cost", value=6.0, unit="$/h", bound=6.0, proven=True)
    code, out, err = run_cli(["solve", model, "-H", "wse-2", "--objective", "cost"])
    assert code == 2 and "no price: block" in err and len(err.strip().splitlines()) == 1


def test_cost_comes_first_and_alone():
    assert parse_objective("cost") == ("cost", "devices", "concurrency", "latency")
    for bad in ("devices,cost", "moved,cost", "cost,moved,devices"):
        with pytest.raises(ValueError, match="first level"):
            parse_objective(bad)


def test_a_level_of_cost_on_a_mixed_gpu_fleet_is_exact_in_dollars():
    from placer.problem.instance import make_instance

    model = model_from_dict(yaml.safe_load(MODEL))
    inst = make_instance(model, load_fleet("mixed-gpu"), Workload(concurrency=1, context_tokens=1))
    r = place(inst, "cpsat", objective="cost,devices", time_limit=20, threads=1)
    cheapest = min(d.type.price_per_hour for d in inst.devices)
    assert r.level("cost").value == pytest.approx(cheapest) and r.level("cost").proven


def test_dollars_per_million_tokens_from_the_price_and_the_simulated_rate(run_cli):
    from placer.planning.price import fleet_price, price_line, usd_per_million_tokens

    price, source = fleet_price(load_fleet("h100"))
    assert price == pytest.approx(39.33 / 8) and "AWS" in source
    assert usd_per_million_tokens(3.6, 1000.0) == pytest.approx(1.0)    # $3.6 an hour for 3.6 M tokens
    assert usd_per_million_tokens(None, 1000.0) is None
    assert fleet_price(load_fleet("wse-2"))[0] is None and "no price" in price_line([load_fleet("wse-2")])
    assert fleet_price(load_fleet("mixed-gpu"))[0] is None      # types of different prices
    code, out, err = run_cli(["sweep", "llama-3.1-8b", "-H", "h100", "--context", "8k", "--concurrency", "2",
                              "--simulate", "-j", "1", "-q"])
    assert code == 0, err
    head, row = next((a, b) for a, b in zip(out.splitlines(), out.splitlines()[1:]) if "$/M tok" in a)
    assert head.split()[-1] == "tok" and "$/M tok" in head
    tokens, usd = float(row.split()[-3]), float(row.split()[-1])
    assert usd == pytest.approx(39.33 / 8 / (tokens * 3600) * 1e6, rel=0.02)
    assert "$/M tokens at h100 $4.916 per device-hour ($39.33 per system-hour of 8 devices: AWS EC2" in out


def test_a_speed_floor_with_the_cost_objective_takes_the_cheapest_candidate():
    from types import SimpleNamespace

    from placer.planning.speed import _better
    from placer.problem.instance import make_instance

    model = model_from_dict(yaml.safe_load(MODEL))
    inst = make_instance(model, load_fleet("mixed-gpu"), Workload(concurrency=1, context_tokens=1))
    types = [d.type.name for d in inst.devices]

    def candidate(kind, speed):
        where = types.index(kind)
        return SimpleNamespace(replicas=1, devices=1, sim=SimpleNamespace(per_user_tokens_per_s=speed),
                               shape=SimpleNamespace(instance=inst, result=SimpleNamespace(assignment=(where,) * 4)))

    fast_b200, slow_h100 = candidate("b200", 200.0), candidate("h100", 100.0)
    assert min((fast_b200, slow_h100), key=_better("devices")) is fast_b200     # one device each: the faster
    assert min((fast_b200, slow_h100), key=_better("cost")) is slow_h100        # $4.92 an hour against $6.03
