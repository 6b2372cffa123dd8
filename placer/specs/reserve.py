"""Memory the runtime keeps for itself on every device, held back before placement.

A reserve is a fraction of the device's memory plus a number of bytes: ``0.1``, ``10%``,
``8 GB`` or ``0.1 + 3.5 GB``. It is exact: ``ceil(fraction x memory) + bytes``, the fraction read
as a decimal (``Fraction("0.1")``), never a float.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from placer.specs.units import format_bytes, parse_bytes

__all__ = ["Reserve", "parse_reserve", "NO_RESERVE"]


@dataclass(frozen=True)
class Reserve:
    """``fraction`` of each device's memory plus ``bytes``, both held back on every device."""

    fraction: Fraction = Fraction(0)
    bytes: int = 0

    def __post_init__(self):
        if not 0 <= self.fraction < 1:
            raise ValueError(f"a reserve fraction is at least 0 and below 1, got {self.fraction}")
        if self.bytes < 0:
            raise ValueError("a reserve cannot be negative")

    def of(self, memory_bytes: int) -> int:
        """Bytes held back on a device of ``memory_bytes``."""
        f = self.fraction
        return -(-f.numerator * memory_bytes // f.denominator) + self.bytes

    @property
    def is_zero(self) -> bool:
        return self.fraction == 0 and self.bytes == 0

    def describe(self) -> str:
        parts = []
        if self.fraction:
            parts.append(f"{float(self.fraction):.4g} of memory")
        if self.bytes or not parts:
            parts.append(format_bytes(self.bytes))
        return " + ".join(parts)

    def to_dict(self) -> dict:
        """``{"fraction": "0.1", "bytes": 3500000000}``: the fraction as exact decimal text."""
        return {"fraction": _decimal(self.fraction), "bytes": self.bytes}

    @classmethod
    def from_dict(cls, d: dict) -> Reserve:
        return cls(Fraction(str(d.get("fraction", "0"))), int(d.get("bytes", 0)))


NO_RESERVE = Reserve()


def _decimal(f: Fraction) -> str:
    if f == 0:
        return "0"
    # fractions parsed from decimals have a denominator of 2^a 5^b: exact in a few digits
    for digits in range(1, 19):
        scaled = f * 10**digits
        if scaled.denominator == 1:
            text = str(scaled.numerator).rjust(digits + 1, "0")
            return f"{text[:-digits]}.{text[-digits:]}"
    return f"{f.numerator}/{f.denominator}"


def _fraction(text: str) -> Fraction:
    text = text.strip()
    if text.endswith("%"):
        return Fraction(text[:-1].strip()) / 100
    return Fraction(text)


def parse_reserve(value) -> Reserve:
    """A reserve from a spec or flag value: a fraction (``0.1``, ``10%``), bytes (``8 GB``), or both
    joined by ``+`` (``0.1 + 3.5 GB``). Raises ``ValueError`` on anything else."""
    if isinstance(value, Reserve):
        return value
    if isinstance(value, bool):
        raise ValueError("a reserve is a fraction, bytes or both, not a boolean")
    if isinstance(value, (int, float)):
        if isinstance(value, int) and value >= 1:
            return Reserve(bytes=value)
        return Reserve(fraction=Fraction(str(value)))
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"cannot read a reserve from {value!r}")
    fraction, nbytes = Fraction(0), 0
    for part in value.split("+"):
        part = part.strip()
        if re.fullmatch(r"[0-9]*\.?[0-9]+\s*%?", part) and (part.endswith("%") or float(part) < 1):
            fraction += _fraction(part)
        else:
            try:
                nbytes += parse_bytes(part)
            except ValueError as exc:
                raise ValueError(f"cannot read reserve part {part!r}: {exc}") from None
    return Reserve(fraction, nbytes)
