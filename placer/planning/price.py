"""Dollars per million tokens: the devices' price per hour (the hardware specs' ``price:`` blocks)
against the simulated tokens/s, at the same per-user speed as every other figure of a point.

``$/M tokens = price of the devices per hour / (their tokens/s x 3600) x 10^6``: the devices'
price of an hour over the tokens they produce in it. :func:`placement_price` prices the devices a
placement uses, each by its own type's price (a fleet of several types at different prices: each
device at its type's), so a point of a mixed fleet is priced by what it runs on;
:func:`fleet_price` is the one price of a fleet whose types share it (the line naming it).
"""

from __future__ import annotations

__all__ = ["fleet_price", "placement_price", "usd_per_million_tokens", "price_line"]


def fleet_price(fleet) -> tuple[float | None, str]:
    """(US dollars per device-hour, where it comes from) of ``fleet``; None with the reason when a
    type has no price or the types' prices differ."""
    types = list(fleet.device_types.values())
    prices = {t.price_per_hour for t in types}
    if None in prices:
        missing = ", ".join(t.name for t in types if t.price_per_hour is None)
        return None, f"no price: block for {missing}"
    if len(prices) > 1:
        return None, "device types of different prices"
    return prices.pop(), "; ".join(sorted({t.price_source for t in types}))


def placement_price(instance, assignment) -> tuple[float | None, str]:
    """(US dollars per hour of the devices ``assignment`` uses on ``instance``, where the prices come
    from): each device (a group: each of its members) at its own type's device-hour price; None
    with the reason when a type used has no price."""
    used = sorted(set(assignment))
    types = {instance.devices[d].type.name: instance.devices[d].type for d in used}
    missing = sorted(name for name, t in types.items() if t.price_per_hour is None)
    if missing:
        return None, f"no price: block for {', '.join(missing)}"
    total = sum(instance.devices[d].type.price_per_hour * len(instance.members(d)) for d in used)
    return total, "; ".join(f"{name}: {types[name].price_source}" for name in sorted(types))


def usd_per_million_tokens(price_per_hour: float | None, tokens_per_s: float | None) -> float | None:
    """US dollars per million tokens of devices costing ``price_per_hour`` that make ``tokens_per_s``
    (both of one device, or both of the same set of devices); None when either is missing."""
    if not price_per_hour or not tokens_per_s:
        return None
    return price_per_hour / (tokens_per_s * 3600.0) * 1e6


def price_line(fleets) -> str:
    """One line naming each fleet's price and its source (a mixed-price fleet: each point priced
    by the device types it uses; or why it has none)."""
    parts = []
    for f in fleets:
        price, source = fleet_price(f)
        if price is not None:
            parts.append(f"{f.name} ${price:.4g} per device-hour ({source})")
        elif source == "device types of different prices":
            parts.append(f"{f.name} each device at its type's price (" + "; ".join(
                f"{t.name} ${t.price_per_hour:.4g} per device-hour: {t.price_source}"
                for t in sorted(f.device_types.values(), key=lambda t: t.name)) + ")")
        else:
            parts.append(f"{f.name}: no $/M tokens ({source})")
    return "$/M tokens at " + "; ".join(parts)
