"""The stage mapping's JSON Schema and the check every reader runs (``placer schema`` prints it).

The format is described in ``docs/mapping-format.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from placer.mapping.tiers import sessions_schema
from placer.problem.instance import REQUIREMENTS
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import POWER_BOUNDARIES
from placer.specs.units import LEVEL_UNITS

if TYPE_CHECKING:   # jsonschema loads on the first check (a solve that writes nothing never needs it)
    from jsonschema import Draft202012Validator

__all__ = ["SCHEMA_VERSION", "READS_VERSIONS", "mapping_schema", "check_mapping"]

SCHEMA_VERSION = 3
# version 1: no groups (one device per stage) and no reserve; 2: no summary levels, no requirements
STAGE_VERSIONS = (1, 2, 3)   # one-pool stage mappings
# version 4: a two-pool (disaggregated prefill/decode) mapping whose pools are version-3 stage
# mappings (placer/mapping/pools.py); one-pool mappings are still written as version 3
READS_VERSIONS = (1, 2, 3, 4, 5)
_STATUSES = ("optimal", "feasible", "infeasible", "unknown", "heuristic")
_WORKLOAD_REQUIRED = ("context_tokens", "concurrency", "weight_bits", "kv_bits", "state_bits", "micro_batch")


# ----------------------------------------------------------------------------- schema
def mapping_schema() -> dict:
    """JSON Schema (draft 2020-12) of a stage mapping, ``schema_version`` 3 (2 still reads: no
    summary ``levels`` and no ``require``; 1 as well: no ``parallel``, stage ``group`` or
    ``bytes.reserve``)."""
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
        "$id": "urn:placer:stage-mapping:3",
        "title": "placer stage mapping",
        "description": "Where each layer of a model sits on a fleet, stage by stage, with exact bytes.",
        "type": "object",
        "required": ["schema_version", "model", "hardware", "workload", "mode", "stages", "route", "summary"],
        # a misspelt field (devcie) is refused, not silently ignored
        "additionalProperties": False,
        "properties": {
            "schema_version": {"enum": list(STAGE_VERSIONS)},
            "parallel": _parallel_schema(count),
            "model": _model_schema(name, sha),
            "hardware": _hardware_schema(name, sha),
            "workload": _workload_schema(count, bits),
            "mode": {"enum": ["contiguous", "free", "split"]},
            "stages": {"type": "array", "minItems": 1, "items": _stage_schema(count, concurrency, name)},
            "route": {"type": "array", "items": name},
            "summary": _summary_schema(count, opt_count, opt_number, concurrency, name),
            "speculative": _speculative_schema(name, sha, opt_number),
            "prefix_cache": {
                "type": "object", "required": ["cached_prompt_tokens"], "additionalProperties": False,
                "description": "the prefix-cache hit the plan's speeds assume: of every prompt, this many leading "
                               "tokens have their KV in place on admission (only the rest is prefilled)",
                "properties": {"cached_prompt_tokens": {"type": "integer", "minimum": 0}},
            },
            "traffic": {
                "type": "object", "required": ["text"], "additionalProperties": False,
                "description": "the requests the plan's speeds assume (placer.simulate.arguments.Traffic.record): "
                               "prompt (isl) and output (osl) tokens, a number or a distribution's text, and the "
                               "prefix-cache hit (tokens or a share such as 86%)",
                "properties": {"isl": {"type": ["integer", "string"]}, "osl": {"type": ["integer", "string"]},
                               "cached_prompt": {"type": ["integer", "string"]}, "text": {"type": "string"}},
            },
            "require": {"type": "array", "items": {"enum": list(REQUIREMENTS)}, "uniqueItems": True,
                        "description": "constraints the placement was solved under (placer.problem.instance.REQUIREMENTS)"},
            "serving": _serving_schema(),
            "sessions": sessions_schema(),
            "speed_target": {"type": "object",
                             "description": "the speed-floor search as `placer solve --json` prints it beside the "
                                            "mapping (read by no command)"},
            "pins": {
                "type": "array",
                "items": {
                    "type": "object", "required": ["layers", "device"], "additionalProperties": False,
                    "properties": {"layers": {"type": "array", "minItems": 1, "items": name},
                                   "device": {"type": ["string", "null"]}},
                },
            },
        },
        # from version 3 the summary states every level
        "if": {"properties": {"schema_version": {"const": 3}}, "required": ["schema_version"]},
        "then": {"properties": {"summary": {"required": ["levels"]}}},
    }


def _parallel_schema(count: dict) -> dict:
    """The plan's degrees, reserve override and attention data parallelism."""
    return {
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
            "redundant_experts": {"type": "integer", "minimum": 0, "maximum": 100000,
                                  "description": "redundant experts per MoE layer (--redundant-experts): E + N "
                                                 "physical experts spread whole, (E + N) / tp on every rank"},
            "attention_dp": {"type": "boolean",
                             "description": "attention data parallelism: each stage's tp ranks split "
                                            "its live requests (ceil(c / tp) each, attention weights "
                                            "whole on every rank), experts spread whole (ep = tp)"},
        },
    }


def _spec_record(name: dict, sha: dict, **properties) -> dict:
    """A spec's record (the model's, the fleet's): its name, spec hash and source, and ``properties``."""
    return {
        "type": "object", "required": ["name", "sha256"], "additionalProperties": False,
        "properties": {"name": name, "sha256": sha,
                       "source": {"type": "string", "description": "catalog name or spec path"}, **properties},
    }


def _model_schema(name: dict, sha: dict) -> dict:
    """The model record: name, spec hash and source, granularity, how it was loaded."""
    return _spec_record(
        name, sha,
        granularity={"type": "string", "pattern": r"^(layer|block|shards:[0-9]+)$"},
        expert_groups={"type": "integer", "minimum": 1},
        dropped={"type": "array", "items": {"enum": ["vision_tower"]}, "uniqueItems": True,
                 "description": "nodes of the spec left out of the plan (vision_tower: --text-only); every "
                                "command reloads the model without them"},
        mtp={"type": "boolean", "description": "the spec's multi-token-prediction layers are placed (--mtp)"},
        draft_embedding={"type": "boolean",
                         "description": "the drafter's own embedding copy (mtp.embed_tokens) is placed"})


def _hardware_schema(name: dict, sha: dict) -> dict:
    """The fleet record: name, spec hash and source, racks, power boundary."""
    return _spec_record(name, sha, racks={"type": "integer", "minimum": 1, "maximum": 100000},
                        power_boundary={"enum": list(POWER_BOUNDARIES)},
                        pue={"type": "number", "minimum": 1, "maximum": 5})


def _workload_schema(count: dict, bits: dict) -> dict:
    """The workload the stages hold (the limits of :class:`placer.specs.workload.Workload`)."""
    return {
        "type": "object", "required": list(_WORKLOAD_REQUIRED), "additionalProperties": False,
        "properties": {
            # the same limits as placer.specs.workload.Workload, so the schema check names the file
            "context_tokens": {"type": "integer", "minimum": 1, "maximum": 2**40},
            "concurrency": {"type": "integer", "minimum": 0, "maximum": 10**9},
            "weight_bits": bits, "kv_bits": bits, "state_bits": bits, "conv_state_bits": bits,
            "activation_bits": bits, "weight_scale_bits": bits,
            "micro_batch": {"type": "integer", "minimum": 1, "maximum": 10**6},
            "weight_group_size": count,
            "weights_as_stored": {"type": "boolean"},
        },
    }


def _speculative_schema(name: dict, sha: dict, opt_number: dict) -> dict:
    return {
        "type": "object", "required": ["method", "tokens"], "additionalProperties": False,
        "description": "speculative decoding the plan is made for (placer.specs.speculative.Speculation)",
        "properties": {
            "method": {"enum": ["mtp", "eagle3", "draft_model"]},
            "tokens": {"type": "integer", "minimum": 1, "maximum": 64},
            "accept": opt_number,
            "accept_source": {"type": "string"},
            "draft": {"type": "object", "required": ["name", "sha256"], "additionalProperties": False,
                      "properties": {"name": name, "sha256": sha, "source": {"type": ["string", "null"]}}},
        },
    }


def _level_schema() -> dict:
    number = {"type": ["number", "null"]}
    return {
        "type": "object", "required": ["name", "value", "unit", "bound", "proven"], "additionalProperties": False,
        "properties": {
            "name": {"enum": list(LEVEL_UNITS)},
            "value": number,
            "unit": {"enum": sorted(set(LEVEL_UNITS.values()))},
            "bound": {**number, "description": "valid for the exact problem: a lower bound (an upper bound for "
                                               "concurrency); null: none known"},
            "proven": {"type": "boolean", "description": "value proven optimal in exact bytes and latencies"},
            "cap": {"type": "integer", "minimum": 0,
                    "description": "the level's search stopped at this value (the workload's limit)"},
            "note": {"type": "string", "description": "why the level stands unproven without a search of its own, "
                                                      "or how it was proven without one"},
        },
    }


def _serving_schema() -> dict:
    return {
        "type": "object", "additionalProperties": False,
        "required": ["replicas", "live_per_replica", "planned_live_requests", "min_user_tokens_per_s"],
        "description": "a plan made for a speed floor: this many copies of the placement on disjoint devices, "
                       "each serving live_per_replica requests (the workload's concurrency)",
        "properties": {
            "replicas": {"type": "integer", "minimum": 1},
            "live_per_replica": {"type": "integer", "minimum": 1, "maximum": 10**9},
            "planned_live_requests": {"type": "integer", "minimum": 1},
            "min_user_tokens_per_s": {"type": "number", "exclusiveMinimum": 0},
            "per_user_tokens_per_s": {"type": "number", "minimum": 0,
                                      "description": "simulated at live_per_replica requests"},
            "output_tokens": {"type": "integer", "minimum": 1, "description": "tokens per request in that simulation"},
        },
    }


def _stage_schema(count: dict, concurrency: dict, name: dict) -> dict:
    """One stage of a mapping: its device (or group), nodes, exact bytes per device and ceiling."""
    return {
        "type": "object", "additionalProperties": False,
        "required": ["index", "device", "rack", "layers", "bytes", "max_concurrency",
                     "next_hop_latency_us"],
        "properties": {
            "index": count, "device": name, "rack": count,
            "layers": {"type": "array", "items": name},
            "group": {
                "type": "object", "required": ["devices", "tp", "ep"], "additionalProperties": False,
                "description": "the devices that run the stage (of one node, or of whole nodes when "
                               "experts are spread); bytes are per device",
                "properties": {"devices": {"type": "array", "minItems": 1, "items": name},
                               "tp": {"type": "integer", "minimum": 1},
                               "ep": {"type": "integer", "minimum": 1},
                               "racks": {"type": "array", "minItems": 2, "items": {"type": "integer"},
                                         "description": "the nodes (racks) a group spanning several lies "
                                                        "in, in order (an expert-parallel group of whole "
                                                        "nodes)"}},
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
                }


def _summary_schema(count: dict, opt_count: dict, opt_number: dict, concurrency: dict, name: dict) -> dict:
    """The mapping's summary: devices, hops, latency, ceiling, bound, method, status, proof and levels."""
    return {
        "type": "object", "additionalProperties": False,
        "required": ["devices_used", "hops", "hop_latency_us", "concurrency_ceiling",
                     "lower_bound_devices", "method", "status", "proven_optimal", "objective",
                     "bound", "solve_seconds"],
        "properties": {
            "devices_used": count, "hops": count,
            "hop_latency_us": {"type": "number", "minimum": 0,
                               "description": "hops between stages, plus group_latency_us when stated"},
            "group_latency_us": {"type": "number", "minimum": 0,
                                 "description": "link latency of the groups' collectives (all-reduces, "
                                                "all-to-alls; a group spanning nodes, its all-to-alls' time), "
                                                "part of hop_latency_us"},
            "concurrency_ceiling": concurrency,
            "lower_bound_devices": opt_count,
            "method": name, "status": {"enum": list(_STATUSES)},
            "proven_optimal": {"type": "boolean"},
            "objective": opt_number, "bound": opt_number, "gap": opt_number,
            "solve_seconds": {"type": "number", "minimum": 0},
            "levels": {"type": "array", "items": _level_schema(),
                       "description": "every objective level in the order solved, exact (required from "
                                      "schema_version 3)"},
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


def _check_pooled(doc: dict, source: str) -> dict:
    """A two-pool mapping (:mod:`placer.mapping.pools`): its own fields, then each pool as a stage mapping."""
    from placer.mapping.pools import POOLED_VERSION, POOLS, pooled_schema_error

    error = pooled_schema_error(doc)
    if error is not None:
        raise InvalidSpec(source, error[0], error[1])
    for pool in POOLS:
        sub = doc["pools"][pool]
        if sub.get("schema_version") == POOLED_VERSION:
            raise InvalidSpec(source, f"/pools/{pool}/schema_version", "a pool is a one-pool stage mapping")
        try:
            check_mapping(sub, source)
        except InvalidSpec as exc:
            raise InvalidSpec(source, f"/pools/{pool}{exc.field}", exc.message) from None
    return doc


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
                          f"this placer reads {', '.join(map(str, READS_VERSIONS[:-1]))} and {READS_VERSIONS[-1]})")
    if version == 4:
        return _check_pooled(doc, source)
    if version == 5:
        from placer.mapping.fleet_mapping import check_fleet

        return check_fleet(doc, source, check_mapping)
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(doc))
    if error is None:
        serving = doc.get("serving")
        if serving is not None and serving["live_per_replica"] != doc["workload"]["concurrency"]:
            raise InvalidSpec(source, "/serving/live_per_replica",
                              f"{serving['live_per_replica']} live requests per replica, but the stages are counted "
                              f"for /workload/concurrency {doc['workload']['concurrency']}: they must be equal")
        return doc
    path = list(error.absolute_path)
    message = error.message
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        if missing:
            path.append(missing[0])
            message = "required field is missing"
    elif error.validator == "additionalProperties":
        known = error.schema.get("properties", {})
        extra = sorted(set(error.instance) - set(known))
        if extra:
            path.append(extra[0])
            message = "unknown field"
            from difflib import get_close_matches

            near = get_close_matches(extra[0], [k for k in known if k not in error.instance], n=1)
            if near:
                message += f" (did you mean {near[0]!r}?)"
    raise InvalidSpec(source, _pointer(path) or "/", message)


