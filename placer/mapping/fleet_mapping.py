"""Several models on one fleet: the multi-model mapping document, its schema, its check and its view.

A fleet mapping is ``schema_version`` 5 with ``kind: fleet``; its ``models`` each hold a name, the
model's catalog name, whether its devices may be shared (``share``) and its ``pipelines``: one
complete one-pool stage mapping (version 3, as ``placer solve`` writes it, readable, checkable and
exportable on its own) per replica (and, when the plan maximised requests/s, the requests/s one
replica serves as simulated alone). Its view is :class:`placer.mapping.view.FleetView`. The ``summary`` states the joint level (devices or W), its
lower bound and whether it is proven, and the distinct devices used.

:func:`placer.mapping.validate.validate_mapping` validates every pipeline (violations prefixed by
the model and the replica), then (:func:`placer.mapping.validate_fleet.fleet_violations`) what joins them, from the pipelines'
own stages: every pipeline names the same hardware; a device is held by one pipeline only, unless
every pipeline on it belongs to a model that allows sharing; on a shared device the pipelines'
bytes (weights, KV reserve, state, activation buffers) and the runtime reserve fit its memory,
the memory read from the hardware spec; and the summary's device count is the distinct devices.
"""

from __future__ import annotations

__all__ = ["FLEET_VERSION", "fleet_schema", "is_fleet", "check_fleet", "build_fleet_mapping", "stage_devices"]

FLEET_VERSION = 5


def fleet_schema() -> dict:
    """JSON Schema (draft 2020-12) of a fleet mapping; each pipeline is a stage mapping
    (:func:`placer.mapping.schema.mapping_schema`, checked on its own)."""
    opt_num = {"type": ["number", "null"], "minimum": 0}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:placer:stage-mapping:5",
        "title": "placer fleet mapping (several models on one fleet)",
        "type": "object",
        "required": ["schema_version", "kind", "hardware", "models", "summary"],
        "additionalProperties": False,
        "properties": {
            "schema_version": {"const": FLEET_VERSION},
            "kind": {"const": "fleet"},
            "hardware": {"type": "object", "required": ["name", "sha256"]},
            "models": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False,
                "required": ["name", "model", "share", "pipelines"],
                "properties": {"name": {"type": "string", "minLength": 1}, "model": {"type": "string"},
                               "share": {"type": "boolean"},
                               "fewest_alone": {"type": ["integer", "null"], "minimum": 0},
                               "requests_per_s_per_replica": opt_num,
                               "pipelines": {"type": "array", "minItems": 1, "items": {"type": "object"}}}}},
            "summary": {
                "type": "object", "additionalProperties": False,
                "required": ["devices_used", "objective", "value", "bound", "proven_optimal"],
                "properties": {"devices_used": {"type": "integer", "minimum": 1},
                               "objective": {"enum": ["devices", "mw", "requests"]}, "value": opt_num, "bound": opt_num,
                               "proven_optimal": {"type": "boolean"}, "power_w": opt_num,
                               "alone_sum": {"type": ["integer", "null"], "minimum": 0},
                               "relaxation_choices": {"type": "integer", "minimum": 0},
                               "solve_seconds": opt_num}},
        },
    }


def is_fleet(doc) -> bool:
    return isinstance(doc, dict) and doc.get("schema_version") == FLEET_VERSION


def check_fleet(doc: dict, source: str, check_one) -> dict:
    """``doc`` if it is a schema-valid fleet mapping (``check_one(sub, source)`` checks each
    pipeline); else :class:`~placer.specs.errors.InvalidSpec` naming the JSON pointer."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    from placer.specs.errors import InvalidSpec

    error = best_match(Draft202012Validator(fleet_schema()).iter_errors(doc))
    if error is not None:
        raise InvalidSpec(source, "/" + "/".join(str(p) for p in error.absolute_path), error.message)
    names = [m["name"] for m in doc["models"]]
    for k, m in enumerate(doc["models"]):
        if m["name"] in names[:k]:
            raise InvalidSpec(source, f"/models/{k}/name", f"{m['name']!r} names two models")
        for r, sub in enumerate(m["pipelines"]):
            if sub.get("schema_version") not in (1, 2, 3):
                raise InvalidSpec(source, f"/models/{k}/pipelines/{r}/schema_version",
                                  "a pipeline is a one-pool stage mapping")
            try:
                check_one(sub, source)
            except InvalidSpec as exc:
                raise InvalidSpec(source, f"/models/{k}/pipelines/{r}{exc.field}", exc.message) from None
    return doc


def stage_devices(stage: dict) -> list[str]:
    """The device ids a mapping's stage runs on: its group's, or its one device."""
    return stage["group"]["devices"] if "group" in stage else [stage["device"]]


def build_fleet_mapping(fp) -> dict:
    """The fleet document of a feasible :class:`~placer.planning.fleet_plan.FleetPlan`."""
    first = fp.models[0].replicas[0].solved.mapping
    return {
        "schema_version": FLEET_VERSION,
        "kind": "fleet",
        "hardware": dict(first["hardware"]),
        "models": [dict(name=m.entry.name, model=m.entry.model.name, share=m.entry.share, fewest_alone=m.fewest,
                        **({} if m.rate is None else {"requests_per_s_per_replica": m.rate}),
                        pipelines=[r.solved.mapping for r in m.replicas]) for m in fp.models],
        "summary": dict(devices_used=fp.devices, objective=fp.objective, value=fp.value, bound=fp.bound,
                        proven_optimal=bool(fp.proven), power_w=fp.power_w, alone_sum=fp.alone_sum,
                        relaxation_choices=fp.tried, solve_seconds=round(fp.seconds, 3)),
    }
