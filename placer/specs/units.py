"""Units on input: ``"44 GB"``, ``"256k"``, ``"21 PB/s"``, ``"25 kW"`` -> exact numbers.

Byte sizes and token counts are exact integers. Decimal prefixes (``kB MB GB TB PB``) are
powers of 1000, binary prefixes (``KiB MiB GiB TiB PiB``) powers of 1024. Token counts use
``k``/``M`` as powers of 1024 (``256k`` = 262,144 tokens, the convention serving stacks
use for context lengths); write ``256000`` for a decimal count.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

__all__ = [
    "plural",
    "parse_bytes",
    "parse_tokens",
    "parse_bandwidth",
    "parse_power",
    "parse_flops",
    "parse_int_list",
    "format_bytes",
    "format_tokens",
    "format_duration_us",
    "LEVEL_UNITS",
]

# the unit of each objective level's value and bound (placer.problem.placement.Level, the mapping's summary)
LEVEL_UNITS = {"moved": "B", "cost": "$/h", "devices": "devices", "concurrency": "live requests", "latency": "us", "bottleneck": "B"}

_BYTE_UNITS = {
    "": 1, "b": 1, "B": 1,
    "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15, "EB": 10**18,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50, "EiB": 2**60,
}
_SI = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_NUM = r"([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+)"


def _decimal(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise ValueError(f"not a number: {text!r}") from exc
    if not value.is_finite():
        raise ValueError(f"not a finite number: {text!r}")
    return value


def _split(value: object, what: str) -> tuple[Decimal, str]:
    if isinstance(value, bool):
        raise ValueError(f"expected a {what}, got a boolean")
    if isinstance(value, int):
        return Decimal(value), ""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"expected a finite {what}, got {value}")
        return Decimal(repr(value)), ""
    if not isinstance(value, str):
        raise ValueError(f"expected a {what} such as '44 GB', got {type(value).__name__}")
    m = re.fullmatch(r"\s*" + _NUM + r"\s*([A-Za-z/]*)\s*", value.replace("_", "").replace(",", ""))
    if not m:
        raise ValueError(f"cannot read {value!r} as a {what}")
    return _decimal(m.group(1)), m.group(2)


def _exact_int(value: Decimal, original: object, what: str) -> int:
    if value != value.to_integral_value():
        raise ValueError(f"{original!r} is not a whole number of {what}")
    return int(value)


def parse_bytes(value: object) -> int:
    """Exact byte count of ``value`` (an int, or a string like ``"44 GB"``, ``"44 GiB"``).

    >>> parse_bytes("44 GB"), parse_bytes("1 GiB"), parse_bytes(576)
    (44000000000, 1073741824, 576)
    """
    number, unit = _split(value, "size")
    if unit not in _BYTE_UNITS:
        raise ValueError(f"unknown size unit {unit!r} in {value!r} (use B, kB, MB, GB, TB, PB or KiB..PiB)")
    result = _exact_int(number * _BYTE_UNITS[unit], value, "bytes")
    if result < 0:
        raise ValueError(f"size must not be negative, got {value!r}")
    return result


def parse_tokens(value: object) -> int:
    """Exact token count: ``"256k"`` = 262,144, ``"1M"`` = 1,048,576, ``4096`` = 4096.

    >>> parse_tokens("256k"), parse_tokens("1M"), parse_tokens("32000")
    (262144, 1048576, 32000)
    """
    number, unit = _split(value, "token count")
    scale = {"": 1, "k": 2**10, "K": 2**10, "M": 2**20, "m": 2**20, "G": 2**30}.get(unit)
    if scale is None:
        raise ValueError(f"unknown token unit {unit!r} in {value!r} (use k or M, e.g. 256k)")
    result = _exact_int(number * scale, value, "tokens")
    if result <= 0:
        raise ValueError(f"token count must be positive, got {value!r}")
    return result


def _rate(value: object, what: str, base_units: dict[str, Decimal]) -> float:
    number, unit = _split(value, what)
    if unit == "" and isinstance(value, (int, float)):
        if number < 0:
            raise ValueError(f"{what} must not be negative, got {value!r}")
        return float(number)
    for base, factor in base_units.items():
        if unit.endswith(base):
            prefix = unit[: len(unit) - len(base)]
            if prefix in _SI:
                result = float(number * _SI[prefix] * factor)
                if result < 0:
                    raise ValueError(f"{what} must not be negative, got {value!r}")
                return result
    raise ValueError(f"unknown {what} unit in {value!r}")


def parse_bandwidth(value: object) -> float:
    """Bytes per second: ``"21 PB/s"`` -> 2.1e16, ``"2.4 Tb/s"`` (bits) -> 3e11."""
    return _rate(value, "bandwidth", {"B/s": Decimal(1), "b/s": Decimal("0.125"), "bps": Decimal("0.125")})


def parse_power(value: object) -> float:
    """Watts: ``"25 kW"`` -> 25000.0."""
    return _rate(value, "power", {"W": Decimal(1)})


def parse_flops(value: object) -> float:
    """FLOP per second: ``"250 PFLOPS"`` or ``"989 TFLOP/s"`` -> float."""
    return _rate(value, "compute rate", {"FLOPS": Decimal(1), "FLOP/s": Decimal(1), "flops": Decimal(1)})


def parse_int_list(text: str, parse=int) -> list[int]:
    """A list ``a,b,c`` or an inclusive range ``lo..hi`` (powers of two when ``lo..hi`` spans > 64 values).

    >>> parse_int_list("1,2,4"), parse_int_list("3..5")
    ([1, 2, 4], [3, 4, 5])
    """
    text = str(text).strip()
    if ".." in text:
        lo_s, hi_s = text.split("..", 1)
        lo, hi = parse(lo_s), parse(hi_s)
        if lo > hi:
            raise ValueError(f"empty range {text!r}")
        if hi - lo + 1 <= 64:
            return list(range(lo, hi + 1))
        values, v = [], max(lo, 1)
        while v < hi:
            values.append(v)
            v *= 2
        values.append(hi)
        return sorted(set(values))
    values = [parse(part) for part in text.split(",") if part.strip()]
    if not values:
        raise ValueError(f"empty list {text!r}")
    return values


def format_bytes(n: int | float) -> str:
    """Human-readable decimal size: 16129032258 -> '16.13 GB'."""
    n = float(n)
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def format_tokens(n: int) -> str:
    """262144 -> '256k'; 1048576 -> '1M'; other counts as integers."""
    if n % 2**20 == 0:
        return f"{n // 2**20}M"
    if n % 2**10 == 0:
        return f"{n // 2**10}k"
    return str(n)


def format_duration_us(us: float | None) -> str:
    """One rule for every duration placer prints, given in microseconds: under 1 ms in us, under 1 s
    in ms, else in s, each to four significant figures (``161 us``, ``129.7 ms``, ``4.213 s``)."""
    if us is None:
        return "-"
    us = float(f"{float(us):.4g}")     # round first, so 999.96 us reads 1 ms, not 1000 us
    if abs(us) < 1e3:
        return f"{us:.4g} us"
    if abs(us) < 1e6:
        return f"{us / 1e3:.4g} ms"
    return f"{us / 1e6:.4g} s"


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 replica``, ``2 replicas``, ``1,000 devices`` (``words``: the plural when it is not ``word + 's'``)."""
    return f"{n:,} {word if n == 1 else (words or word + 's')}"
