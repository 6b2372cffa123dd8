"""Infeasibility explanations, checked against arithmetic done by hand.

The tiny model (tests/bad_inputs/ok/tiny.yaml): four 4 GB layers alternating attention
(1,000 B of KV per token) and linear attention (1,000,000 B of state per request); no hidden size,
so no activation buffers. Devices hold 10 GB = 10,000,000,000 B. Context 1k = 1,024 tokens, so one
request costs 1,024,000 B in an attention layer.

* An attention layer alone on a device holds floor(6e9 / 1,024,000) = 5,859 requests, a linear layer
  floor(6e9 / 1e6) = 6,000; at 6,000 requests an attention layer needs 4e9 + 6,144,000,000 =
  10,144,000,000 B, 144,000,000 B too many. At 6,000 requests it fits with
  floor(6e9 / (6,000 x 1,000)) = 1,000 tokens of context.
* Two layers (one of each) on a device hold floor(2e9 / 2,024,000) = 988 requests. On one rack
  (2 devices) 989 requests need 4 one-layer stages; at 989 requests the context that fits two
  layers per device is floor((2e9 - 989e6) / 989,000) = 1,022 tokens.
"""

from __future__ import annotations

import pytest
from dirs import OK_INPUTS

from placer import load_fleet, load_model, make_instance, workload_for
from placer.planning.studies.explain import diagnose, explain_infeasible, largest_feasible
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict

OK = OK_INPUTS
TINY = OK / "tiny.yaml"
TINYHW = OK / "tinyhw.yaml"


@pytest.fixture(scope="module")
def tiny():
    return load_model(TINY)


@pytest.fixture(scope="module")
def tinyhw():
    return load_fleet(TINYHW)


def test_oversized_node_names_node_device_and_bytes(tiny, tinyhw):
    inst = make_instance(tiny, tinyhw, workload_for(tiny, concurrency=6000))
    e = diagnose(inst)
    assert len(e.culprits) == 1
    c = e.culprits[0]
    assert "2 attention nodes (layers.0, layers.2)" in c
    assert "4,000,000,000 B of weights + 6000 live requests x 1,024,000 B" in c
    assert "= 10,144,000,000 B" in c
    assert "r0w0, holds 10,000,000,000 B" in c
    assert "144,000,000 B short" in c
    assert "at most 5859 live requests" in c
    assert (e.max_concurrency, e.max_concurrency_proven) == (5859, True)
    assert (e.max_context_tokens, e.max_context_proven) == (1000, True)
    assert e.min_racks is None


def test_fleet_too_small_gives_bound_concurrency_context_and_racks(tiny, tinyhw):
    inst = make_instance(tiny, tinyhw.with_racks(1), workload_for(tiny, concurrency=989))
    e = diagnose(inst)
    assert e.culprits == ("at least 4 devices are needed (chain bound: next-fit stages of the pipeline on "
                          "devices as large as the largest); the fleet has 2 available",)
    assert e.max_concurrency == 988
    assert e.max_context_tokens == 1022
    assert e.min_racks == 2
    text = e.text()
    assert "largest feasible concurrency: 988" in text
    assert "--racks 2" in text


def test_weights_that_never_fit_suggest_a_precision():
    """2e9 params at 16 bits are 4 GB; a 3 GB device holds them at 12 bits (3e9 B), not at 13."""
    spec = {"name": "params-model", "layers": [
        {"kind": "attention", "params": 2_000_000_000, "kv_bytes_per_token": 1000},
        {"kind": "linear_attention", "params": 2_000_000_000, "state_bytes_per_request": 1000}]}
    model = model_from_dict(spec)
    fleet = fleet_from_dict({"name": "small", "device": {"memory": "3 GB"}, "fleet": {"racks": 1, "per_rack": 4}})
    inst = make_instance(model, fleet, workload_for(model, concurrency=1))
    e = diagnose(inst)
    assert "2 attention nodes" not in e.culprits[0]
    assert "node layers.0 (attention) needs 4,000,000,000 B for the weights alone" in e.culprits[0]
    assert "1,000,000,000 B short" in e.culprits[0]
    assert "at --weight-bits 12 the weights would fit" in e.culprits[0]
    assert e.max_concurrency == -1
    assert not e.context_matters
    assert "lowering concurrency or context cannot help" in e.text()


def test_pinned_run_that_its_device_cannot_hold(tiny, tinyhw):
    """Contiguous: layers.0 and layers.2 on r0w0 put layers.0..2 there: 12 GB + 2 x (2 x 1,024,000 + 1e6)."""
    inst = make_instance(tiny, tinyhw, workload_for(tiny), pins=("0=r0w0", "2=r0w0"))
    e = diagnose(inst)
    need = 12_000_000_000 + 2 * (2 * 1_024_000 + 1_000_000)
    assert e.culprits == (f"pinned together (a device holds one run of the pipeline, so the pins cover "
                          f"everything between): layers.0..layers.2 need {need:,} B; r0w0 holds "
                          f"10,000,000,000 B: {need - 10**10:,} B short",)
    assert e.max_concurrency == -1


def test_contradicting_pins(tiny, tinyhw):
    inst = make_instance(tiny, tinyhw, workload_for(tiny), pins=("0=r0w0", "0=r0w1"))
    e = diagnose(inst)
    assert e.culprits == ("the pins contradict each other: node layers.0 is pinned to both r0w0 and r0w1",)


RING = {"name": "ring", "device": {"memory": "10 GB"},
        "fleet": {"racks": 3, "per_rack": 2, "inter_rack_topology": "ring"}}


def test_core_names_pins_that_conflict_only_through_links(tiny):
    """On a ring only slot 0 of each rack links to the next rack: layers.0 on r0w1 and layers.2 on r1w1
    need a stage boundary between unlinked devices. Every direct check passes; the core names the two
    pins and the link rule, and nothing else (each is needed)."""
    fleet = fleet_from_dict(RING)
    inst = make_instance(tiny, fleet, workload_for(tiny), pins=("0=r0w1", "2=r1w1"))
    e = diagnose(inst, time_limit=30)
    assert e.culprits == ()
    assert e.core == ("pin 1: layers.0 on r0w1", "pin 2: layers.2 on r1w1",
                      "consecutive stages on directly linked devices")
    assert e.max_concurrency == -1


def test_feasible_request_has_nothing_to_explain(tiny, tinyhw):
    inst = make_instance(tiny, tinyhw, workload_for(tiny))
    e = diagnose(inst)
    assert e.feasible
    assert "nothing to explain" in e.text()


def test_largest_feasible_search():
    assert largest_feasible(lambda x: x <= 37, 0, 1000) == (37, True)
    assert largest_feasible(lambda x: x <= 1000, 0, 1000) == (1000, True)
    assert largest_feasible(lambda x: False, 0, 1000) == (None, True)
    # an undecided probe counts as "does not fit" and makes the answer a lower bound
    assert largest_feasible(lambda x: True if x <= 10 else (None if x < 20 else False), 0, 100) == (10, False)


def test_solve_command_explains_an_impossible_request(run_cli, tmp_path, monkeypatch):
    """`placer solve` on 6,000 live requests: exit 1, the culprit and the largest feasible concurrency."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["solve", TINY, "--hardware", TINYHW, "--concurrency", "6000",
                              "--threads", "1", "-o", "m.json"])
    assert code == 1, err
    assert "largest feasible concurrency: 5859" in out
    assert "layers.0" in out and "144,000,000 B short" in out
    assert "longest context that fits at the asked concurrency: 1,000 tokens" in out
    assert not (tmp_path / "m.json").exists()


def test_explain_infeasible_is_the_text_of_diagnose(tiny, tinyhw):
    inst = make_instance(tiny, tinyhw, workload_for(tiny, concurrency=6000))
    assert explain_infeasible(inst) == diagnose(inst).text()
