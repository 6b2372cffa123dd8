"""The fleet as a capacity graph: device types, devices in racks, links with latency and bandwidth.

A hardware spec names one or more device types and a fleet built from groups of racks. Devices
get ids ``r<rack><w|g><slot>`` (``w`` for wafers, ``g`` for GPUs). Inside a rack every pair of
devices is linked; racks are joined by ``inter_rack_topology`` (``full``: every device pair,
as through a switch fabric; ``leaf-spine``: the same through ``racks_per_leaf`` racks per leaf
switch, ``spine_latency_us`` more between leaves; ``ring`` / ``line``: slot 0 of consecutive racks);
``extra_links`` add any link; ``unavailable`` devices stay in the spec but are never used. The
fabric (:mod:`placer.specs.fabric`) gives latencies by formula: mesh and leaf-spine links are
implied, never listed, so a fleet of 100,000 devices costs what its devices cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import numpy as np
from pydantic import (
    BeforeValidator,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.fabric import Fabric, shortest_paths
from placer.specs.prices import PriceSpec, price_of
from placer.specs.reserve import NO_RESERVE, Reserve, parse_reserve
from placer.specs.spec_io import (
    SpecName,
    StrictSpec,
    load_yaml_or_json,
    pydantic_error,
    reject_bool,
    spec_sha256,
)
from placer.specs.tiers import Tier, TierSpec, tiers_from_specs
from placer.specs.units import parse_bandwidth, parse_bytes, parse_flops, parse_power

if TYPE_CHECKING:   # networkx loads on first use of Fleet.graph (a solve never needs it)
    import networkx as nx

__all__ = ["DeviceType", "Device", "Fleet", "load_fleet", "fleet_from_dict", "POWER_BOUNDARIES",
           "DEFAULT_POWER_BOUNDARY", "DEFAULT_PUE"]

# Where a power figure is counted: the accelerator alone (its TDP), its share of the system it is
# sold in (host CPUs, memory, NICs, switches, fans: a DGX's or a CS-3's rated power divided by its
# devices), or the facility (system x PUE: cooling and power distribution). Operators provision,
# and public benchmarks report tokens/s per MW, at the system or facility boundary.
POWER_BOUNDARIES = ("chip", "system", "facility")
DEFAULT_POWER_BOUNDARY = "system"
# Power usage effectiveness the facility boundary applies unless told: the industry-average annual
# PUE of the Uptime Institute Global Data Center Survey 2024, 1.56 (respondents' largest data
# centre; 1.58 in the 2023 survey, Uptime Intelligence Update 221, "flat since about 2020"). New
# large facilities report 1.3 or better (the same survey): pass --pue for a specific site.
DEFAULT_PUE = 1.56



_NonNegFloat = Annotated[float, BeforeValidator(reject_bool), Field(ge=0, allow_inf_nan=False)]
_Fraction = Annotated[float, BeforeValidator(reject_bool), Field(gt=0, le=1, allow_inf_nan=False)]
_Count = Annotated[int, BeforeValidator(reject_bool), Field(ge=1, le=100000)]


class PerfSpec(StrictSpec):
    """Simulator cost-model constants for a device type (calibrated; see the hardware file)."""
    fixed_overhead_us_per_layer: _NonNegFloat = 0.0
    fixed_overhead_us_per_stage: _NonNegFloat = 0.0
    bandwidth_efficiency: _Fraction = 1.0
    compute_efficiency: _Fraction = 1.0
    fixed_overhead_us_per_layer_per_request: _NonNegFloat = 0.0
    fixed_overhead_us_per_moe_layer: _NonNegFloat = 0.0
    expert_bandwidth_efficiency: _Fraction | None = None     # None: bandwidth_efficiency
    collective_latency_us: _NonNegFloat | None = None        # None: link latency per ring step
    # the token count M at which a GEMM reaches half of compute_efficiency x peak (0: any M runs at
    # the full rate); placer.simulate.cost prices a GEMM of M tokens at peak x eff x M / (M + this)
    compute_half_saturation_tokens: _NonNegFloat = 0.0
    # the share of a link's bandwidth a TP / EP collective's bytes reach (NCCL's bus bandwidth)
    collective_bandwidth_efficiency: _Fraction = 1.0
    # weights of 4 bits or fewer: their GEMMs at this multiple of the 8-bit rate (4-bit tensor cores;
    # 1: none, the weights run on the 8-bit ones)
    compute_fp4_speedup: Annotated[float, BeforeValidator(reject_bool), Field(ge=1, le=4, allow_inf_nan=False)] = 1.0


class DeviceTypeSpec(StrictSpec):
    memory: int | str
    memory_bandwidth: float | str | None = None
    compute: float | str | None = None
    compute_precision: str | None = None
    compute_fp8: float | str | None = None     # dense 8-bit peak, used for weights of 8 bits or fewer
    power: float | str | None = None           # the device alone (chip TDP)
    # the rated power of the system the device is sold in, shared by devices_per_system devices
    system_power: float | str | None = None
    devices_per_system: Annotated[int, BeforeValidator(reject_bool), Field(ge=1, le=100000)] = 1
    kind: Literal["wafer", "gpu"] = "wafer"
    perf: PerfSpec | None = None
    # memory the runtime keeps for itself: a fraction, bytes, or "0.1 + 3.5 GB" (placer.specs.reserve)
    reserve: float | int | str | None = None
    notes: str | None = None
    price: PriceSpec | None = None
    tiers: list[TierSpec] | None = None        # KV tiers below the chip (placer.specs.tiers)

    @field_validator("reserve", mode="before")
    @classmethod
    def _reserve(cls, v):
        if v is None:
            return v
        parse_reserve(v)    # a ValueError names the field
        return v

    @field_validator("memory", mode="before")
    @classmethod
    def _mem(cls, v):
        n = parse_bytes(v)
        if n <= 0:
            raise ValueError("memory must be positive")
        if n > 10**18:
            raise ValueError(f"memory {n} bytes is beyond any device (limit 1 EB)")
        return n

    @field_validator("memory_bandwidth", mode="before")
    @classmethod
    def _bw(cls, v):
        return None if v is None else parse_bandwidth(v)

    @field_validator("compute", "compute_fp8", mode="before")
    @classmethod
    def _fl(cls, v):
        return None if v is None else parse_flops(v)

    @field_validator("power", "system_power", mode="before")
    @classmethod
    def _pw(cls, v):
        return None if v is None else parse_power(v)


LatencyUs = Annotated[float, BeforeValidator(reject_bool), Field(ge=0, le=1e9, allow_inf_nan=False)]


class GroupSpec(StrictSpec):
    device: str | None = None
    racks: _Count
    per_rack: _Count


def _bandwidth_or_none(v):
    return None if v is None else parse_bandwidth(v)


class LinkSpec(StrictSpec):
    a: str
    b: str
    latency_us: LatencyUs
    bandwidth: float | str | None = None

    _bw = field_validator("bandwidth", mode="before")(_bandwidth_or_none)


class FleetSpec(StrictSpec):
    racks: _Count | None = None
    per_rack: _Count | None = None
    device: str | None = None
    groups: list[GroupSpec] | None = None
    intra_rack_latency_us: LatencyUs = 2.0
    inter_rack_latency_us: LatencyUs = 3.0
    intra_rack_bandwidth: float | str | None = None
    inter_rack_bandwidth: float | str | None = None
    inter_rack_topology: Literal["full", "ring", "line", "leaf-spine", "torus"] = "full"
    racks_per_row: Annotated[int, BeforeValidator(reject_bool), Field(ge=1, le=100000)] | None = None
    racks_per_leaf: Annotated[int, BeforeValidator(reject_bool), Field(ge=1, le=100000)] | None = None
    spine_latency_us: LatencyUs = 0.0
    unavailable: list[str] = Field(default_factory=list)
    extra_links: list[LinkSpec] = Field(default_factory=list)

    # parsed here so a unit typo is reported against its field, not as an internal error
    _bw = field_validator("intra_rack_bandwidth", "inter_rack_bandwidth", mode="before")(_bandwidth_or_none)

    @model_validator(mode="after")
    def _shape(self):
        if self.groups is None and (self.racks is None or self.per_rack is None):
            raise ValueError("a fleet needs racks and per_rack, or groups")
        if self.groups is not None and not self.groups:
            raise ValueError("groups is empty: a fleet needs at least one device")
        if (self.inter_rack_topology == "leaf-spine") != (self.racks_per_leaf is not None):
            raise ValueError("racks_per_leaf is given with inter_rack_topology: leaf-spine, and only then")
        if (self.inter_rack_topology == "torus") != (self.racks_per_row is not None):
            raise ValueError("racks_per_row is given with inter_rack_topology: torus, and only then")
        return self


class HardwareSpec(StrictSpec):
    name: SpecName
    description: str | None = None
    notes: str | None = None
    device: DeviceTypeSpec | None = None
    device_name: str | None = None
    device_types: dict[str, DeviceTypeSpec] | None = None
    fleet: FleetSpec

    @model_validator(mode="after")
    def _types(self):
        if (self.device is None) == (self.device_types is None):
            raise ValueError("give exactly one of device (one type) or device_types")
        if self.device_types is not None and not self.device_types:
            raise ValueError("device_types is empty")
        return self


@dataclass(frozen=True)
class DeviceType:
    name: str
    memory_bytes: int
    memory_bandwidth: float | None = None      # bytes/s
    compute_flops: float | None = None          # FLOP/s at compute_precision
    compute_precision: str | None = None
    power_w: float | None = None                # W at the fleet's power boundary (see Fleet.power_boundary)
    kind: str = "wafer"
    compute_fp8_flops: float | None = None      # FLOP/s, dense 8-bit (None: as compute_flops)
    fixed_overhead_us_per_layer: float = 0.0
    fixed_overhead_us_per_stage: float = 0.0
    bandwidth_efficiency: float = 1.0
    compute_efficiency: float = 1.0
    reserve: Reserve = NO_RESERVE     # held back for the runtime on every device of this type
    fixed_overhead_us_per_layer_per_request: float = 0.0
    fixed_overhead_us_per_moe_layer: float = 0.0
    expert_bandwidth_efficiency: float | None = None
    collective_latency_us: float | None = None
    compute_half_saturation_tokens: float = 0.0
    collective_bandwidth_efficiency: float = 1.0
    compute_fp4_speedup: float = 1.0
    chip_power_w: float | None = None           # W, the device alone (the spec's power)
    system_power_w: float | None = None         # W, its share of its system (system_power / devices_per_system)
    price_per_hour: float | None = None         # US dollars per device-hour (its share of a system's)
    price_source: str | None = None             # where the price comes from, its date, "assumption" when one
    tiers: tuple[Tier, ...] = ()                # KV tiers below the chip, per device (placer.specs.tiers)

    @property
    def reserve_bytes(self) -> int:
        return self.reserve.of(self.memory_bytes)

    def power_at(self, boundary: str, pue: float | None = None) -> float | None:
        """W one device of this type draws at ``boundary`` (:data:`POWER_BOUNDARIES`): ``chip`` its
        own power; ``system`` its share of its system's, or its own when the spec gives no system
        figure; ``facility`` the system figure x ``pue`` (default :data:`DEFAULT_PUE`). None when the
        spec gives no figure for it."""
        if boundary == "chip":
            return self.chip_power_w
        system = self.system_power_w if self.system_power_w is not None else self.chip_power_w
        if boundary == "system" or system is None:
            return system
        return system * (DEFAULT_PUE if pue is None else pue)


@dataclass(frozen=True)
class Device:
    id: str
    rack: int
    slot: int
    type: DeviceType
    available: bool = True

    @property
    def memory_bytes(self) -> int:
        return self.type.memory_bytes


# the largest fleet a spec may describe (devices, available or not)
MAX_DEVICES = 200_000

@dataclass(frozen=True)
class Fleet:
    """Devices and links; ``graph`` is a ``networkx.Graph`` over available device ids."""

    name: str
    devices: tuple[Device, ...]
    links: tuple[tuple[str, str, float, float | None], ...]   # (a, b, latency_us, bandwidth B/s)
    sha256: str = ""
    source: str = ""
    spec: dict = field(default_factory=dict, compare=False, repr=False)
    power_boundary: str = DEFAULT_POWER_BOUNDARY    # where every device type's power_w is counted
    pue: float | None = None                        # the facility boundary's PUE (None at the others)
    # the racks' fabric (placer.specs.fabric): mesh and leaf-spine links are implied by it, not in links
    fabric: Fabric | None = None

    @cached_property
    def by_id(self) -> dict[str, Device]:
        return {d.id: d for d in self.devices}

    @property
    def available(self) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.available)

    @cached_property
    def formula(self) -> bool:
        """Whether the fabric's formula is the shortest path among the available devices
        (:meth:`placer.specs.fabric.Fabric.exact_for`): latencies then need no table."""
        return self.fabric is not None and self.fabric.exact_for(self.available)

    @cached_property
    def link_table(self) -> dict[tuple[str, str], tuple[float, float]]:
        """The direct links among available devices: ``(a, b) -> (latency_us, bandwidth)``, each
        pair once (in the direction first listed), the least latency when a pair is listed twice.
        Holds the fabric's implied links too: quadratic in a mesh's devices (:meth:`link_latency_us`
        and :meth:`path_latency_us` answer one pair without it)."""
        avail = {d.id for d in self.available}
        out: dict[tuple[str, str], tuple[float, float]] = {}
        implied = self.fabric.implied_links(self.available) if self.fabric is not None else ()
        for a, b, lat, bw in (*self.links, *implied):
            if a in avail and b in avail:
                key = (b, a) if (b, a) in out else (a, b)
                if key in out and out[key][0] <= lat:
                    continue
                out[key] = (lat, bw)
        return out

    @cached_property
    def graph(self) -> nx.Graph:
        """The fleet as a ``networkx.Graph`` over available device ids (node attributes rack, slot,
        type, memory; edge attributes latency_us, bandwidth): :attr:`link_table` as a graph."""
        import networkx as nx

        g = nx.Graph()
        for d in self.available:
            g.add_node(d.id, rack=d.rack, slot=d.slot, type=d.type.name, memory=d.memory_bytes)
        for (a, b), (lat, bw) in self.link_table.items():
            g.add_edge(a, b, latency_us=lat, bandwidth=bw)
        return g

    @cached_property
    def latency_matrix(self) -> np.ndarray:
        """Shortest-path latency (us) between available devices, in ``available`` order; inf when
        disconnected. By the fabric's formula when it holds (:attr:`formula`), else Dijkstra from
        every device (:func:`placer.specs.fabric.shortest_paths`). Quadratic in the devices:
        large fleets are solved on a quotient (:mod:`placer.algorithms.quotient`)."""
        if self.formula:
            return self.fabric.matrix(self.available)
        ids = [d.id for d in self.available]
        index = {d: k for k, d in enumerate(ids)}
        rows, cols, vals = [], [], []
        for (a, b), (lat, _) in self.link_table.items():
            rows.append(index[a])
            cols.append(index[b])
            vals.append(float(lat))
        n = len(ids)
        if not vals:
            out = np.full((n, n), np.inf)
            np.fill_diagonal(out, 0.0)
            return out
        return shortest_paths(n, rows, cols, vals)

    @property
    def shortest_latency_us(self) -> dict[str, dict[str, float]]:
        """All-pairs shortest-path latency (us) among available devices, by device id."""
        ids = [d.id for d in self.available]
        m = self.latency_matrix
        return {a: {b: float(m[i, j]) for j, b in enumerate(ids) if np.isfinite(m[i, j])}
                for i, a in enumerate(ids)}

    def link_latency_us(self, a: str, b: str) -> float | None:
        """Latency of the direct link a-b, or ``None`` when there is none (or a device of it is
        unavailable). By the fabric's formula when it holds (no table built)."""
        if self.formula:
            da, db = self.by_id.get(a), self.by_id.get(b)
            if da is None or db is None or not (da.available and db.available) or a == b:
                return None
            return self.fabric.link_us(da, db)
        link = self.link_table.get((a, b)) or self.link_table.get((b, a))
        return None if link is None else link[0]

    def link_bandwidth(self, a: str, b: str) -> float | None:
        """Bandwidth (B/s) of the direct link a-b (None: none stated, or no link)."""
        if self.formula:
            if self.link_latency_us(a, b) is None:
                return None
            return self.fabric.link_bw(self.by_id[a], self.by_id[b])
        link = self.link_table.get((a, b)) or self.link_table.get((b, a))
        return None if link is None else link[1]

    def path_latency_us(self, a: str, b: str) -> float:
        """Shortest-path latency (us) between available devices a and b (inf when disconnected): by
        the fabric's formula when it holds, else from :attr:`latency_matrix`."""
        if self.formula:
            return self.fabric.path_us(self.by_id[a], self.by_id[b])
        index = self._available_index
        return float(self.latency_matrix[index[a], index[b]])

    @cached_property
    def _available_index(self) -> dict[str, int]:
        return {d.id: k for k, d in enumerate(self.available)}

    @property
    def device_types(self) -> dict[str, DeviceType]:
        return {d.type.name: d.type for d in self.devices}

    def with_racks(self, racks: int) -> Fleet:
        """The same fleet resized to ``racks`` racks (single-group fleets, or the last group)."""
        spec = dict(self.spec)
        fleet = dict(spec["fleet"])
        if fleet.get("groups"):
            groups = [dict(g) for g in fleet["groups"]]
            others = sum(g["racks"] for g in groups[:-1])
            if racks <= others:
                raise InvalidSpec(ARGUMENT, "racks", f"must exceed the {others} racks of the fixed groups")
            groups[-1]["racks"] = racks - others
            fleet["groups"] = groups
        else:
            fleet["racks"] = racks
        spec["fleet"] = fleet
        return fleet_from_dict(spec, source=self.source, sha256=self.sha256).with_power(self.power_boundary, self.pue)

    def with_power(self, boundary: str = DEFAULT_POWER_BOUNDARY, pue: float | None = None) -> Fleet:
        """The same fleet with power counted at ``boundary`` (:data:`POWER_BOUNDARIES`): every device
        type's ``power_w`` becomes :meth:`DeviceType.power_at` of it, and the fleet records the
        boundary (and, at ``facility``, the PUE: ``pue`` or :data:`DEFAULT_PUE`). Every figure made
        from the fleet (simulated power, tokens/s per MW, J/token) is then at that boundary."""
        if boundary not in POWER_BOUNDARIES:
            raise InvalidSpec(ARGUMENT, "power", f"unknown power boundary {boundary!r} "
                                                 f"(choose from {', '.join(POWER_BOUNDARIES)})")
        if pue is not None:
            if isinstance(pue, bool) or not isinstance(pue, (int, float)) or not 1.0 <= pue <= 5.0:
                raise InvalidSpec(ARGUMENT, "pue", f"a power usage effectiveness is between 1 and 5, got {pue!r}")
            if boundary != "facility":
                raise InvalidSpec(ARGUMENT, "pue", f"applies to the facility boundary only (power is {boundary})")
        pue = (DEFAULT_PUE if pue is None else float(pue)) if boundary == "facility" else None
        if boundary == self.power_boundary and pue == self.pue:
            return self         # every power_w is already counted there (power_at is idempotent)
        types = {name: replace(t, power_w=t.power_at(boundary, pue)) for name, t in self.device_types.items()}
        devices = tuple(replace(d, type=types[d.type.name]) for d in self.devices)
        return replace(self, devices=devices, power_boundary=boundary, pue=pue)

    def power_notes(self) -> list[str]:
        """What the power figures at this fleet's boundary rest on, where it is not the spec's own
        figure for that boundary: one ``<type>: <field>: <what>`` line per device type."""
        notes = []
        for name, t in self.device_types.items():
            if self.power_boundary == "chip" and t.chip_power_w is None and t.system_power_w is not None:
                notes.append(f"{name}: power: the spec gives no chip power (only the system's): power figures "
                             f"at the chip boundary are left out")
            elif self.power_boundary != "chip" and t.system_power_w is None and t.chip_power_w is not None:
                notes.append(f"{name}: system_power: the spec gives no system power: the chip's "
                             f"{t.chip_power_w:,.0f} W is counted at the {self.power_boundary} boundary")
        return notes

    def power_label(self) -> str:
        """The boundary as output names it: ``system``, ``chip`` or ``facility, PUE 1.56``."""
        return f"facility, PUE {self.pue:g}" if self.power_boundary == "facility" else self.power_boundary

    def without(self, device_ids) -> Fleet:
        ids = set(device_ids)
        return replace(self, devices=tuple(replace(d, available=d.available and d.id not in ids)
                                           for d in self.devices))


def load_fleet(ref: str | Path, *, racks: int | None = None, power: str = DEFAULT_POWER_BOUNDARY,
               pue: float | None = None) -> Fleet:
    """Load a hardware spec by catalog name (``wse-3t``) or path; ``racks`` resizes it; ``power``
    and ``pue`` choose the power boundary (:meth:`Fleet.with_power`)."""
    from placer.specs.catalog import resolve_hardware

    path = resolve_hardware(ref)
    data, text = load_yaml_or_json(path)
    fleet = fleet_from_dict(data, source=str(path), sha256=spec_sha256(data))
    if racks is not None:
        if racks < 1:
            raise InvalidSpec(ARGUMENT, "racks", "must be at least 1")
        fleet = fleet.with_racks(racks)
    if power != DEFAULT_POWER_BOUNDARY or pue is not None:
        fleet = fleet.with_power(power, pue)
    return fleet


def _device_type(name: str, s: DeviceTypeSpec, source: str = "<hardware>", where: str = "device") -> DeviceType:
    perf = s.perf or PerfSpec()
    reserve = parse_reserve(s.reserve) if s.reserve is not None else NO_RESERVE
    if reserve.of(s.memory) >= s.memory:
        raise InvalidSpec(source, f"{where}.reserve", f"reserve {reserve.describe()} leaves nothing of "
                                                      f"{s.memory:,} B of memory")
    system = s.system_power / s.devices_per_system if s.system_power is not None else None
    price, price_source = price_of(s.price, s.devices_per_system)
    return DeviceType(reserve=reserve, price_per_hour=price, price_source=price_source, name=name, memory_bytes=s.memory, memory_bandwidth=s.memory_bandwidth,
                      compute_flops=s.compute, compute_precision=s.compute_precision,
                      power_w=system if system is not None else s.power, chip_power_w=s.power, system_power_w=system,
                      compute_fp8_flops=s.compute_fp8, kind=s.kind, tiers=tiers_from_specs(s.tiers, source, where),
                      **dict(perf))    # the cost-model constants, each a DeviceType field of the same name


def _torus_pairs(racks: int, width: int) -> list[tuple[int, int]]:
    """Neighbouring racks of a torus of rows of ``width``: along each row and column, wrapping."""
    pairs = set()
    for r in range(racks):
        x, y = r % width, r // width
        for nb in (y * width + (x + 1) % width, ((y + 1) % (racks // width)) * width + x):
            if nb != r:
                pairs.add((min(r, nb), max(r, nb)))
    return sorted(pairs)


def fleet_from_dict(data: dict, *, source: str = "<hardware>", sha256: str = "") -> Fleet:
    """Build a :class:`Fleet` from a hardware-spec mapping; raises :class:`InvalidSpec` naming the field."""
    try:
        spec = HardwareSpec.model_validate(data)
    except ValidationError as exc:
        raise pydantic_error(source, exc) from None
    if spec.device is not None:
        tname = spec.device_name or spec.name
        types = {tname: _device_type(tname, spec.device, source)}
    else:
        types = {n: _device_type(n, t, source, f"device_types.{n}") for n, t in (spec.device_types or {}).items()}
    f = spec.fleet
    default_type = f.device or next(iter(types))
    if default_type not in types:
        raise InvalidSpec(source, "fleet.device", f"unknown device type {default_type!r} (defined: {sorted(types)})")
    groups = f.groups or [GroupSpec(device=default_type, racks=f.racks, per_rack=f.per_rack)]
    total = sum(g.racks * g.per_rack for g in groups)
    if total > MAX_DEVICES:
        raise InvalidSpec(source, "fleet", f"{total} devices; placer handles fleets up to {MAX_DEVICES:,} devices")
    devices: list[Device] = []
    rack_members: list[list[str]] = []
    rack = 0
    for gi, g in enumerate(groups):
        tname = g.device or default_type
        if tname not in types:
            raise InvalidSpec(source, f"fleet.groups.{gi}.device", f"unknown device type {tname!r}")
        t = types[tname]
        letter = "w" if t.kind == "wafer" else "g"
        for _ in range(g.racks):
            members = []
            for slot in range(g.per_rack):
                did = f"r{rack}{letter}{slot}"
                devices.append(Device(id=did, rack=rack, slot=slot, type=t))
                members.append(did)
            rack_members.append(members)
            rack += 1
    ids = {d.id for d in devices}
    unavailable_seen: set[str] = set()
    for i, u in enumerate(f.unavailable):
        if u not in ids:
            raise InvalidSpec(source, f"fleet.unavailable.{i}", f"unknown device {u!r}")
        if u in unavailable_seen:
            raise InvalidSpec(source, f"fleet.unavailable.{i}", f"device {u!r} is listed twice")
        unavailable_seen.add(u)
    unavailable = set(f.unavailable)
    if unavailable:
        devices = [replace(d, available=False) if d.id in unavailable else d for d in devices]
    intra_bw = parse_bandwidth(f.intra_rack_bandwidth) if f.intra_rack_bandwidth is not None else None
    inter_bw = parse_bandwidth(f.inter_rack_bandwidth) if f.inter_rack_bandwidth is not None else None
    links: list[tuple[str, str, float, float | None]] = []
    for members in rack_members:
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                links.append((a, b, f.intra_rack_latency_us, intra_bw))
    n = len(rack_members)
    fabric = Fabric(f.inter_rack_topology, float(f.intra_rack_latency_us), float(f.inter_rack_latency_us), n,
                    intra_bw, inter_bw, racks_per_leaf=f.racks_per_leaf or 0,
                    spine_us=float(f.spine_latency_us), extra=bool(f.extra_links), racks_per_row=f.racks_per_row or 0)
    if fabric.kind == "torus" and n % fabric.racks_per_row:
        raise InvalidSpec(source, "fleet.racks_per_row", f"{n} racks do not fill rows of {fabric.racks_per_row}")
    if not fabric.implied:      # mesh and leaf-spine links are the fabric's, never listed
        pairs = _torus_pairs(n, fabric.racks_per_row) if fabric.kind == "torus" else [(r, r + 1) for r in range(n - 1)]
        if f.inter_rack_topology == "ring" and n > 2:
            pairs.append((n - 1, 0))
        for r1, r2 in pairs:
            links.append((rack_members[r1][0], rack_members[r2][0], f.inter_rack_latency_us, inter_bw))
    extra_seen: dict[frozenset, int] = {}
    for i, link in enumerate(f.extra_links):
        for end in ("a", "b"):
            if getattr(link, end) not in ids:
                raise InvalidSpec(source, f"fleet.extra_links.{i}.{end}", f"unknown device {getattr(link, end)!r}")
        if link.a == link.b:
            raise InvalidSpec(source, f"fleet.extra_links.{i}", "a link joins two different devices")
        pair = frozenset((link.a, link.b))
        if pair in extra_seen:
            raise InvalidSpec(source, f"fleet.extra_links.{i}",
                              f"link {link.a}-{link.b} is listed twice (also extra_links.{extra_seen[pair]})")
        extra_seen[pair] = i
        bw = parse_bandwidth(link.bandwidth) if link.bandwidth is not None else None
        links.append((link.a, link.b, link.latency_us, bw))
    if not any(d.available for d in devices):
        raise InvalidSpec(source, "fleet.unavailable", "every device is unavailable: the fleet is empty")
    return Fleet(name=spec.name, devices=tuple(devices), links=tuple(links), sha256=sha256, source=source,
                 spec=data, fabric=fabric)
