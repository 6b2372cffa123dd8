"""What joins the pipelines of a fleet mapping (several models on one fleet,
:mod:`placer.mapping.fleet_mapping`), checked after each pipeline on its own
(:func:`placer.mapping.validate.validate_mapping` validates every one), from the pipelines' own
stages and the hardware spec: every pipeline names the same hardware; a device is held by one
pipeline only, unless every model on it allows sharing; a shared device holds its pipelines' bytes
(weights, KV reserve, state, activation buffers) and the runtime reserve within its memory; the
summary counts the distinct devices.
"""

from __future__ import annotations

from placer.mapping.view import FleetView
from placer.mapping.violations import Violation

__all__ = ["FLEET_KINDS", "fleet_violations"]

FLEET_KINDS = {
    "fleet_hardware_mismatch": "the pipelines of a fleet mapping name different hardware",
    "fleet_device_shared": "a device is held by two pipelines, and not every model on it allows sharing",
    "fleet_device_overflow": "the pipelines sharing a device hold more bytes than its memory",
    "fleet_devices_mismatch": "summary.devices_used is not the number of distinct devices the pipelines use",
}


def fleet_violations(view: FleetView, *, model=None) -> list:
    """Every violation of what joins the pipelines of ``view`` (see the module docstring; each
    pipeline on its own is :func:`placer.mapping.validate.validate_mapping`'s)."""
    from placer.mapping.io import specs_from_mapping

    out = []
    pipes = [(m, r, p) for m in view.models for r, p in enumerate(m.pipelines)]
    names = {p.hardware.name for _, _, p in pipes}
    if len(names) > 1 or view.hardware.get("name") not in names:
        out.append(Violation("fleet_hardware_mismatch", f"the pipelines name hardware {sorted(names)}, the document "
                                                        f"{view.hardware.get('name')!r}"))
        return out
    _m, fleet, _w = specs_from_mapping(pipes[0][2].doc, model=model)
    holders: dict[str, list[tuple]] = {}
    for m, r, p in pipes:
        for st in p.stages:
            for d in st.devices:
                holders.setdefault(d, []).append((m, r, st))
    for d, held in holders.items():
        if len(held) < 2:
            continue
        who = ", ".join(f"{m.name} replica {r}" for m, r, _ in held)
        if not all(m.share for m, _, _ in held):
            out.append(Violation("fleet_device_shared", f"{d} is held by {who}, and not every one allows sharing"))
            continue
        dev = fleet.by_id.get(d)
        if dev is None:
            continue        # the pipeline's own check names an unknown device
        b = [st.bytes for _, _, st in held]
        total = sum(x.weights + x.kv_reserve + x.state + x.activations for x in b) + max(x.reserve or 0 for x in b)
        if total > dev.memory_bytes:
            out.append(Violation("fleet_device_overflow", f"{d} holds {total:,} B for {who} (with the runtime "
                                                          f"reserve), more than its {dev.memory_bytes:,} B"))
    if view.summary["devices_used"] != len(holders):
        out.append(Violation("fleet_devices_mismatch", f"summary.devices_used is {view.summary['devices_used']} but "
                                                       f"the pipelines use {len(holders)} distinct devices"))
    return out
