"""A typed, read-only view of a stage-mapping document.

The JSON document (``docs/mapping-format.md``, :func:`placer.mapping.schema.mapping_schema`) is
the exchange format: :mod:`placer.mapping.document` writes it, :func:`placer.mapping.read_mapping`
reads and schema-checks it. Every reader inside placer (the validator, the exports, the
simulator, the executor, the plots) reads it through this view, built once by
:func:`mapping_view` (schema check, then :meth:`MappingView.from_dict` or
:meth:`PooledView.from_dict`), instead of looking fields up by string key. Optional fields carry
their defaults here, once: a stage without a group runs on its device alone at degree 1, a
version-1 document has no runtime reserve, a missing granularity is ``layer``, a missing expert
group count is 8. ``placer plot`` also draws hand-written sketches that no schema check would
pass; it reads their stages with :meth:`MappingStage.sketched`.

Naming. Six things in placer are called a *stage* and five a *group*; each has one name:

* :class:`MappingStage` (here): one stage of a mapping document, the devices that hold a set of
  nodes with their exact bytes, as written to JSON;
* :class:`placer.problem.placement.Stage`: one used device of a solver's placement (device and
  node indices), from which a document's stages are written;
* :class:`placer.algorithms.stage_degrees.PlanStage`: one stage of a per-stage-degree search
  (a node range, its degree and devices);
* :class:`placer.export.stages.RuntimeRank`: what a pipeline runtime builds on one rank of a
  mapping (its decoder layers, embedding, head and degrees);
* :class:`placer.simulate.cost.Segment`: a run of consecutive nodes on one device as the
  simulator costs it;
* :class:`placer.executor.stage.StageWorker`: the executor's worker that runs one stage's nodes.

And a *group*:

* :class:`StageGroup` (here): the ``tp`` devices of one node that run a mapping stage together
  (tensor and expert parallel), the stage's ``device`` first;
* :class:`placer.specs.model.WeightGroup`: a layer's tensors of one role stored in one format;
* ``expert_groups`` (:attr:`ModelRecord.expert_groups`): the slices a ``block``-refined MoE
  layer's experts are cut into;
* :class:`placer.algorithms.pins.PinGroup`: nodes that must share one device (a recorded pin is a
  :class:`PinRecord` here);
* a group's requests (``simulate_group`` in :mod:`placer.simulate`): the live requests of a stage
  group, split over its ranks under attention data parallelism.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from placer.specs.reserve import NO_RESERVE, Reserve
from placer.specs.speculative import Speculation
from placer.specs.workload import Workload

__all__ = ["StageGroup", "StageBytes", "MappingStage", "ModelRecord", "HardwareRecord", "ParallelRecord",
           "SummaryLevel", "Summary", "Serving", "PinRecord", "MappingView", "PoolTransfer", "PoolTargets",
           "PooledSummary", "PooledView", "FleetModel", "FleetView", "mapping_view", "DEFAULT_EXPERT_GROUPS"]

DEFAULT_EXPERT_GROUPS = 8     # a block-refined MoE layer's expert slices when the model record states none


@dataclass(frozen=True)
class StageGroup:
    """The devices of one node that run a stage (the first is the stage's ``device``): ``tp`` of
    them, experts spread over ``ep`` (``tp`` when spread whole, else 1)."""

    devices: tuple[str, ...]
    tp: int
    ep: int
    racks: tuple[int, ...] = ()       # the nodes a group spanning several lies in (wide expert parallelism)


@dataclass(frozen=True)
class StageBytes:
    """A stage's bytes on each of its devices. ``reserve`` is None in a version-1 document."""

    weights: int
    kv_reserve: int
    state: int
    activations: int
    free: int
    reserve: int | None = None

    def to_dict(self) -> dict:
        out = dict(weights=self.weights, kv_reserve=self.kv_reserve, state=self.state,
                   activations=self.activations)
        if self.reserve is not None:
            out["reserve"] = self.reserve
        out["free"] = self.free
        return out


@dataclass(frozen=True)
class MappingStage:
    """One stage of a mapping: ``device`` (with its ``group`` when it runs on several), the node
    names it holds, its bytes, the live requests it holds (None: unbounded, -1: its weights alone
    overflow) and the latency of the hop to the next stage (None: the last stage, or no path)."""

    index: int
    device: str
    rack: int
    layers: tuple[str, ...]
    bytes: StageBytes
    max_concurrency: int | None
    next_hop_latency_us: float | None
    group: StageGroup | None = None

    @property
    def devices(self) -> tuple[str, ...]:
        """Every device that runs the stage: its group's, or its device alone."""
        return self.group.devices if self.group is not None else (self.device,)

    @property
    def tp(self) -> int:
        """The stage's tensor-parallel degree (1 without a group)."""
        return self.group.tp if self.group is not None else 1

    @property
    def ep(self) -> int:
        """The stage's expert-parallel degree (1 without a group)."""
        return self.group.ep if self.group is not None else 1

    @classmethod
    def from_dict(cls, st: dict) -> MappingStage:
        g, b = st.get("group"), st["bytes"]
        return cls(index=st["index"], device=st["device"], rack=st["rack"], layers=tuple(st["layers"]),
                   bytes=StageBytes(weights=b["weights"], kv_reserve=b["kv_reserve"], state=b["state"],
                                    activations=b["activations"], free=b["free"], reserve=b.get("reserve")),
                   max_concurrency=st["max_concurrency"], next_hop_latency_us=st["next_hop_latency_us"],
                   group=None if g is None else StageGroup(tuple(g["devices"]), g["tp"], g["ep"],
                                                            tuple(g.get("racks", ()))))

    @classmethod
    def sketched(cls, st: dict, position: int) -> MappingStage:
        """A stage of a hand-written document that need not be schema-valid (``placer plot`` draws
        sketches): only ``device`` is required; a missing index is the stage's ``position``, missing
        bytes are 0, a missing rack is -1, nodes may be listed as ``{"name": ...}``."""
        b, g = st.get("bytes") or {}, st.get("group") or None
        layers = tuple(x["name"] if isinstance(x, dict) and "name" in x else str(x) for x in st.get("layers", ()))
        return cls(index=st.get("index", position), device=st["device"], rack=st.get("rack", -1), layers=layers,
                   bytes=StageBytes(**{f: int(b.get(f) or 0) for f in ("weights", "kv_reserve", "state",
                                                                        "activations", "free")},
                                    reserve=None if b.get("reserve") is None else int(b["reserve"])),
                   max_concurrency=st.get("max_concurrency"), next_hop_latency_us=st.get("next_hop_latency_us"),
                   group=None if g is None else StageGroup(tuple(g.get("devices") or (st["device"],)),
                                                           int(g.get("tp", 1)), int(g.get("ep", 1))))


@dataclass(frozen=True)
class ModelRecord:
    """What the mapping says of its model: name, spec hash and source, the granularity it was
    refined to (with its expert slices), how it was loaded (``dropped``, ``mtp``) and whether the
    drafter's own embedding copy is placed."""

    name: str
    sha256: str
    source: str = ""
    granularity: str = "layer"
    expert_groups: int = DEFAULT_EXPERT_GROUPS
    dropped: tuple[str, ...] = ()
    mtp: bool = False
    draft_embedding: bool = False

    @classmethod
    def from_dict(cls, m: dict) -> ModelRecord:
        return cls(name=m["name"], sha256=m["sha256"], source=m.get("source") or "",
                   granularity=m.get("granularity", "layer"),
                   expert_groups=m.get("expert_groups", DEFAULT_EXPERT_GROUPS), dropped=tuple(m.get("dropped", ())),
                   mtp=bool(m.get("mtp")), draft_embedding=bool(m.get("draft_embedding")))


@dataclass(frozen=True)
class HardwareRecord:
    """The fleet: name, spec hash and source, the rack count it was resized to and the power
    boundary it counts at (None: as the spec has them)."""

    name: str
    sha256: str
    source: str = ""
    racks: int | None = None
    power_boundary: str | None = None
    pue: float | None = None

    @classmethod
    def from_dict(cls, h: dict) -> HardwareRecord:
        return cls(name=h["name"], sha256=h["sha256"], source=h.get("source") or "", racks=h.get("racks"),
                   power_boundary=h.get("power_boundary"), pue=h.get("pue"))


@dataclass(frozen=True)
class ParallelRecord:
    """The plan's degrees: ``tp`` and ``ep`` (the largest stage's under ``per_stage``), the runtime
    ``reserve`` override (None: each device type's own; a version-1 document holds none back) and
    attention data parallelism."""

    tp: int = 1
    ep: int = 1
    reserve: Reserve | None = None
    per_stage: bool = False
    attention_dp: bool = False
    redundant_experts: int = 0

    @classmethod
    def from_dict(cls, p: dict | None, schema_version: int) -> ParallelRecord:
        p = p or {}
        reserve = None if p.get("reserve") is None else Reserve.from_dict(p["reserve"])
        if schema_version == 1:
            reserve = NO_RESERVE          # written before reserves existed
        return cls(tp=p.get("tp", 1), ep=p.get("ep", 1), reserve=reserve, per_stage=bool(p.get("per_stage")),
                   attention_dp=bool(p.get("attention_dp")), redundant_experts=int(p.get("redundant_experts") or 0))


@dataclass(frozen=True)
class SummaryLevel:
    """One objective level as the summary states it (``docs/mapping-format.md``)."""

    name: str
    value: float | None
    unit: str
    bound: float | None
    proven: bool
    cap: int | None = None


@dataclass(frozen=True)
class Summary:
    """How well the stages do, as the mapping states it (the validator recomputes it)."""

    devices_used: int
    hops: int
    hop_latency_us: float
    concurrency_ceiling: int | None
    lower_bound_devices: int | None
    method: str
    status: str
    proven_optimal: bool
    objective: float | None
    bound: float | None
    solve_seconds: float
    gap: float | None = None
    group_latency_us: float | None = None
    levels: tuple[SummaryLevel, ...] = ()

    @classmethod
    def from_dict(cls, s: dict) -> Summary:
        levels = tuple(SummaryLevel(lv["name"], lv["value"], lv["unit"], lv["bound"], lv["proven"], lv.get("cap"))
                       for lv in s.get("levels", ()))
        return cls(devices_used=s["devices_used"], hops=s["hops"], hop_latency_us=s["hop_latency_us"],
                   concurrency_ceiling=s["concurrency_ceiling"], lower_bound_devices=s["lower_bound_devices"],
                   method=s["method"], status=s["status"], proven_optimal=s["proven_optimal"],
                   objective=s["objective"], bound=s["bound"], solve_seconds=s["solve_seconds"], gap=s.get("gap"),
                   group_latency_us=s.get("group_latency_us"), levels=levels)


@dataclass(frozen=True)
class Serving:
    """How a speed-floor plan is served (:mod:`placer.mapping.serving`)."""

    replicas: int
    live_per_replica: int
    planned_live_requests: int
    min_user_tokens_per_s: float
    per_user_tokens_per_s: float | None = None
    output_tokens: int | None = None

    @classmethod
    def from_dict(cls, s: dict) -> Serving:
        return cls(replicas=s["replicas"], live_per_replica=s["live_per_replica"],
                   planned_live_requests=s["planned_live_requests"], min_user_tokens_per_s=s["min_user_tokens_per_s"],
                   per_user_tokens_per_s=s.get("per_user_tokens_per_s"), output_tokens=s.get("output_tokens"))


@dataclass(frozen=True)
class PinRecord:
    """Nodes the placement was asked to keep on ``device`` (None: on one device, any)."""

    layers: tuple[str, ...]
    device: str | None


@dataclass(frozen=True)
class MappingView:
    """A one-pool stage mapping (schema versions 1 to 3), read once.

    ``cached_prompt_tokens`` is the ``prefix_cache`` record (0 when the plan assumes none);
    ``speculative`` the speculation the plan was made for (None: none). ``doc`` is the JSON document
    the view was read from, for the exchange functions that take the document itself
    (:func:`placer.mapping.io.specs_from_mapping`); :meth:`section` gives a top-level section of it
    verbatim, for writers that republish it (the executor manifest)."""

    schema_version: int
    model: ModelRecord
    hardware: HardwareRecord
    workload: Workload
    mode: str
    parallel: ParallelRecord
    stages: tuple[MappingStage, ...]
    route: tuple[str, ...]
    summary: Summary
    speculative: Speculation | None = None
    cached_prompt_tokens: int = 0
    require: tuple[str, ...] = ()
    serving: Serving | None = None
    pins: tuple[PinRecord, ...] = ()
    doc: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, doc: dict) -> MappingView:
        """The view of ``doc``, a schema-valid one-pool mapping (:func:`placer.mapping.check_mapping`)."""
        from placer.specs.errors import InvalidSpec

        version = doc["schema_version"]
        try:
            workload = Workload(**doc["workload"])
        except InvalidSpec as exc:
            raise InvalidSpec("<mapping>", f"/workload/{exc.field}", exc.message) from None
        spec = doc.get("speculative")
        try:
            speculation = None if not spec else Speculation.from_dict(spec)
        except InvalidSpec as exc:
            raise InvalidSpec("<mapping>", "/speculative", exc.message) from None
        serving = doc.get("serving")
        return cls(schema_version=version, model=ModelRecord.from_dict(doc["model"]),
                   hardware=HardwareRecord.from_dict(doc["hardware"]), workload=workload, mode=doc["mode"],
                   parallel=ParallelRecord.from_dict(doc.get("parallel"), version),
                   stages=tuple(MappingStage.from_dict(st) for st in doc["stages"]), route=tuple(doc["route"]),
                   summary=Summary.from_dict(doc["summary"]),
                   speculative=speculation,
                   cached_prompt_tokens=int((doc.get("prefix_cache") or {}).get("cached_prompt_tokens", 0)),
                   require=tuple(doc.get("require", ())),
                   serving=None if serving is None else Serving.from_dict(serving),
                   pins=tuple(PinRecord(tuple(p["layers"]), p["device"]) for p in doc.get("pins", ())), doc=doc)

    def section(self, name: str) -> Any:
        """A deep copy of the document's top-level section ``name`` (None when absent), for writers
        that republish it as it is."""
        return copy.deepcopy(self.doc.get(name))


@dataclass(frozen=True)
class PoolTransfer:
    """One prompt's KV moving from the prefill pool to the decode pool."""

    bytes: int
    prompt_tokens: int
    latency_us: float
    bandwidth_bytes_per_s: float
    time_us: float
    link: str


@dataclass(frozen=True)
class PoolTargets:
    """The targets the pools' ratio was chosen for."""

    rate: float | None
    concurrency: int | None
    max_ttft_ms: float
    tpot_ms: float
    prompt_tokens: int
    decode_tokens: int
    max_num_batched_tokens: int


@dataclass(frozen=True)
class PooledSummary:
    """The pair's figures as the two-pool document states them."""

    devices_used: int
    rate: float
    ttft_ms: float
    queue_ms: float
    prefill_ms: float
    transfer_ms: float
    tpot_ms: float
    prefill_interval_ms: float
    prefill_in_flight: int
    decode_held: int
    decode_load: int
    same_fleet: bool
    proven_optimal: bool
    simulated_prefill_ttft_p50_ms: float | None = None


@dataclass(frozen=True)
class PooledView:
    """A two-pool (disaggregated prefill/decode) mapping, schema version 4: each pool a
    :class:`MappingView` of one replica, their ``replicas`` counts, the KV ``transfer`` between
    them, the ``targets`` and the pair's ``summary``."""

    prefill: MappingView
    decode: MappingView
    replicas: dict[str, int]
    transfer: PoolTransfer
    targets: PoolTargets
    summary: PooledSummary

    @property
    def pools(self) -> dict[str, MappingView]:
        """``{"prefill": ..., "decode": ...}``, in that order."""
        return {"prefill": self.prefill, "decode": self.decode}

    @classmethod
    def from_dict(cls, doc: dict) -> PooledView:
        """The view of ``doc``, a schema-valid two-pool mapping."""
        s = doc["summary"]
        return cls(prefill=MappingView.from_dict(doc["pools"]["prefill"]),
                   decode=MappingView.from_dict(doc["pools"]["decode"]), replicas=dict(doc["replicas"]),
                   transfer=PoolTransfer(**doc["transfer"]), targets=PoolTargets(**doc["targets"]),
                   summary=PooledSummary(**{k: s[k] for k in PooledSummary.__dataclass_fields__ if k in s}))


@dataclass(frozen=True)
class FleetModel:
    """One model of a fleet mapping: its ``name``, ``model`` (catalog name), ``share`` and its
    ``pipelines`` (one :class:`MappingView` per replica)."""

    name: str
    model: str
    share: bool
    pipelines: tuple[MappingView, ...]


@dataclass(frozen=True)
class FleetView:
    """A fleet mapping (schema version 5), read once: its ``models`` and ``summary``."""

    hardware: dict
    models: tuple[FleetModel, ...]
    summary: dict
    doc: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, doc: dict) -> FleetView:
        return cls(dict(doc["hardware"]), tuple(
            FleetModel(m["name"], m["model"], m["share"], tuple(MappingView.from_dict(p) for p in m["pipelines"]))
            for m in doc["models"]), dict(doc["summary"]), doc)


def mapping_view(doc, source: str = "<mapping>") -> MappingView | PooledView | FleetView:
    """The view of ``doc``: a view is returned as it is; a JSON document is schema-checked
    (:class:`~placer.specs.errors.InvalidSpec` naming ``source`` and the field) and read once."""
    if isinstance(doc, (MappingView, PooledView, FleetView)):
        return doc
    from placer.mapping.fleet_mapping import is_fleet
    from placer.mapping.pools import is_pooled
    from placer.mapping.schema import check_mapping

    check_mapping(doc, source)
    if is_fleet(doc):
        return FleetView.from_dict(doc)      # several models on one fleet (placer.mapping.fleet_mapping)
    return PooledView.from_dict(doc) if is_pooled(doc) else MappingView.from_dict(doc)
