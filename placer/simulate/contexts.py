"""Token counts per request in a simulation (a total context, a prompt or an output length):
fixed, or drawn from a distribution.

Forms (:func:`parse_context_dist`): ``8k`` or ``fixed:8k``; ``uniform:LO-HI`` (every integer from
LO to HI equally likely; ``uniform:LO:HI`` the older spelling); ``lognormal:MEDIAN,SIGMA``: the
natural log of the count is normal with mean ``ln(MEDIAN)`` and standard deviation ``SIGMA``, so
MEDIAN is the median count (``lognormal:MEDIAN:SIGMA`` the older spelling); ``choice:8k,32k``
(each value equally likely)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.units import parse_tokens

__all__ = ["ContextDist", "parse_context_dist"]


@dataclass(frozen=True)
class ContextDist:
    """Total context tokens per request: ``fixed``, ``uniform`` (lo, hi), ``lognormal`` (median,
    sigma) or ``choice`` (values, drawn uniformly)."""

    kind: str
    values: tuple[float, ...]

    def sample(self, rng: np.random.Generator) -> int:
        if self.kind == "fixed":
            return int(self.values[0])
        if self.kind == "uniform":
            return int(rng.integers(int(self.values[0]), int(self.values[1]) + 1))
        if self.kind == "lognormal":
            return max(1, int(round(self.values[0] * math.exp(self.values[1] * rng.standard_normal()))))
        return int(self.values[int(rng.integers(0, len(self.values)))])

    @property
    def mean(self) -> float:
        if self.kind == "fixed":
            return self.values[0]
        if self.kind == "uniform":
            return (self.values[0] + self.values[1]) / 2
        if self.kind == "lognormal":
            return self.values[0] * math.exp(self.values[1] ** 2 / 2)
        return sum(self.values) / len(self.values)

    @property
    def max(self) -> float:
        if self.kind in ("fixed", "uniform", "choice"):
            return max(self.values)
        return math.inf

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0-100) of the count: a lognormal's from its normal quantile, the
        others' largest value at q = 100 (the longest request)."""
        if self.kind != "lognormal":
            return self.max if q >= 100 else float(np.percentile(
                [self.values[0], self.values[-1]] if self.kind == "uniform" else list(self.values), q))
        from statistics import NormalDist

        return self.values[0] * math.exp(self.values[1] * NormalDist().inv_cdf(min(q, 99.999) / 100))

    def describe(self) -> str:
        if self.kind == "choice":
            return "choice:" + ",".join(str(int(v)) for v in self.values)
        if self.kind == "lognormal":
            return f"lognormal:{int(self.values[0])}:{self.values[1]:g}"
        return f"{self.kind}:" + ":".join(str(int(v)) for v in self.values)

    def words(self) -> str:
        """The distribution for a traffic line: ``8,192``, ``uniform 1,024-3,072``, ``lognormal
        (median 8,192, sigma 1)``, ``one of 8,192, 32,768``."""
        v = self.values
        if self.kind == "fixed":
            return f"{int(v[0]):,}"
        if self.kind == "uniform":
            return f"uniform {int(v[0]):,}-{int(v[1]):,}"
        if self.kind == "lognormal":
            return f"lognormal (median {int(v[0]):,}, sigma {v[1]:g})"
        return "one of " + ", ".join(f"{int(x):,}" for x in v)


def parse_context_dist(text: str, field: str = "context_dist") -> ContextDist:
    """``256k`` / ``fixed:256k``, ``uniform:64k-256k`` (or ``uniform:64k:256k``), ``lognormal:32k,1.0``
    (or ``lognormal:32k:1.0``), ``choice:8k,32k,256k``; ``field`` names the argument in errors."""
    where = (ARGUMENT, field)
    text = str(text).strip()
    try:
        if ":" not in text:
            return ContextDist("fixed", (float(parse_tokens(text)),))
        kind, rest = text.split(":", 1)
        if kind == "fixed":
            return ContextDist("fixed", (float(parse_tokens(rest)),))
        if kind == "uniform":
            parts = rest.split(":") if ":" in rest else rest.split("-")
            if len(parts) != 2:
                raise ValueError("uniform needs LO-HI (or LO:HI), e.g. uniform:64k-256k")
            lo, hi = (parse_tokens(x) for x in parts)
            if lo > hi:
                raise ValueError("uniform needs lo <= hi")
            return ContextDist("uniform", (float(lo), float(hi)))
        if kind == "lognormal":
            parts = rest.split(":") if ":" in rest else rest.split(",")
            if len(parts) != 2:
                raise ValueError("lognormal needs MEDIAN,SIGMA (or MEDIAN:SIGMA), e.g. lognormal:32k,1.0")
            median, sigma = parts
            s = float(sigma)
            if not 0 <= s <= 5:
                raise ValueError("lognormal sigma must be between 0 and 5")
            return ContextDist("lognormal", (float(parse_tokens(median)), s))
        if kind == "choice":
            vals = tuple(float(parse_tokens(x)) for x in re.split(r"[,\s]+", rest) if x)
            if not vals:
                raise ValueError("choice needs at least one value")
            return ContextDist("choice", vals)
    except (ValueError, TypeError) as exc:
        raise InvalidSpec(*where, f"cannot read {text!r}: {exc}") from None
    raise InvalidSpec(*where, f"unknown distribution {text!r} (fixed, uniform, lognormal or choice)")
