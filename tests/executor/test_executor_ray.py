"""The Ray backend: one actor per stage gives the same tokens as the local threads and the reference.

Ray is an optional extra; the tests run on the session's local Ray (``local_ray`` in conftest; they
are marked ``ray``, skipped without Ray unless ``PLACER_REQUIRE_EXTRAS`` names it), and asking for the
backend without Ray is a clear error rather than a traceback.
"""

from __future__ import annotations

import pytest

from placer import load_fleet, load_model, make_instance, workload_for
from placer.algorithms import place
from placer.executor.reference import context_for, make_requests
from placer.executor.run import compare_with_reference, execute, reference_run
from placer.executor.tiny import tiny_spec
from placer.specs.errors import InvalidSpec

REQUESTS = make_requests(34, 3, seed=8, max_prompt=2)


@pytest.fixture(scope="module")
def spec():
    # kimi-k3 in free mode (a route that returns to wafers), the first 12 layers only to stay quick
    model, fleet = load_model("kimi-k3"), load_fleet("wse-3t")
    inst = make_instance(model, fleet, workload_for(model), mode="free")
    res = place(inst, method="typepack")
    route = [inst.devices[a].id for a in res.assignment][:12]
    return tiny_spec(inst.nodes[:12], route, seed=8, context_tokens=context_for(REQUESTS), base=model)


def test_ray_backend_without_ray_is_a_clear_error(spec, no_ray):
    with pytest.raises(InvalidSpec, match=r"Ray is not installed \(pip install -e '\.\[ray\]'\)"):
        execute(spec, REQUESTS[:2], backend="ray")


@pytest.mark.ray
def test_ray_backend_matches_reference_and_local(spec, local_ray):
    assert len(set(spec.devices)) < sum(1 for i, n in enumerate(spec.nodes)
                                        if i == 0 or spec.nodes[i - 1].device != n.device)   # revisits
    ref = reference_run(spec, REQUESTS)
    ray_run = execute(spec, REQUESTS, backend="ray", micro_batch=3, max_live=32)
    local_run = execute(spec, REQUESTS, backend="local", micro_batch=3, max_live=32)
    check = compare_with_reference(spec, REQUESTS, ray_run, ref)
    assert check["tokens_match"] and check["logits_match"] and check["memory_match"]
    assert ray_run.tokens == local_run.tokens
    assert ray_run.peak_live == 32
    # peak live per stage depends on timing; bytes per live request do not
    per_request = {r["device"]: r["request_bytes"] for r in check["memory"]}
    assert [s.peak_cache_bytes for s in local_run.stages] == \
        [per_request[s.device] * s.peak_live_requests for s in local_run.stages]
    assert all(s.final_cache_bytes == 0 for s in ray_run.stages)
    assert local_ray.is_initialized()
