"""What a disaggregated plan costs in US dollars (``placer solve --disagg --objective cost``).

Every replica of both pools is priced by its devices (every member of each device group) from the
hardware specs' ``price:`` blocks (:class:`~placer.specs.prices.PriceSpec`, the prices CP-SAT's
``cost`` level reads: :func:`placer.algorithms.cpsat.cost.price_of`): a plan of ``x`` prefill and
``y`` decode replicas costs ``x`` prefill replicas' price + ``y`` decode replicas' per hour, the
pools on one fleet or on two. Its dollars per million output tokens are that price over the
tokens the plan decodes in an hour: its request rate x the output tokens per request x 3600
(:func:`placer.planning.price.usd_per_million_tokens`). ``--objective cost`` ranks the candidate
pairs by their price first (then devices, TTFT, the decode shape holding the most).
"""

from __future__ import annotations

import math

from placer.specs.errors import InvalidSpec

__all__ = ["replica_price", "plan_price", "plan_usd_per_million_tokens", "price_sources", "candidate_key"]


def replica_price(solved) -> float | None:
    """US dollars per hour of one replica's devices; None when a type it uses has no price."""
    from placer.algorithms.cpsat.cost import price_of

    try:
        return price_of(solved.instance, solved.per_group.assignment)
    except InvalidSpec:
        return None


def _decode(plan):
    return plan.decode_solved or plan.chosen.decode.solved


def plan_price(plan) -> float | None:
    """US dollars per hour of a :class:`~placer.planning.disagg.DisaggPlan`: x prefill replicas and
    y decode replicas (the decode replica as placed apart from the prefill one); None without a
    chosen pair or a price for every type."""
    c = plan.chosen
    if c is None:
        return None
    p, d = replica_price(c.prefill.solved), replica_price(_decode(plan))
    return None if p is None or d is None else c.x * p + c.y * d


def plan_usd_per_million_tokens(plan) -> float | None:
    """US dollars per million output tokens: :func:`plan_price` over the tokens decoded in an hour."""
    from placer.planning.price import usd_per_million_tokens

    c = plan.chosen
    return None if c is None else usd_per_million_tokens(plan_price(plan), c.rate * plan.decode_tokens)


def price_sources(plan) -> list[str]:
    """``type: source`` of each device type the plan's replicas use (where its price comes from)."""
    c = plan.chosen
    if c is None:
        return []
    types = {}
    for solved in (c.prefill.solved, _decode(plan)):
        inst = solved.instance
        for d in set(solved.per_group.assignment):
            t = inst.devices[d].type
            types[t.name] = t.price_source
    return [f"{name}: {src}" for name, src in sorted(types.items()) if src]


def candidate_key(objective: str, pre: list, dec: list):
    """How candidate pairs rank: fewest devices (then least power, shortest TTFT, the decode shape
    holding the most); ``mw``: least power; ``cost``: least US dollars per hour (every shape priced
    first: :class:`InvalidSpec`, field ``objective``, naming a device type without a price)."""
    if objective == "mw":
        return lambda c: (c.power_w if c.power_w is not None else math.inf, c.devices)
    if objective == "cost":
        from placer.algorithms.cpsat.cost import price_of

        for shape in (*pre, *dec):
            price_of(shape.solved.instance, shape.solved.per_group.assignment)   # refuses a type without a price
        return lambda c: (c.price_per_hour, c.devices, c.ttft_us, -c.decode.held)
    return lambda c: (c.devices, c.power_w or 0.0, c.ttft_us, -c.decode.held)
