"""Power at a stated boundary: chip, system (the default) and facility (system x PUE), by hand.

The toy device draws 1,000 W alone and sits eight to a 14.3 kW system (a DGX B200's rating), so
its system share is 14,300 / 8 = 1,787.5 W and its facility figure 1,787.5 x PUE.
"""

from __future__ import annotations

import json

import pytest
import yaml

from placer.problem.instance import make_instance
from placer.simulate import Traffic, simulate, simulate_mapping
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import DEFAULT_PUE, POWER_BOUNDARIES, fleet_from_dict, load_fleet
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

SPEC = {"name": "pw", "device": {"memory": "10 MB", "memory_bandwidth": "1 TB/s", "compute": "1 PFLOPS",
                                 "power": "1000 W", "system_power": "14.3 kW", "devices_per_system": 8,
                                 "perf": {"fixed_overhead_us_per_layer": 10, "bandwidth_efficiency": 0.5,
                                          "compute_efficiency": 0.5}},
        "fleet": {"racks": 1, "per_rack": 4, "intra_rack_latency_us": 2}}
MODEL_SPEC = {"name": "lin3", "layers": [
    {"kind": "linear_attention", "weight_bytes": 4_000_000, "state_bytes_per_request": 1000},
    {"kind": "linear_attention", "weight_bytes": 4_000_000, "state_bytes_per_request": 1000},
    {"kind": "linear_attention", "weight_bytes": 4_000_000, "state_bytes_per_request": 1000},
]}
ROUTE = (0, 1, 2)          # three devices
BY_HAND = {"chip": 3 * 1000.0, "system": 3 * 14_300 / 8, "facility": 3 * 14_300 / 8 * DEFAULT_PUE}


@pytest.mark.parametrize("boundary", POWER_BOUNDARIES)
def test_a_figure_at_each_boundary(boundary):
    fleet = fleet_from_dict(SPEC).with_power(boundary)
    assert fleet.power_boundary == boundary and fleet.pue == (DEFAULT_PUE if boundary == "facility" else None)
    inst = make_instance(model_from_dict(MODEL_SPEC), fleet, Workload(context_tokens=1000))
    res = simulate(inst, ROUTE, Traffic(requests=4, output_tokens=8))
    assert res.power_boundary == boundary
    assert res.power_w == pytest.approx(BY_HAND[boundary], rel=1e-12)
    assert res.tokens_per_s_per_mw == pytest.approx(res.aggregate_tokens_per_s / (BY_HAND[boundary] / 1e6), rel=1e-12)
    assert res.joules_per_token == pytest.approx(BY_HAND[boundary] / res.aggregate_tokens_per_s, rel=1e-12)
    assert res.to_dict()["power_boundary"] == boundary


def test_facility_takes_the_pue_given_and_the_default_is_system():
    fleet = fleet_from_dict(SPEC)
    assert fleet.power_boundary == "system" and fleet.devices[0].type.power_w == 1787.5
    f = fleet.with_power("facility", 1.2)
    assert f.pue == 1.2 and f.devices[0].type.power_w == pytest.approx(1787.5 * 1.2, rel=1e-12)
    assert f.power_label() == "facility, PUE 1.2"
    # the boundary survives resizing, and going back gives the spec's figures again
    assert f.with_racks(2).devices[0].type.power_w == pytest.approx(2145.0)
    assert f.with_power("chip").devices[0].type.power_w == 1000.0


def test_bad_boundaries_name_their_argument():
    fleet = fleet_from_dict(SPEC)
    for kw, field in [(dict(boundary="wall"), "power"), (dict(boundary="facility", pue=0.9), "pue"),
                      (dict(boundary="system", pue=1.3), "pue")]:
        with pytest.raises(InvalidSpec) as exc:
            fleet.with_power(**kw)
        assert (exc.value.source, exc.value.field) == ("<argument>", field)


def test_a_missing_figure_falls_back_or_is_left_out_and_says_so():
    chip_only = fleet_from_dict({**SPEC, "device": {k: v for k, v in SPEC["device"].items()
                                                    if k not in ("system_power", "devices_per_system")}})
    assert chip_only.devices[0].type.power_w == 1000.0
    assert chip_only.power_notes() == ["pw: system_power: the spec gives no system power: the chip's 1,000 W is "
                                       "counted at the system boundary"]
    system_only = fleet_from_dict({**SPEC, "device": {k: v for k, v in SPEC["device"].items() if k != "power"}})
    chip = system_only.with_power("chip")
    assert chip.devices[0].type.power_w is None and "no chip power" in chip.power_notes()[0]
    # the catalog's wafers publish system figures only: a CS-3 at ~23 kW, a CS-4's 130 kW over 3 wafers
    assert load_fleet("wse-3").devices[0].type.power_w == 23_000.0
    assert load_fleet("wse-3t", power="facility", pue=1.1).devices[0].type.power_w == pytest.approx(130_000 / 3 * 1.1)
    assert load_fleet("wse-3", power="chip").devices[0].type.power_w is None


def test_a_mapping_records_a_boundary_other_than_the_default(tmp_path):
    from placer.algorithms import place
    from placer.mapping import build_mapping, check_mapping

    model = model_from_dict(MODEL_SPEC)
    fleet = fleet_from_dict(SPEC).with_power("facility", 1.25)
    inst = make_instance(model, fleet, Workload(context_tokens=1000))
    doc = build_mapping(inst, place(inst, method="dp"))
    check_mapping(doc, "m.json")
    assert (doc["hardware"]["power_boundary"], doc["hardware"]["pue"]) == ("facility", 1.25)
    devices = doc["summary"]["devices_used"]
    res = simulate_mapping(doc, model=model, hardware=fleet, requests=2, output_tokens=4)
    assert res.power_w == pytest.approx(devices * 1787.5 * 1.25)
    # the default boundary writes nothing new: mappings made before it read the same
    plain = build_mapping(make_instance(model, fleet_from_dict(SPEC), Workload(context_tokens=1000)),
                          place(make_instance(model, fleet_from_dict(SPEC), Workload(context_tokens=1000)),
                                method="dp"))
    assert "power_boundary" not in plain["hardware"]


@pytest.fixture()
def files(tmp_path):
    hw, model = tmp_path / "pw.yaml", tmp_path / "lin3.yaml"
    hw.write_text(yaml.safe_dump(SPEC))
    model.write_text(yaml.safe_dump(MODEL_SPEC))
    return hw, model


def test_simulate_command_at_each_boundary(files, tmp_path, run_cli):
    hw, model = files
    out_path = tmp_path / "m.json"
    code, out, err = run_cli(["solve", model, "-H", hw, "--context", 1000, "-o", out_path])
    assert code == 0, err
    devices = json.loads(out_path.read_text())["summary"]["devices_used"]
    for flags, watts in [([], 1787.5), (["--power", "chip"], 1000.0), (["--power", "facility"], 1787.5 * DEFAULT_PUE),
                         (["--power", "facility", "--pue", 1.3], 1787.5 * 1.3)]:
        code, out, err = run_cli(["simulate", out_path, "--model", model, "-H", hw, "--requests", 2,
                                  "--output-tokens", 4, "--json", *flags])
        assert code == 0, err
        d = json.loads(out)
        assert d["power_w"] == pytest.approx(devices * watts, rel=1e-9)
        assert d["power_boundary"] == (flags[1] if flags else "system")
    code, out, err = run_cli(["simulate", out_path, "--model", model, "-H", hw, "--requests", 2,
                              "--output-tokens", 4, "--power", "facility", "--pue", 1.3])
    assert code == 0, err
    assert "tokens/s per MW (facility, PUE 1.3)" in out and "J/token (facility, PUE 1.3)" in out
    code, out, err = run_cli(["simulate", out_path, "--model", model, "-H", hw, "--pue", 1.3])
    assert code == 2 and err == "error: --pue: pue: applies to the facility boundary only (power is system)\n"


def test_speed_floor_and_compare_count_power_at_the_boundary(files, run_cli):
    hw, model = files
    code, out, err = run_cli(["solve", model, "-H", hw, "--context", 1000, "--concurrency", 2,
                              "--min-user-tps", 10, "--power", "chip", "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["hardware"]["power_boundary"] == "chip"
    chosen = d["speed_target"]["chosen"]
    assert chosen["power_w"] == pytest.approx(1000.0 * chosen["devices"])
    code, out, err = run_cli(["compare", model, "-H", hw, "--context", 1000, "--power", "facility", "--json"])
    assert code == 0, err
    assert json.loads(out)["power_boundary"] == "facility" and json.loads(out)["pue"] == DEFAULT_PUE
