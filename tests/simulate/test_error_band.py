"""Every simulated speed carries its calibrated error (placer.simulate.error_band): the band of its
regime from the calibration's data file, or why it lies outside the calibrated range."""

from __future__ import annotations

import pytest
import yaml

from placer import load_fleet, load_model, make_instance, workload_for
from placer.algorithms import place
from placer.simulate import Traffic, simulate
from placer.simulate.error_band import BANDS_PATH, batch_range, error_band


@pytest.fixture(scope="module")
def bands():
    return yaml.safe_load(BANDS_PATH.read_text())


def _inst(model, hardware, context=2048):
    m = load_model(model)
    return make_instance(m, load_fleet(hardware), workload_for(m, context=context, concurrency=1))


def test_batch_ranges():
    assert [batch_range("gpu", b) for b in (1, 8, 9, 128, 129, 4096)] == ["1-8", "1-8", "9-128", "9-128",
                                                                           "129+", "129+"]
    assert batch_range("wafer", 7) == "1+"


def test_a_measured_regime_says_its_worst_error(bands):
    """A dense model on an H100 at 200 requests per step: the band of GPU dense 129+ as written."""
    (r,) = [r for r in bands["regimes"] if (r["platform"], r["kind"], r["batch"]) == ("gpu", "dense", "129+")]
    text = error_band(_inst("llama-3.1-70b", "h100"), 200, 2048)
    assert text == (f"calibrated error ±{(r['worst'] - 1) * 100:.0f}% for gpu dense, batch 129+ "
                    f"(worst of {r['points']} published points; median ±{(r['median'] - 1) * 100:.0f}%)")


def test_outside_the_calibrated_range_says_why(bands):
    gpu = bands["coverage"]["gpu"]
    inst = _inst("llama-3.1-70b", "h100")
    assert error_band(inst, gpu["batch"][1] + 1).startswith("outside the calibrated range (batch ")
    assert error_band(inst, 4, gpu["context"] + 1).startswith("outside the calibrated range (context ")
    assert error_band(_inst("llama-3.1-70b", "mi300x"), 4) == \
        "outside the calibrated range (device mi300x never measured)"
    assert error_band(_inst("llama-3.1-8b", "wse-3t"), 1) == \
        "outside the calibrated range (device wse-3t never measured)"
    # wafers were measured at one user only
    assert error_band(_inst("llama-3.1-405b", "wse-3"), 2).startswith("outside the calibrated range (batch 2")


def test_simulate_reports_the_band_of_its_run():
    inst = _inst("llama-3.1-8b", "h100", context=1024)
    res = place(inst, method="dp")
    sim = simulate(inst, res.assignment, Traffic(requests=4, output_tokens=8, context=512, decode_only=True))
    assert sim.speed_error == error_band(inst, round(sim.batch_mean), 512)
    assert sim.speed_error.startswith("calibrated error ±") and "gpu dense, batch 1-8" in sim.speed_error
    assert sim.to_dict()["speed_error"] == sim.speed_error
