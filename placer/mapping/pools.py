"""Two-pool (disaggregated prefill/decode) mappings: the document, its schema and its check.

A two-pool mapping is ``schema_version`` 4 with ``kind: disaggregated``; its ``pools`` hold a
``prefill`` and a ``decode`` stage mapping, each a complete one-pool document (version 3, as
``placer solve`` writes it, readable and checkable on its own) for one replica of its pool, beside
the replica counts, the KV transfer between the pools and the targets the ratio was chosen for.
One-pool mappings stay version 3 (every reader of version 3 reads them unchanged).

:func:`placer.mapping.validate.validate_mapping` validates each pool's sub-document (violations
prefixed by the pool) and then (:func:`placer.mapping.validate_pools.pair_violations`) what
joins them, recomputed from the specs with :mod:`placer.problem.memory` only: the transfer bytes, the
transfer time over the stated link, the workloads each pool was placed for, the device total and,
on one fleet, that the pools' replicas fit it side by side.
"""

from __future__ import annotations

__all__ = ["POOLED_VERSION", "POOLS", "pooled_schema", "is_pooled", "pooled_schema_error", "build_pooled_mapping"]

POOLED_VERSION = 4
POOLS = ("prefill", "decode")


def pooled_schema() -> dict:
    """JSON Schema (draft 2020-12) of a two-pool mapping; each pool is a stage mapping
    (:func:`placer.mapping.schema.mapping_schema`, checked on its own)."""
    num = {"type": "number", "minimum": 0}
    opt_num = {"type": ["number", "null"], "minimum": 0}
    count = {"type": "integer", "minimum": 1}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:placer:stage-mapping:4",
        "title": "placer two-pool mapping (disaggregated prefill and decode)",
        "type": "object",
        "required": ["schema_version", "kind", "model", "pools", "replicas", "transfer", "targets", "summary"],
        "additionalProperties": False,
        "properties": {
            "schema_version": {"const": POOLED_VERSION},
            "kind": {"const": "disaggregated"},
            "model": {"type": "object", "required": ["name", "sha256"]},
            "pools": {"type": "object", "required": list(POOLS), "additionalProperties": False,
                      "properties": {p: {"type": "object"} for p in POOLS}},
            "replicas": {"type": "object", "required": list(POOLS), "additionalProperties": False,
                         "properties": {p: count for p in POOLS}},
            "transfer": {
                "type": "object", "additionalProperties": False,
                "required": ["bytes", "prompt_tokens", "latency_us", "bandwidth_bytes_per_s", "time_us", "link"],
                "properties": {"bytes": {"type": "integer", "minimum": 0}, "prompt_tokens": count,
                               "latency_us": num, "bandwidth_bytes_per_s": {"type": "number", "exclusiveMinimum": 0},
                               "time_us": num, "link": {"type": "string"}},
            },
            "targets": {
                "type": "object", "additionalProperties": False,
                "required": ["rate", "concurrency", "max_ttft_ms", "tpot_ms", "prompt_tokens", "decode_tokens",
                             "max_num_batched_tokens"],
                "properties": {"rate": opt_num, "concurrency": {"type": ["integer", "null"], "minimum": 1},
                               "max_ttft_ms": num, "tpot_ms": num, "prompt_tokens": count, "decode_tokens": count,
                               "max_num_batched_tokens": count},
            },
            "summary": {
                "type": "object",
                "required": ["devices_used", "rate", "ttft_ms", "queue_ms", "prefill_ms", "transfer_ms", "tpot_ms",
                             "prefill_interval_ms", "prefill_in_flight", "decode_held", "decode_load",
                             "same_fleet", "proven_optimal"],
                "properties": {"devices_used": count, "rate": num, "ttft_ms": num, "queue_ms": num,
                               "prefill_ms": num, "transfer_ms": num, "tpot_ms": num, "prefill_interval_ms": num,
                               "prefill_in_flight": count, "decode_held": count, "decode_load": count,
                               "same_fleet": {"type": "boolean"}, "proven_optimal": {"type": "boolean"},
                               "simulated_prefill_ttft_p50_ms": opt_num},
            },
        },
    }


def is_pooled(doc) -> bool:
    return isinstance(doc, dict) and doc.get("schema_version") == POOLED_VERSION


def pooled_schema_error(doc: dict) -> tuple[str, str] | None:
    """``(JSON pointer, message)`` of the first way ``doc`` breaks :func:`pooled_schema`, or None
    (each pool's own stage-mapping check is :func:`placer.mapping.schema.check_mapping`'s)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    error = best_match(Draft202012Validator(pooled_schema()).iter_errors(doc))
    if error is None:
        return None
    return "/" + "/".join(str(p) for p in error.absolute_path), error.message


def build_pooled_mapping(plan) -> dict:
    """The two-pool document of a feasible :class:`~placer.planning.disagg.DisaggPlan`."""
    c = plan.chosen
    prefill = c.prefill.solved.mapping
    decode = plan.decode_solved.mapping
    ps = plan.prefill_sim
    proven = bool(c.prefill.solved.result.proven_optimal and plan.decode_solved.result.proven_optimal)
    return {
        "schema_version": POOLED_VERSION,
        "kind": "disaggregated",
        "model": dict(decode["model"]),
        "pools": {"prefill": prefill, "decode": decode},
        "replicas": {"prefill": c.x, "decode": c.y},
        "transfer": {"bytes": plan.transfer_bytes, "prompt_tokens": plan.prompt_tokens,
                     "latency_us": plan.link.latency_us, "bandwidth_bytes_per_s": plan.link.bandwidth,
                     "time_us": plan.link.time_us(plan.transfer_bytes), "link": plan.link.source},
        "targets": {"rate": plan.rate, "concurrency": plan.concurrency, "max_ttft_ms": plan.max_ttft_ms,
                    "tpot_ms": plan.tpot_ms, "prompt_tokens": plan.prompt_tokens,
                    "decode_tokens": plan.decode_tokens, "max_num_batched_tokens": plan.budget_tokens},
        "summary": {"devices_used": c.x * prefill["summary"]["devices_used"] + c.y * decode["summary"]["devices_used"],
                    "rate": c.rate, "ttft_ms": c.ttft_us / 1e3, "queue_ms": c.queue_us / 1e3,
                    "prefill_ms": c.prefill.prefill_us / 1e3, "transfer_ms": c.transfer_us / 1e3,
                    "tpot_ms": c.tpot_us / 1e3, "prefill_interval_ms": c.prefill.interval_us / 1e3,
                    "prefill_in_flight": c.prefill.in_flight, "decode_held": c.decode.held, "decode_load": c.load,
                    "same_fleet": plan.same_fleet, "proven_optimal": proven,
                    "simulated_prefill_ttft_p50_ms": None if ps is None or ps.ttft_p50_us is None
                    else ps.ttft_p50_us / 1e3},
    }
