"""What joins the pools of a two-pool mapping (:mod:`placer.mapping.pools`), checked after each
pool's sub-document (:func:`placer.mapping.validate.validate_mapping` validates both), recomputed from the specs with :mod:`placer.problem.memory` only: the transfer bytes, the transfer
time over the stated link, the workloads each pool was placed for, the device total and, on one
fleet, that the pools' replicas do not share a device and fit it side by side.
"""

from __future__ import annotations

import math

from placer.mapping.view import MappingView, PooledView
from placer.mapping.violations import Violation

__all__ = ["POOL_KINDS", "pair_violations"]

POOL_KINDS = {
    "transfer_mismatch": "the stated KV transfer (bytes or time) differs from the recomputation",
    "pool_workload_mismatch": "a pool's workload is not the one its role needs (prompt KV in prefill, prompt + "
                              "output KV in decode)",
    "pool_devices_mismatch": "the device total is not prefill replicas x devices + decode replicas x devices",
    "pools_overlap": "on one fleet, the pools use the same device or their replicas do not fit side by side",
}


def _close(a: float, b: float, rel: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-6)


def pair_violations(view: PooledView, *, model=None) -> list:
    """Every violation of what joins the two pools of ``view`` (see the module docstring; each
    pool on its own is :func:`placer.mapping.validate.validate_mapping`'s)."""
    from placer.mapping.io import specs_from_mapping
    from placer.problem import memory

    out = []
    pre, dec = view.prefill, view.decode
    m, p_fleet, p_wl = specs_from_mapping(pre.doc, model=model)
    _m, d_fleet, d_wl = specs_from_mapping(dec.doc, model=model)
    t, tg = view.transfer, view.targets
    wl = p_wl.replace(context_tokens=t.prompt_tokens)
    nbytes = sum(memory.request_bytes(layer, wl) for layer in m.layers)
    if nbytes != t.bytes:
        out.append(Violation("transfer_mismatch", f"transfer.bytes is {t.bytes:,} but a {t.prompt_tokens}-token "
                                                  f"prompt's KV and state are {nbytes:,} B"))
    time_us = t.latency_us + t.bytes / t.bandwidth_bytes_per_s * 1e6
    if not _close(time_us, t.time_us):
        out.append(Violation("transfer_mismatch", f"transfer.time_us is {t.time_us:,.3f} but latency + bytes / "
                                                  f"bandwidth is {time_us:,.3f}"))
    if p_wl.context_tokens != tg.prompt_tokens or t.prompt_tokens != tg.prompt_tokens:
        out.append(Violation("pool_workload_mismatch", f"the prefill pool holds {p_wl.context_tokens} tokens per "
                                                       f"request, the prompt is {tg.prompt_tokens}"))
    if d_wl.context_tokens != tg.prompt_tokens + tg.decode_tokens:
        out.append(Violation("pool_workload_mismatch", f"the decode pool holds {d_wl.context_tokens} tokens per "
                                                       f"request, not prompt + output = "
                                                       f"{tg.prompt_tokens + tg.decode_tokens}"))
    x, y = view.replicas["prefill"], view.replicas["decode"]
    n_pre, n_dec = pre.summary.devices_used, dec.summary.devices_used
    if view.summary.devices_used != x * n_pre + y * n_dec:
        out.append(Violation("pool_devices_mismatch", f"summary.devices_used is {view.summary.devices_used} but "
                                                      f"{x} x {n_pre} + {y} x {n_dec} = {x * n_pre + y * n_dec}"))
    if pre.hardware.name == dec.hardware.name:
        out += _overlap(pre, dec, x, y, d_fleet)
    return out


def _overlap(pre: MappingView, dec: MappingView, x: int, y: int, fleet) -> list:
    def devices(view: MappingView) -> list[str]:
        return [d for st in view.stages for d in st.devices]

    out = []
    shared = sorted(set(devices(pre)) & set(devices(dec)))
    if shared:
        out.append(Violation("pools_overlap", f"the prefill and decode replicas both use {shared[0]}"))
    total = x * len(set(devices(pre))) + y * len(set(devices(dec)))
    avail = len(fleet.available)
    if total > avail:
        out.append(Violation("pools_overlap", f"{x} prefill and {y} decode replicas need {total} devices; "
                                              f"{fleet.name} has {avail}"))
    return out
