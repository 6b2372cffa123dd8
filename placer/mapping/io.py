"""Reading and writing stage mappings (atomically, schema-checked) and rebuilding their specs and instance.

:func:`specs_from_mapping` and :func:`instance_from_mapping` read the JSON document itself (a
:class:`~placer.mapping.view.MappingView`'s ``doc``), not its view: ``placer validate --rebuild``
reloads the specs of a hand-edited document that the schema refuses (stages with a device and
nodes, nothing more), which no view can be built from."""

from __future__ import annotations

import json
import os
from dataclasses import replace

from placer.mapping.document import _racks
from placer.mapping.schema import SCHEMA_VERSION, check_mapping
from placer.problem.reductions.refine import refine
from placer.specs.errors import InvalidSpec
from placer.specs.experts import with_redundant_experts
from placer.specs.fleet import Fleet, load_fleet
from placer.specs.model import DRAFT_EMBEDDING, DRAFT_PREFIX, LayerGraph, load_model
from placer.specs.spec_io import atomic_write_text, parse_json, read_text
from placer.specs.workload import Workload

__all__ = ["read_mapping", "write_mapping", "dumps_mapping", "compact_json", "specs_from_mapping",
           "instance_from_mapping"]


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
        flag = {"model": "--model", "hardware": "--hardware"}.get(what, "--draft-model")
        raise InvalidSpec(exc.source, exc.field,
                          f"{exc.message} (the mapping names this {what}; pass {flag} to point at it)") from None


def _load_options(recorded: dict) -> dict:
    """``load_model`` keywords that rebuild the graph a mapping's ``model`` record describes."""
    return dict(text_only="vision_tower" in recorded.get("dropped", ()), mtp=bool(recorded.get("mtp")))


def specs_from_mapping(doc: dict, *, model=None, hardware=None, workload: Workload | None = None):
    """(unrefined model, fleet, workload) a mapping was made from.

    ``model`` / ``hardware`` override the recorded specs: a :class:`LayerGraph` / :class:`Fleet`, or a
    catalog name or path. The fleet is resized to the recorded rack count when it differs (``--racks``).
    """
    options = _load_options(doc["model"])
    m = _load(model, doc["model"], "model", lambda ref: load_model(ref, **options))
    copies = (doc.get("parallel") or {}).get("redundant_experts") or 0
    if copies:
        try:
            m = with_redundant_experts(m, copies)    # the model as served, with its expert copies
        except ValueError:
            pass                                     # no MoE layer: the validator says so (expert_ranks)
    draft = (doc.get("speculative") or {}).get("draft")
    if draft is not None and not any(x.name.startswith(DRAFT_PREFIX) for x in m.layers):
        # the draft model's nodes are placed beside the target's (placer.specs.speculative.with_draft)
        from placer.specs.speculative import with_draft

        m = with_draft(m, _load(None, draft, "draft model", load_model))
    if doc["model"].get("draft_embedding") and not any(x.name == DRAFT_EMBEDDING for x in m.layers):
        from placer.specs.speculative import with_draft_embedding

        m = with_draft_embedding(m)
    fleet = _load(hardware, doc["hardware"], "hardware", load_fleet)
    racks = doc["hardware"].get("racks")
    if racks is not None and not isinstance(hardware, Fleet) and racks != _racks(fleet):
        fleet = fleet.with_racks(racks)
    boundary = doc["hardware"].get("power_boundary")
    if boundary is not None and not isinstance(hardware, Fleet):
        fleet = fleet.with_power(boundary, doc["hardware"].get("pue"))
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
    from placer.problem.instance import Layout, Pin, make_instance

    m, fleet, wl = specs_from_mapping(doc, model=model, hardware=hardware)
    granularity = doc["model"].get("granularity", "layer")
    groups = doc["model"].get("expert_groups", 8)
    probe = refine(m, granularity, expert_groups=groups) if doc["mode"] == "split" else m
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
    from placer.specs.reserve import Reserve
    if par.get("per_stage"):
        inst = _per_stage_instance(doc, probe, fleet, wl, ep=par.get("ep", 1) > 1,
                                        reserve=None if reserve is None else Reserve.from_dict(reserve))
        return m, fleet, wl, _with_prefix_cache(inst, doc)
    inst = make_instance(m, fleet, wl, mode=doc["mode"],
                         granularity=granularity if doc["mode"] == "split" else "layer",
                         pins=tuple(pins), expert_groups=groups,
                         layout=Layout(tp=par.get("tp", 1), ep=par.get("ep", 1) > 1,
                                       reserve=None if reserve is None else Reserve.from_dict(reserve),
                                       attention_dp=bool(par.get("attention_dp"))),
                         require=tuple(doc.get("require", ())))
    return m, fleet, wl, _with_prefix_cache(inst, doc)


def _with_prefix_cache(inst, doc: dict):
    """``inst`` with the prefix-cache hit and the traffic the mapping's plan assumed (its simulations
    use them; the traffic as its record, which placer.simulate reads)."""
    cached = (doc.get("prefix_cache") or {}).get("cached_prompt_tokens", 0)
    inst = replace(inst, cached_prompt_tokens=int(cached)) if cached else inst
    return replace(inst, traffic=dict(doc["traffic"])) if doc.get("traffic") else inst


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
    from placer.problem.instance import per_stage_instance

    return per_stage_instance(model, fleet, workload, groups, degree_of_node, ep=ep, reserve=reserve)
