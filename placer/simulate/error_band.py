"""The calibrated error a simulated speed carries, by regime.

``benchmarks/calibrate_simulator.py --write`` measures the cost model against published speeds
(leave-one-source-out) and writes, per regime (platform GPU / wafer, dense / MoE, batch range),
the median and worst error to ``placer/simulate/data/error_bands.yaml``, with the devices, batches
and model sizes the corpus covers. :func:`error_band` reads it: a speed of a regime the corpus
measured says "calibrated error ±X% (<regime>)" (X the regime's worst error); anything else says
why it lies outside the calibrated range (a device, a batch, a context or a model size never measured).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

__all__ = ["BANDS_PATH", "error_band", "batch_range"]

BANDS_PATH = Path(__file__).resolve().parent / "data" / "error_bands.yaml"
GPU_BATCHES = ((1, 8), (9, 128), (129, None))


def batch_range(platform: str, batch: int) -> str:
    """The batch range a step of ``batch`` requests falls in ("1-8", "9-128", "129+"; wafers "1+")."""
    if platform == "wafer":
        return "1+"
    for lo, hi in GPU_BATCHES:
        if hi is None or batch <= hi:
            return f"{lo}+" if hi is None else f"{lo}-{hi}"
    raise AssertionError("unreachable")


@lru_cache(maxsize=1)
def _bands() -> dict:
    return yaml.safe_load(BANDS_PATH.read_text()) if BANDS_PATH.exists() else {}


def _platform(device_type) -> str:
    return "wafer" if getattr(device_type, "kind", "wafer") == "wafer" else "gpu"


def error_band(instance, batch: int, context: int | None = None, used=None) -> str:
    """What the calibration says of a speed ``instance`` runs at ``batch`` requests per step whose
    requests hold ``context`` tokens on average (None: not checked) on the devices ``used`` (device
    indices, an assignment; None: every device of the instance): the regime's calibrated error, or
    why the speed lies outside the calibrated range."""
    data = _bands()
    if not data:
        return "outside the calibrated range (no error bands: run benchmarks/calibrate_simulator.py --write)"
    devices = instance.devices if used is None else [instance.devices[d] for d in set(used)]
    types = {d.type.name: d.type for d in devices}
    platforms = {_platform(t) for t in types.values()}
    if len(platforms) > 1:
        return "outside the calibrated range (GPUs and wafers in one route were never measured)"
    (platform,) = platforms
    cover = data["coverage"].get(platform)
    if cover is None:
        return f"outside the calibrated range (no {platform} was measured)"
    missing = sorted(set(types) - set(cover["devices"]))
    if missing:
        return f"outside the calibrated range (device {', '.join(missing)} never measured)"
    lo, hi = cover["batch"]
    if not lo <= batch <= hi:
        return f"outside the calibrated range (batch {batch}; measured {lo}-{hi})"
    if context is not None and context > cover["context"]:
        return f"outside the calibrated range (context {context:,} tokens; measured up to {cover['context']:,})"
    # the whole model's size: a tensor-parallel or split instance places its shards (instance.model)
    params = getattr(getattr(instance, "base_model", None) or instance.model, "total_params", None)
    plo, phi = cover["params"]
    if params is not None and not plo * 0.5 <= params <= phi * 2:
        return (f"outside the calibrated range (a {params / 1e9:,.0f}B-parameter model; measured "
                f"{plo / 1e9:,.0f}B-{phi / 1e9:,.0f}B)")
    kind = "moe" if any(getattr(n, "num_experts", 0) for n in instance.nodes) else "dense"
    rng = batch_range(platform, batch)
    for r in data["regimes"]:
        if (r["platform"], r["kind"], r["batch"]) == (platform, kind, rng):
            return (f"calibrated error ±{(r['worst'] - 1) * 100:.0f}% for {platform} {kind}, batch {rng} "
                    f"(worst of {r['points']} published points; median ±{(r['median'] - 1) * 100:.0f}%)")
    return f"outside the calibrated range (no {platform} {kind} point at batch {rng} was measured)"
