"""Device prices in hardware specs: a ``price:`` block per device type (per device-hour or per
system-hour, with its source and date; ``assumption`` marks a figure no one published)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field, model_validator

from placer.specs.spec_io import StrictSpec, reject_bool

__all__ = ["PriceSpec", "price_of"]


class PriceSpec(StrictSpec):
    """What a device costs to run, in US dollars: per device-hour or per system-hour (the system of
    ``devices_per_system`` devices), with its ``source`` and ``date``; ``assumption``: no published
    price, a derived or assumed figure (the source says how)."""
    device_hour: Annotated[float, BeforeValidator(reject_bool), Field(gt=0, allow_inf_nan=False)] | None = None
    system_hour: Annotated[float, BeforeValidator(reject_bool), Field(gt=0, allow_inf_nan=False)] | None = None
    source: str
    date: str
    assumption: bool = False

    @model_validator(mode="after")
    def _one_rate(self):
        if (self.device_hour is None) == (self.system_hour is None):
            raise ValueError("give device_hour or system_hour (US dollars per hour), one of them")
        return self


def price_of(p: PriceSpec | None, devices_per_system: int) -> tuple[float | None, str | None]:
    """(US dollars per device-hour, the words that say where it comes from) of a price block."""
    if p is None:
        return None, None
    n = devices_per_system
    price = p.device_hour if p.device_hour is not None else p.system_hour / n
    per = "device-hour" if p.device_hour is not None else f"system-hour of {n} device{'s' if n != 1 else ''}"
    rate = p.device_hour if p.device_hour is not None else p.system_hour
    return price, f"${rate:g} per {per}: {p.source}, {p.date}" + (" (assumption)" if p.assumption else "")
