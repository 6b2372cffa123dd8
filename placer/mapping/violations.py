"""The validator's findings: a :class:`Violation` is one broken rule, its ``kind`` a key of :data:`KINDS`."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["KINDS", "Violation"]

KINDS = {
    "spec_hash_mismatch": "the model or hardware file changed since the mapping was made (stale mapping)",
    "spec_name_mismatch": "the mapping names a different model or hardware than the spec loaded",
    "granularity_mismatch": "the granularity does not apply to the mode or cannot be built",
    "unknown_layer": "a stage names a node the model does not have",
    "layer_missing": "a node of the model is on no stage",
    "layer_duplicated": "a node is on more than one stage (or twice on one)",
    "empty_stage": "a stage holds no node",
    "unknown_device": "a stage names a device the fleet does not have",
    "unavailable_device": "a stage uses a device marked unavailable",
    "device_reused": "two stages use the same device",
    "over_capacity": "a device holds more bytes than its memory",
    "bytes_mismatch": "a stage states a byte figure that differs from the recomputation",
    "stage_mismatch": "a stage states the wrong rack or next-hop latency",
    "stage_order": "stages are not numbered 0..n-1 in pipeline (first-visit) order",
    "non_contiguous": "in contiguous or split mode a stage is not one run of the pipeline in stage order",
    "no_link": "consecutive stages have no direct link (contiguous, split) or no path at all (free)",
    "concurrency_overstated": "a stated max_concurrency or concurrency_ceiling exceeds what the stages hold",
    "concurrency_exceeded": "the workload's concurrency exceeds the concurrency ceiling of the stages",
    "route_mismatch": "the route does not list, node by node, the device of the stage holding it",
    "summary_mismatch": "the summary (devices, hops, hop latency with the groups' collectives, bound) does not "
                        "match the stages",
    "proof_mismatch": "proven_optimal is true while the status is not optimal",
    "pin_violated": "a recorded pin is not honoured",
    "group_mismatch": "a stage's group is not tp available devices of its node, or the model refuses the degree",
    "tier_overflow": "the parked sessions' KV passes the tier bytes reserved, or those pass the device's tier",
    "sessions_mismatch": "the sessions record's held, resident and parked counts do not add up",
    "requirement_violated": "a requirement the mapping was solved under (require) does not hold on its stages",
}


@dataclass(frozen=True)
class Violation:
    """One broken rule: ``kind`` is a key of :data:`KINDS`."""

    kind: str
    message: str

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"

