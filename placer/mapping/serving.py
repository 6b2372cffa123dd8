"""How a plan is served: the mapping's ``serving`` record of a plan made for a speed floor.

A speed floor (``placer solve --min-user-tps X``) picks a placement and serves it as ``k``
identical replicas on disjoint devices, each at the live requests that keep every user at or
above the floor. The mapping records that one replica at its load (``workload.concurrency``),
and ``serving`` says the rest, so exports launch it at that load and the simulator runs it there.
"""

from __future__ import annotations

from placer.mapping.document import build_mapping

__all__ = ["serving_doc", "speed_floor_mapping", "serving_of"]


def serving_doc(*, replicas: int, live_per_replica: int, min_user_tokens_per_s: float,
                planned_live_requests: int, per_user_tokens_per_s: float | None = None,
                output_tokens: int | None = None) -> dict:
    """The ``serving`` record: ``replicas`` copies of the mapped placement on disjoint devices, each
    serving ``live_per_replica`` live requests (the mapping's ``workload.concurrency``) at no less
    than ``min_user_tokens_per_s`` tokens/s per user (``per_user_tokens_per_s``: the simulated
    figure at that load, with ``output_tokens`` per request), ``planned_live_requests`` in all."""
    if replicas < 1 or live_per_replica < 1:
        raise ValueError(f"serving needs at least one replica and one live request ({replicas}, {live_per_replica})")
    doc = dict(replicas=int(replicas), live_per_replica=int(live_per_replica),
               planned_live_requests=int(planned_live_requests), min_user_tokens_per_s=float(min_user_tokens_per_s))
    if per_user_tokens_per_s is not None:
        doc["per_user_tokens_per_s"] = float(per_user_tokens_per_s)
    if output_tokens is not None:
        doc["output_tokens"] = int(output_tokens)
    return doc


def speed_floor_mapping(plan) -> dict | None:
    """The mapping of a speed-floor plan's chosen replica (a :class:`placer.planning.speed.SpeedPlan`),
    None when no candidate met the floor.

    The placement is recorded at the load it serves: ``workload.concurrency`` is the live requests
    per replica (the stages' KV reserve and state counted for them, so validation checks that every
    stage holds them), and ``serving`` (:func:`serving_doc`) carries the floor, the load, the
    replica count and the simulated per-user speed. The solver's claims still hold at that load:
    the placement was the best for a smaller target and also holds the larger one, and fewer
    devices, a lower latency or a higher ceiling never become possible by asking for more.
    """
    chosen = plan.chosen
    if chosen is None:
        return None
    from placer.problem.reductions.tensor_parallel import per_device

    shape = chosen.shape
    inst = shape.instance.with_concurrency(chosen.load)
    doc = build_mapping(inst, per_device(shape.result, inst))
    doc["serving"] = serving_doc(replicas=chosen.replicas, live_per_replica=chosen.load,
                                 min_user_tokens_per_s=plan.floor_tokens_per_s,
                                 planned_live_requests=plan.concurrency,
                                 per_user_tokens_per_s=chosen.sim.per_user_tokens_per_s,
                                 output_tokens=getattr(chosen.sim, "output_tokens", None))
    return doc


def serving_of(doc: dict) -> dict | None:
    """A mapping's ``serving`` record (:func:`serving_doc`), None for a plan made without a speed floor."""
    serving = doc.get("serving")
    return serving if isinstance(serving, dict) else None
