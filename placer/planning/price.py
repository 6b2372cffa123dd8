"""Dollars per million tokens: a fleet's device-hour price (the hardware specs' ``price:`` blocks)
against the simulated tokens/s, at the same per-user speed as every other figure of a point.

``$/M tokens = price per device-hour / (tokens/s per device x 3600) x 10^6``: the devices' price of
an hour over the tokens they produce in it (every replica counted, as tokens/s per device counts
them). Only a fleet whose device types share one price gets a figure: a point's row does not say
which types of a mixed fleet it used.
"""

from __future__ import annotations

__all__ = ["fleet_price", "usd_per_million_tokens", "price_line"]


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


def usd_per_million_tokens(price_per_device_hour: float | None, tokens_per_s_per_device: float | None) -> float | None:
    if not price_per_device_hour or not tokens_per_s_per_device:
        return None
    return price_per_device_hour / (tokens_per_s_per_device * 3600.0) * 1e6


def price_line(fleets) -> str:
    """One line naming each fleet's price and its source (or why it has none)."""
    parts = []
    for f in fleets:
        price, source = fleet_price(f)
        parts.append(f"{f.name} ${price:.4g} per device-hour ({source})" if price is not None else
                     f"{f.name}: no $/M tokens ({source})")
    return "$/M tokens at " + "; ".join(parts)
