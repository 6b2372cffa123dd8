"""The memory below the chip: KV-cache tiers a device parks idle sessions' KV in.

A hardware spec's device type may list ``tiers``, each one level below the chip's own memory:

* ``name``: ``host`` (the host's DRAM, or a Grace CPU's LPDDR5X), ``nvme`` (local flash) or
  ``remote`` (a pooled store over the network: Mooncake, 3FS, LMCache servers);
* ``capacity``: bytes of it one device may use (``240 GB``);
* ``bandwidth``: bytes/s between it and one device, one direction (``225 GB/s``);
* ``latency_us``: the fixed cost of one transfer (set-up, first byte);
* ``power``: watts it adds per device beyond the device's own power figures (``0 W`` where the
  system's rated power already holds it, as a DGX's or an NVL72 rack's host memory);
* ``shared_by``: devices that share one such tier (the figures above are then the whole tier's
  and each device gets its share: capacity, bandwidth and power divided by ``shared_by``);
* ``source``: where the figures come from (free text, kept with the spec).

The runtimes that use such tiers: vLLM's KV offloading (``--kv-offloading-size``), SGLang's
hierarchical cache (``--enable-hierarchical-cache``), NVIDIA Dynamo's KV block manager
(G2 host, G3 disk, G4 object store); ``shared/reference/fleet_facts.md`` section 3.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator

from placer.specs.spec_io import StrictSpec, reject_bool
from placer.specs.units import parse_bandwidth, parse_bytes, parse_power

__all__ = ["TierSpec", "Tier", "TIER_NAMES", "tier_of", "tiers_from_specs"]

TIER_NAMES = ("host", "nvme", "remote")


class TierSpec(StrictSpec):
    name: Literal["host", "nvme", "remote"]
    capacity: int | str
    bandwidth: float | str
    latency_us: Annotated[float, BeforeValidator(reject_bool), Field(ge=0, le=1e7, allow_inf_nan=False)] = 0.0
    power: float | str = 0.0
    shared_by: Annotated[int, BeforeValidator(reject_bool), Field(ge=1, le=100000)] = 1
    source: str | None = None

    @field_validator("capacity", mode="before")
    @classmethod
    def _capacity(cls, v):
        n = parse_bytes(v)
        if n <= 0:
            raise ValueError("capacity must be positive")
        return n

    @field_validator("bandwidth", mode="before")
    @classmethod
    def _bandwidth(cls, v):
        b = parse_bandwidth(v)
        if not b > 0:
            raise ValueError("bandwidth must be positive")
        return b

    @field_validator("power", mode="before")
    @classmethod
    def _power(cls, v):
        w = parse_power(v) if isinstance(v, str) else float(reject_bool(v))
        if w < 0:
            raise ValueError("power must not be negative")
        return w


@dataclass(frozen=True)
class Tier:
    """One tier as one device sees it (its share when the tier is shared)."""

    name: str
    capacity_bytes: int          # per device
    bandwidth: float             # bytes/s to the chip, one direction, per device
    latency_us: float = 0.0
    power_w: float = 0.0         # added per device
    source: str | None = None

    def transfer_us(self, nbytes: float) -> float:
        """Microseconds to move ``nbytes`` between this tier and the chip: the latency plus the bytes
        at the tier's bandwidth (0 for nothing to move)."""
        return self.latency_us + nbytes / self.bandwidth * 1e6 if nbytes > 0 else 0.0

    def describe(self) -> str:
        return (f"{self.name} tier: {self.capacity_bytes / 1e9:,.0f} GB per device at "
                f"{self.bandwidth / 1e9:,.1f} GB/s, {self.latency_us:g} us latency, {self.power_w:g} W per device")


def tiers_from_specs(specs: list[TierSpec] | None, source: str, where: str) -> tuple[Tier, ...]:
    """The device's tiers from their specs (one per name; a repeated name names the field)."""
    from placer.specs.errors import InvalidSpec

    out: list[Tier] = []
    for i, s in enumerate(specs or ()):
        if any(t.name == s.name for t in out):
            raise InvalidSpec(source, f"{where}.tiers.{i}.name", f"tier {s.name!r} is listed twice")
        k = s.shared_by
        out.append(Tier(name=s.name, capacity_bytes=s.capacity // k, bandwidth=s.bandwidth / k,
                        latency_us=s.latency_us, power_w=s.power / k, source=s.source))
    return tuple(out)


def tier_of(device_type, name: str) -> Tier | None:
    """The tier ``name`` of ``device_type`` (a :class:`~placer.specs.fleet.DeviceType`), None when it has none."""
    return next((t for t in getattr(device_type, "tiers", ()) if t.name == name), None)
