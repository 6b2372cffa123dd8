"""The stage-mapping file: build it from a placement, write it atomically, read it back schema-checked.

A mapping records what was placed (model and hardware by name, source and content hash, the
workload, the mode and granularity), where (stages in pipeline order with their exact byte
breakdown and the concurrency each holds, the route of every node) and how well (devices, hops,
hop latency, concurrency ceiling, lower bound, status and proof). Format: ``DESIGN.md``;
:func:`mapping_schema` is its JSON Schema (``placer schema`` prints it).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from .catalog import hardware_dir, models_dir
from .errors import InfeasiblePlacement, InvalidSpec
from .fleet import Fleet, load_fleet
from .model import LayerGraph, load_model
from .spec_io import atomic_write_text, parse_json, read_text
from .workload import Workload

if TYPE_CHECKING:   # jsonschema loads on the first check (a solve that writes nothing never needs it)
    from jsonschema import Draft202012Validator

__all__ = [
    "SCHEMA_VERSION",
    "build_mapping",
    "mapping_schema",
    "check_mapping",
    "read_mapping",
    "write_mapping",
    "dumps_mapping",
    "compact_json",
    "specs_from_mapping",
    "instance_from_mapping",
    "expert_groups_of",
]

SCHEMA_VERSION = 2
READS_VERSIONS = (1, 2)   # version 1: no groups (one device per stage) and no reserve
_STATUSES = ("optimal", "feasible", "infeasible", "unknown", "heuristic")
_WORKLOAD_REQUIRED = ("context_tokens", "concurrency", "weight_bits", "kv_bits", "state_bits", "micro_batch")


# ----------------------------------------------------------------------------- building
def _finite(x):
    """``x`` as a JSON-safe number: ``None`` for None, inf and nan."""
    if x is None:
        return None
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _spec_ref(source: str, folder: Path) -> str:
    """The catalog name when ``source`` is a file of the catalog ``folder``, else ``source`` itself."""
    if not source:
        return source
    p = Path(source)
    try:
        if p.suffix in (".yaml", ".yml") and p.resolve().parent == folder.resolve():
            return p.stem
    except OSError:
        pass
    return source


def _racks(fleet: Fleet) -> int:
    return len({d.rack for d in fleet.devices})


def expert_groups_of(model: LayerGraph) -> int | None:
    """Expert groups per MoE layer in a ``block``-refined graph (None when it has none)."""
    groups = Counter(x.parent for x in model.layers if x.part and x.part.startswith("experts "))
    return max(groups.values()) if groups else None


def build_mapping(instance, result) -> dict:
    """The stage-mapping document of ``result`` (a placement of ``instance``), in DESIGN.md's format.

    Stages are the used devices in order of first visit (pipeline order for contiguous and split
    placements); each names its group when ``tp`` > 1 (the ``tp`` devices of one node that run it,
    the first being the stage's ``device``, and the expert-parallel degree ``ep``: ``tp`` when
    experts are spread whole, else 1; without a
    group the stage runs on its ``device`` alone) and states the exact bytes
    of each rank under the instance's workload: weights, KV reserve (concurrency x KV bytes per
    request), recurrent state (concurrency x state bytes per request), activation buffers, the
    runtime reserve and what is left free. ``max_concurrency`` is the largest number of live
    requests the stage holds (``null``: unbounded, the stage keeps no per-request memory; ``-1``:
    its weights alone overflow). Raises :class:`InfeasiblePlacement` when ``result`` has no placement.
    """
    if result.assignment is None:
        raise InfeasiblePlacement(result.message or f"no placement to write (status {result.status})",
                                  max_concurrency=result.max_concurrency)
    assignment = tuple(int(a) for a in result.assignment)
    if len(assignment) != instance.n_nodes:
        raise ValueError(f"assignment has {len(assignment)} entries for {instance.n_nodes} nodes")
    model, base, fleet, wl = instance.model, instance.base_model or instance.model, instance.fleet, instance.workload
    devices = instance.devices
    order: list[int] = []
    held: dict[int, list[int]] = {}
    for i, d in enumerate(assignment):
        if d not in held:
            held[d] = []
            order.append(d)
        held[d].append(i)

    c = wl.concurrency
    act = instance.activation_buffer_bytes
    stages = []
    for k, d in enumerate(order):
        nodes = held[d]
        weights = sum(instance.weight_bytes[i] for i in nodes)
        kv = c * sum(instance.kv_request_bytes[i] for i in nodes)
        state = c * sum(instance.state_request_bytes[i] for i in nodes)
        dev = devices[d]
        nxt = None
        if k + 1 < len(order):
            e = order[k + 1]
            nxt = instance.hop_us(d, e)
        reserve = instance.reserve_bytes[d]
        stage = dict(index=k, device=dev.id, rack=dev.rack, layers=[model.layers[i].name for i in nodes])
        if instance.tp > 1 or instance.ep:
            # a group of one (the stage's device alone) is left implicit; per-stage plans give
            # every stage its own degree (the size of its group)
            members = instance.members(d)
            stage["group"] = dict(devices=list(members), tp=len(members), ep=len(members) if instance.ep else 1)
        stage.update(
            bytes=dict(weights=weights, kv_reserve=kv, state=state, activations=act, reserve=reserve,
                       free=dev.memory_bytes - weights - kv - state - act - reserve),
            max_concurrency=instance.max_concurrency(nodes, d), next_hop_latency_us=_finite(nxt))
        stages.append(stage)

    # Counted from the assignment when the method left a figure out.
    hops, lat = instance.hops(assignment)
    # the groups' collectives, when the method costed them (placer.groups.per_device records them)
    intra = result.stats.get("group_latency_us") if result.stats else None
    lat += intra or 0.0
    finite = [s["max_concurrency"] for s in stages if s["max_concurrency"] is not None]
    ceiling = result.concurrency_ceiling if result.concurrency_ceiling is not None else (
        min(finite) if finite else None)

    def pick(value, fallback):
        return fallback if value is None else value

    model_doc = dict(name=base.name, sha256=base.sha256, source=_spec_ref(base.source, models_dir()),
                     granularity=model.granularity)
    groups = expert_groups_of(model)
    if groups is not None:
        model_doc["expert_groups"] = groups
    doc = {
        "schema_version": SCHEMA_VERSION,
        "model": model_doc,
        "hardware": dict(name=fleet.name, sha256=fleet.sha256, source=_spec_ref(fleet.source, hardware_dir()),
                         racks=_racks(instance.layout.base_fleet if instance.layout is not None
                                      and instance.layout.base_fleet is not None else fleet)),
        "workload": wl.to_dict(),
        "mode": instance.mode,
        "parallel": _parallel_doc(instance),
        "stages": stages,
        "route": [devices[d].id for d in assignment],
        "summary": dict(
            devices_used=sum(len(instance.members(d)) for d in order),   # every device of every group
            hops=pick(result.hops, hops),
            hop_latency_us=_finite(pick(result.hop_latency_us, lat)),
            **({"group_latency_us": _finite(intra)} if intra is not None else {}),
            concurrency_ceiling=ceiling,
            lower_bound_devices=result.lower_bound_devices,
            method=result.method,
            status=str(result.status),
            proven_optimal=bool(result.proven_optimal),
            objective=_finite(result.objective),
            bound=_finite(result.bound),
            gap=_finite(result.gap),
            solve_seconds=_finite(float(result.seconds)) or 0.0),
    }
    if instance.pins:
        doc["pins"] = [dict(layers=[model.layers[i].name for i in p.nodes], device=p.device)
                       for p in instance.pins]
    return doc


def _parallel_doc(instance) -> dict:
    lay = instance.layout
    doc = dict(tp=instance.tp, ep=instance.tp if instance.ep else 1,
               reserve=None if lay is None or lay.reserve is None else lay.reserve.to_dict())
    if lay is not None and lay.per_stage:
        doc["per_stage"] = True      # tp and ep are the largest stage's; each stage's group has its own
    return doc


# ----------------------------------------------------------------------------- schema
def mapping_schema() -> dict:
    """JSON Schema (draft 2020-12) of a stage mapping, ``schema_version`` 2 (1 still reads: no
    ``parallel``, stage ``group`` or ``bytes.reserve``)."""
    count = {"type": "integer", "minimum": 0}
    opt_count = {"type": ["integer", "null"], "minimum": 0}
    concurrency = {"type": ["integer", "null"], "minimum": -1,
                   "description": "live requests held; null = unbounded (no per-request memory); "
                                  "-1 = the weights alone overflow the device"}
    opt_number = {"type": ["number", "null"]}
    sha = {"type": "string", "pattern": "^([0-9a-f]{64})?$",
           "description": "SHA-256 of the spec file's text (empty when the spec had no file)"}
    name = {"type": "string", "minLength": 1}
    bits = {"type": "integer", "minimum": 1, "maximum": 64}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:placer:stage-mapping:2",
        "title": "placer stage mapping",
        "description": "Where each layer of a model sits on a fleet, stage by stage, with exact bytes.",
        "type": "object",
        "required": ["schema_version", "model", "hardware", "workload", "mode", "stages", "route", "summary"],
        "properties": {
            "schema_version": {"enum": list(READS_VERSIONS)},
            "parallel": {
                "type": "object", "required": ["tp", "ep"], "additionalProperties": False,
                "properties": {
                    "tp": {"type": "integer", "minimum": 1, "maximum": 100000},
                    "ep": {"type": "integer", "minimum": 1, "maximum": 100000,
                           "description": "expert-parallel degree: tp when experts are spread whole, else 1"},
                    "reserve": {
                        "type": ["object", "null"], "required": ["fraction", "bytes"],
                        "additionalProperties": False,
                        "description": "the --reserve override; null: each device type's own",
                        "properties": {"fraction": {"type": "string", "pattern": r"^[0-9./]+$"},
                                       "bytes": count},
                    },
                    "per_stage": {"type": "boolean",
                                  "description": "every stage has its own degree (its group's tp and ep); "
                                                 "tp and ep here are the largest"},
                },
            },
            "model": {
                "type": "object", "required": ["name", "sha256"],
                "properties": {
                    "name": name, "sha256": sha,
                    "source": {"type": "string", "description": "catalog name or spec path"},
                    "granularity": {"type": "string", "pattern": r"^(layer|block|shards:[0-9]+)$"},
                    "expert_groups": {"type": "integer", "minimum": 1},
                },
            },
            "hardware": {
                "type": "object", "required": ["name", "sha256"],
                "properties": {
                    "name": name, "sha256": sha,
                    "source": {"type": "string", "description": "catalog name or spec path"},
                    "racks": {"type": "integer", "minimum": 1, "maximum": 100000},
                },
            },
            "workload": {
                "type": "object", "required": list(_WORKLOAD_REQUIRED), "additionalProperties": False,
                "properties": {
                    # the same limits as placer.workload.Workload, so the schema check names the file
                    "context_tokens": {"type": "integer", "minimum": 1, "maximum": 2**40},
                    "concurrency": {"type": "integer", "minimum": 0, "maximum": 10**9},
                    "weight_bits": bits, "kv_bits": bits, "state_bits": bits, "conv_state_bits": bits,
                    "activation_bits": bits, "weight_scale_bits": bits,
                    "micro_batch": {"type": "integer", "minimum": 1, "maximum": 10**6},
                    "weight_group_size": count,
                    "weights_as_stored": {"type": "boolean"},
                },
            },
            "mode": {"enum": ["contiguous", "free", "split"]},
            "stages": {
                "type": "array", "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["index", "device", "rack", "layers", "bytes", "max_concurrency",
                                 "next_hop_latency_us"],
                    "properties": {
                        "index": count, "device": name, "rack": count,
                        "layers": {"type": "array", "items": name},
                        "group": {
                            "type": "object", "required": ["devices", "tp", "ep"], "additionalProperties": False,
                            "description": "the devices of one node that run the stage; bytes are per device",
                            "properties": {"devices": {"type": "array", "minItems": 1, "items": name},
                                           "tp": {"type": "integer", "minimum": 1},
                                           "ep": {"type": "integer", "minimum": 1}},
                        },
                        "bytes": {
                            "type": "object", "additionalProperties": False,
                            "required": ["weights", "kv_reserve", "state", "activations", "free"],
                            "properties": {"weights": count, "kv_reserve": count, "state": count,
                                           "activations": count, "reserve": count,
                                           "free": {"type": "integer"}},
                        },
                        "max_concurrency": concurrency,
                        "next_hop_latency_us": {"type": ["number", "null"], "minimum": 0},
                    },
                },
            },
            "route": {"type": "array", "items": name},
            "summary": {
                "type": "object",
                "required": ["devices_used", "hops", "hop_latency_us", "concurrency_ceiling",
                             "lower_bound_devices", "method", "status", "proven_optimal", "objective",
                             "bound", "solve_seconds"],
                "properties": {
                    "devices_used": count, "hops": count,
                    "hop_latency_us": {"type": "number", "minimum": 0,
                                       "description": "hops between stages, plus group_latency_us when stated"},
                    "group_latency_us": {"type": "number", "minimum": 0,
                                         "description": "link latency of the groups' collectives (all-reduces, "
                                                        "all-to-alls), part of hop_latency_us"},
                    "concurrency_ceiling": concurrency,
                    "lower_bound_devices": opt_count,
                    "method": name, "status": {"enum": list(_STATUSES)},
                    "proven_optimal": {"type": "boolean"},
                    "objective": opt_number, "bound": opt_number, "gap": opt_number,
                    "solve_seconds": {"type": "number", "minimum": 0},
                },
            },
            "pins": {
                "type": "array",
                "items": {
                    "type": "object", "required": ["layers", "device"], "additionalProperties": False,
                    "properties": {"layers": {"type": "array", "minItems": 1, "items": name},
                                   "device": {"type": ["string", "null"]}},
                },
            },
        },
    }


_VALIDATOR: Draft202012Validator | None = None


def _validator() -> Draft202012Validator:
    global _VALIDATOR
    if _VALIDATOR is None:
        from jsonschema import Draft202012Validator

        _VALIDATOR = Draft202012Validator(mapping_schema())
    return _VALIDATOR


def _pointer(parts) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def check_mapping(doc, source: str = "<mapping>") -> dict:
    """``doc`` if it is a schema-valid mapping; else :class:`InvalidSpec` naming the JSON pointer of the bad field.

    A mapping of another ``schema_version`` gets a message saying so before any other check.
    """
    if not isinstance(doc, dict):
        raise InvalidSpec(source, "/", f"a mapping is a JSON object, got {type(doc).__name__}")
    version = doc.get("schema_version")
    if version not in READS_VERSIONS and isinstance(version, int) and not isinstance(version, bool):
        raise InvalidSpec(source, "/schema_version",
                          f"written by a different placer version (schema_version {version}; "
                          f"this placer reads {' and '.join(map(str, READS_VERSIONS))})")
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(doc))
    if error is None:
        return doc
    path = list(error.absolute_path)
    message = error.message
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        if missing:
            path.append(missing[0])
            message = "required field is missing"
    elif error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        if extra:
            path.append(extra[0])
            message = "unknown field"
    raise InvalidSpec(source, _pointer(path) or "/", message)


# ----------------------------------------------------------------------------- reading and writing
def read_mapping(path: str | os.PathLike) -> dict:
    """The mapping in ``path``, checked against :func:`mapping_schema`.

    Refuses missing, oversized and non-UTF-8 files, invalid JSON (including NaN, Infinity and
    duplicate keys) and schema violations with an :class:`InvalidSpec` naming the bad field.
    """
    return check_mapping(parse_json(read_text(path), str(path)), str(path))


def _dump(value, indent: int, width: int) -> str:
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        if not any(isinstance(v, (dict, list)) for v in value.values()):
            one = json.dumps(value, allow_nan=False)
            if len(one) + indent <= width:
                return one
        items = [f'{pad}  {json.dumps(k)}: {_dump(v, indent + 2, width)}' for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        if any(isinstance(v, (dict, list)) for v in value):
            items = [f"{pad}  {_dump(v, indent + 2, width)}" for v in value]
            return "[\n" + ",\n".join(items) + "\n" + pad + "]" if value else "[]"
        one = json.dumps(value, allow_nan=False)
        if len(one) + indent <= width:
            return one
        # a long list of scalars: wrapped, several per line
        lines, line = [], ""
        for v in value:
            token = json.dumps(v, allow_nan=False)
            if line and len(line) + len(token) + indent + 4 > width:
                lines.append(line)
                line = ""
            line = f"{line}, {token}" if line else token
        lines.append(line)
        return "[\n" + ",\n".join(f"{pad}  {x}" for x in lines) + "\n" + pad + "]"
    return json.dumps(value, allow_nan=False)


def compact_json(value) -> str:
    """JSON text: one field per line, except small objects and lists of scalars, kept on (wrapped) lines."""
    return _dump(value, 0, 100)


def dumps_mapping(doc: dict) -> str:
    """JSON text of a mapping as placer writes it (:func:`compact_json` plus a final newline)."""
    return compact_json(doc) + "\n"


def write_mapping(path: str | os.PathLike, doc: dict) -> None:
    """Check ``doc`` against the schema and write it to ``path`` atomically (temp file, fsync, rename).

    An interrupted write leaves any previous file at ``path`` intact and no temporary file behind.
    """
    check_mapping(doc, str(path))
    atomic_write_text(path, dumps_mapping(doc))


# ----------------------------------------------------------------------------- reloading
def _load(ref, recorded: dict, what: str, loader):
    if ref is not None and not isinstance(ref, (str, os.PathLike)):
        return ref
    target = ref if ref is not None else (recorded.get("source") or recorded["name"])
    try:
        return loader(target)
    except InvalidSpec as exc:
        if ref is not None:
            raise
        flag = "--model" if what == "model" else "--hardware"
        raise InvalidSpec(exc.source, exc.field,
                          f"{exc.message} (the mapping names this {what}; pass {flag} to point at it)") from None


def specs_from_mapping(doc: dict, *, model=None, hardware=None, workload: Workload | None = None):
    """(unrefined model, fleet, workload) a mapping was made from.

    ``model`` / ``hardware`` override the recorded specs: a :class:`LayerGraph` / :class:`Fleet`, or a
    catalog name or path. The fleet is resized to the recorded rack count when it differs (``--racks``).
    """
    m = _load(model, doc["model"], "model", load_model)
    fleet = _load(hardware, doc["hardware"], "hardware", load_fleet)
    racks = doc["hardware"].get("racks")
    if racks is not None and not isinstance(hardware, Fleet) and racks != _racks(fleet):
        fleet = fleet.with_racks(racks)
    if workload is None:
        try:
            workload = Workload(**doc["workload"])
        except InvalidSpec as exc:
            raise InvalidSpec("<mapping>", f"/workload/{exc.field}", exc.message) from None
    return m, fleet, workload


def instance_from_mapping(doc: dict, model=None, hardware=None):
    """(model, fleet, workload, instance) of a mapping; the instance is refined to the recorded granularity.

    Pins recorded in the mapping are restored. ``model`` / ``hardware`` override the recorded specs
    (objects or catalog names / paths).
    """
    from .instance import Pin, make_instance

    m, fleet, wl = specs_from_mapping(doc, model=model, hardware=hardware)
    granularity = doc["model"].get("granularity", "layer")
    groups = doc["model"].get("expert_groups", 8)
    probe = m.refine(granularity, expert_groups=groups) if doc["mode"] == "split" else m
    names = {x.name: i for i, x in enumerate(probe.layers)}
    pins = []
    for k, p in enumerate(doc.get("pins", [])):
        unknown = [n for n in p["layers"] if n not in names]
        if unknown:
            raise InvalidSpec("<mapping>", f"/pins/{k}/layers", f"unknown node {unknown[0]!r} in {m.name}")
        pins.append(Pin(tuple(names[n] for n in p["layers"]), p["device"]))
    par = doc.get("parallel") or {}
    reserve = par.get("reserve")
    if doc.get("schema_version", SCHEMA_VERSION) == 1:
        reserve = {"fraction": "0", "bytes": 0}     # written before reserves existed
    from .reserve import Reserve
    if par.get("per_stage"):
        inst = _per_stage_instance(doc, probe, fleet, wl, ep=par.get("ep", 1) > 1,
                                        reserve=None if reserve is None else Reserve.from_dict(reserve))
        return m, fleet, wl, inst
    inst = make_instance(m, fleet, wl, mode=doc["mode"],
                         granularity=granularity if doc["mode"] == "split" else "layer",
                         pins=tuple(pins), expert_groups=groups, tp=par.get("tp", 1), ep=par.get("ep", 1) > 1,
                         reserve=None if reserve is None else Reserve.from_dict(reserve))
    return m, fleet, wl, inst


def _per_stage_instance(doc: dict, model: LayerGraph, fleet: Fleet, workload: Workload, *, ep: bool = False,
                        reserve=None):
    """The plan instance of a per-stage mapping (its stages' groups and layers); :class:`InvalidSpec`
    naming the field when a stage names an unknown device or node."""
    names = {x.name: i for i, x in enumerate(model.layers)}
    groups, degree_of_node = [], [1] * len(model.layers)
    for k, st in enumerate(doc["stages"]):
        members = list((st.get("group") or {}).get("devices") or [st["device"]])
        for dev in members:
            if dev not in fleet.by_id or not fleet.by_id[dev].available:
                raise InvalidSpec("<mapping>", f"/stages/{k}/group/devices", f"unknown or unavailable device {dev!r}")
        for name in st["layers"]:
            if name not in names:
                raise InvalidSpec("<mapping>", f"/stages/{k}/layers", f"unknown node {name!r} in {model.name}")
            degree_of_node[names[name]] = len(members)
        groups.append(tuple(members))
    from .instance import per_stage_instance

    return per_stage_instance(model, fleet, workload, groups, degree_of_node, ep=ep, reserve=reserve)
