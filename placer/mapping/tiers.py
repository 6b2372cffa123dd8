"""A mapping's session record (``sessions``) and the validator's check of its two tiers' bytes.

``placer solve --sessions PRESET --ttft-target MS [--tier NAME]`` records what it chose
(:mod:`placer.planning.sessions_held`): the session traffic preset and the per-turn TTFT target,
the sessions' longest context, the on-chip KV reserve in sessions of that context
(``kv_reserve_sessions``: the resident ones' and the slots parked sessions' turns take), the
sessions kept resident and those parked in the tier between turns, the tier (``null``: none) and
the tier bytes reserved per device, the sessions held and whether that count is proven.

:func:`check_sessions` recomputes, with the validator's own per-rank rules (the stage bytes of
:class:`~placer.mapping.validate.Reading`, at the record's longest context; nothing from the
solver), that

* **on the chip** every stage's device holds its weights, the runtime reserve, the activation
  buffers and ``kv_reserve_sessions`` sessions of the longest context within its memory;
* **in the tier** the device's tier (the hardware spec's, :mod:`placer.specs.tiers`) has the
  recorded bytes per device, and the ``parked`` sessions' KV at the longest context fits in them;
* the sessions held are the resident and the parked ones, the resident within the KV reserve.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from placer.mapping import dp_ranks
from placer.mapping.violations import Violation
from placer.specs.tiers import TIER_NAMES, tier_of

if TYPE_CHECKING:
    from placer.mapping.validate import Reading

__all__ = ["sessions_schema", "check_sessions"]


def sessions_schema() -> dict:
    """JSON Schema of a mapping's optional ``sessions`` record (absent: no session plan)."""
    count = {"type": "integer", "minimum": 0, "maximum": 2**62}
    return {
        "type": "object", "additionalProperties": False,
        "required": ["preset", "ttft_target_ms", "longest_context", "tier", "kv_reserve_sessions", "resident",
                     "parked", "tier_bytes_per_device", "sessions_held", "proven"],
        "description": "the sessions the plan holds (placer solve --sessions): its KV reserve and tier",
        "properties": {
            "preset": {"type": "string", "minLength": 1, "description": "the session traffic preset"},
            "ttft_target_ms": {"type": "number", "exclusiveMinimum": 0},
            "longest_context": {"type": "integer", "minimum": 1, "maximum": 2**40},
            "tier": {"enum": [*TIER_NAMES, None], "description": "the tier idle sessions park in (null: none)"},
            "kv_reserve_sessions": {**count, "description": "the on-chip KV reserve, in sessions of the longest "
                                                            "context"},
            "resident": {**count, "description": "sessions whose KV stays on the chip"},
            "parked": {**count, "description": "sessions whose KV parks in the tier between turns"},
            "tier_bytes_per_device": {**count, "description": "tier bytes reserved on each device"},
            "sessions_held": count,
            "proven": {"type": "boolean", "description": "the count is proven the most (else a bound)"},
        },
    }


def check_sessions(r: Reading, read_at: Callable[[object], Reading]) -> Iterator[Violation]:
    """Both tiers' bytes of the mapping's ``sessions`` record (module docstring); nothing without one.
    ``read_at(workload)``: the mapping read as ``r`` is, at another workload."""
    rec = r.view.doc.get("sessions")
    if not rec:
        return

    slots, resident, parked = rec["kv_reserve_sessions"], rec["resident"], rec["parked"]
    if rec["sessions_held"] != resident + parked or resident > slots:
        yield Violation("sessions_mismatch", f"sessions: {rec['sessions_held']:,} held, {resident:,} resident and "
                                             f"{parked:,} parked with {slots:,} KV reserve slots (held must be "
                                             f"resident + parked, resident within the slots)")
    if parked and (slots <= resident or rec["tier"] is None):
        yield Violation("sessions_mismatch", f"sessions: {parked:,} parked need a tier and a KV reserve slot "
                                             f"for their turns ({slots:,} slots, {resident:,} resident)")
    if r.attention_dp:      # each rank holds its share of the sessions (placer.mapping.dp_ranks)
        slots, parked = dp_ranks.rank_requests(slots, r.tp), dp_ranks.rank_requests(parked, r.tp)
    at = read_at(replace(r.wl, context_tokens=rec["longest_context"]))
    tier_bytes = rec["tier_bytes_per_device"]
    for k, st in enumerate(r.stages):
        dev = r.by_id.get(st.device)
        if dev is None:
            continue                        # an unknown device is reported by its own check
        mine = at.nodes_of(st)
        per = sum(at.per_node[i][1] + at.per_node[i][2] for i in mine)
        weights = sum(at.per_node[i][0] for i in mine)
        used = weights + r.reserve_of(dev) + r.act + slots * per
        if used > dev.memory_bytes:
            yield Violation("over_capacity", f"stage {k} on {st.device}: weights {weights:,} B + KV reserve of "
                                             f"{slots:,} sessions of {rec['longest_context']:,} tokens "
                                             f"({slots * per:,} B) + runtime reserve and activations = {used:,} B "
                                             f"> memory {dev.memory_bytes:,} B")
        if rec["tier"] is None:
            continue
        tier = tier_of(dev.type, rec["tier"])
        if tier is None:
            yield Violation("tier_overflow", f"stage {k} on {st.device}: device type {dev.type.name!r} has no "
                                             f"{rec['tier']!r} tier in the hardware spec")
            continue
        if tier_bytes > tier.capacity_bytes:
            yield Violation("tier_overflow", f"stage {k} on {st.device}: {tier_bytes:,} B of the {tier.name} tier "
                                             f"reserved > its {tier.capacity_bytes:,} B per device")
        if parked * per > tier_bytes:
            yield Violation("tier_overflow", f"stage {k} on {st.device}: {parked:,} parked sessions of "
                                             f"{rec['longest_context']:,} tokens need {parked * per:,} B of the "
                                             f"{tier.name} tier > the {tier_bytes:,} B reserved")
