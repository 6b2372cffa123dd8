"""Total context tokens per request in a simulation: fixed, or drawn from a distribution."""

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

    def describe(self) -> str:
        if self.kind == "choice":
            return "choice:" + ",".join(str(int(v)) for v in self.values)
        if self.kind == "lognormal":
            return f"lognormal:{int(self.values[0])}:{self.values[1]:g}"
        return f"{self.kind}:" + ":".join(str(int(v)) for v in self.values)


def parse_context_dist(text: str) -> ContextDist:
    """``256k`` / ``fixed:256k``, ``uniform:64k:256k``, ``lognormal:32k:1.0``, ``choice:8k,32k,256k``."""
    where = (ARGUMENT, "context_dist")
    text = str(text).strip()
    try:
        if ":" not in text:
            return ContextDist("fixed", (float(parse_tokens(text)),))
        kind, rest = text.split(":", 1)
        if kind == "fixed":
            return ContextDist("fixed", (float(parse_tokens(rest)),))
        if kind == "uniform":
            if rest.count(":") != 1:
                raise ValueError("uniform needs LO:HI, e.g. uniform:64k:256k")
            lo, hi = (parse_tokens(x) for x in rest.split(":"))
            if lo > hi:
                raise ValueError("uniform needs lo <= hi")
            return ContextDist("uniform", (float(lo), float(hi)))
        if kind == "lognormal":
            if rest.count(":") != 1:
                raise ValueError("lognormal needs MEDIAN:SIGMA, e.g. lognormal:32k:1.0")
            median, sigma = rest.split(":")
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
