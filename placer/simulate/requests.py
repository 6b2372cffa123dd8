"""What the simulation (:mod:`placer.simulate.des`) tracks of each request, the lengths it draws
for each (:class:`Shapes`), and the room left for requests on the devices of a route: each
device's KV cache and state reserve."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from placer.problem import memory
from placer.problem.instance import Instance
from placer.simulate.contexts import ContextDist
from placer.simulate.traces import Trace

__all__ = ["Request", "Reserve", "Shapes"]


@dataclass(frozen=True)
class Shapes:
    """The lengths of every request a run issues: from a ``trace`` (request ``i`` is row ``i``,
    round robin), or a ``prompt`` and an ``output`` distribution, or (the older form, ``prompt``
    None) a ``total`` context of which the last ``output`` tokens are generated; of each prompt,
    ``cached`` tokens (or the share ``cached_share``) are a prefix-cache hit, at least one token
    always computed. ``reserved``: the context the placement reserves per request."""

    output: ContextDist
    reserved: int
    prompt: ContextDist | None = None
    total: ContextDist | None = None
    cached: int = 0
    cached_share: float | None = None
    trace: Trace | None = None

    def draw(self, rng: np.random.Generator, i: int) -> tuple[int, int, int]:
        """Request ``i``'s (prompt, output, cached prompt) tokens."""
        if self.trace is not None:
            row = self.trace.rows[i % len(self.trace.rows)]
            prompt, out, cached = max(1, row.input_tokens), max(1, row.output_tokens), row.cached_tokens
        elif self.prompt is None:
            c = max(2, self.total.sample(rng))
            out = min(int(self.output.values[0]), c - 1)
            prompt, cached = c - out, self.cached
        else:
            prompt, out = max(1, self.prompt.sample(rng)), max(1, self.output.sample(rng))
            cached = self.cached
        if self.cached_share is not None:
            cached = int(self.cached_share * prompt)
        return prompt, out, min(cached, prompt - 1)

    @property
    def fixed_context(self) -> int | None:
        """Every request's total tokens when they are all alike, else None."""
        if self.trace is not None:
            return None
        if self.prompt is None:
            return int(self.total.values[0]) if self.total.kind == "fixed" else None
        if self.prompt.kind == "fixed" and self.output.kind == "fixed":
            return int(self.prompt.values[0] + self.output.values[0])
        return None

    @property
    def mean_context(self) -> float:
        if self.trace is not None:
            return float(np.mean([r.input_tokens + r.output_tokens for r in self.trace.rows]))
        if self.prompt is None:
            return self.total.mean
        return self.prompt.mean + self.output.mean

    @property
    def mean_output(self) -> float:
        if self.trace is not None:
            return float(np.mean([r.output_tokens for r in self.trace.rows]))
        return self.output.mean if self.prompt is not None else min(self.output.values[0], self.total.mean - 1)

    @property
    def sizing_context(self) -> int | None:
        """The context that sizes the live cap: the older form's fixed context (None for a
        distribution, as before); otherwise the reserved context, or the longest request when
        that is longer and bounded."""
        if self.prompt is None and self.trace is None:
            return self.fixed_context
        longest = self.trace.longest if self.trace is not None else self.prompt.max + self.output.max
        return self.reserved if longest <= self.reserved or math.isinf(longest) else int(longest)

    def describe(self) -> str:
        """The lengths for a result's ``context`` field: ``fixed:9216``, ``prompt uniform:...``."""
        if self.trace is not None:
            return self.trace.describe()
        if self.prompt is None:
            return self.total.describe()
        if self.fixed_context is not None:
            return f"fixed:{self.fixed_context}"
        return f"prompt {self.prompt.describe()}, output {self.output.describe()}"


@dataclass
class Request:
    id: int
    arrival: float
    context: int                  # total tokens: prompt + output
    output: int
    prompt: int
    user: int = 0
    prefilled: int = 0            # prompt tokens in the KV cache
    generated: int = 0
    busy: bool = False            # a chunk of its prompt is in a step on its way through the route
    credit: float = 0.0           # speculative decoding: accepted tokens owed beyond those emitted
    first: float | None = None
    last: float | None = None
    times: list = field(default_factory=list)

    @property
    def kv_len(self) -> int:
        return self.prompt + self.generated

    @property
    def prefilling(self) -> bool:
        return self.prefilled < self.prompt

    @property
    def done(self) -> bool:
        return self.generated >= self.output


class Reserve:
    """Per-device KV/state room and what one request of a given context needs there."""

    def __init__(self, instance: Instance, assignment: Sequence[int]):
        wl = instance.workload
        self.devices = sorted(set(assignment))
        self.free = {d: instance.capacity_bytes[d] for d in self.devices}
        self.coef: dict[int, dict] = {d: {} for d in self.devices}   # window -> KV bytes per token
        self.state = {d: 0 for d in self.devices}
        for i, d in enumerate(assignment):
            layer = instance.nodes[i]
            self.free[d] -= instance.weight_bytes[i]
            kv = memory.kv_bytes_per_token(layer, wl)
            if kv:
                self.coef[d][layer.kv_window] = self.coef[d].get(layer.kv_window, 0) + kv
            self.state[d] += memory.state_bytes_per_request(layer, wl)

    def need(self, d: int, context: int) -> int:
        kv = sum(b * (context if w is None else min(context, w)) for w, b in self.coef[d].items())
        return kv + self.state[d]

    def fits(self, context: int) -> bool:
        return all(self.need(d, context) <= self.free[d] for d in self.devices)

    def take(self, context: int, sign: int = 1) -> None:
        for d in self.devices:
            self.free[d] -= sign * self.need(d, context)

    def device_ceiling(self, d: int, context: int) -> int | None:
        """Requests of ``context`` tokens device ``d``'s reserve holds (None: it keeps no KV or state)."""
        n = self.need(d, context)
        return max(self.free[d] // n, 0) if n > 0 else None

    def ceiling(self, context: int) -> int | None:
        caps = [self.free[d] // n for d in self.devices if (n := self.need(d, context)) > 0]
        return max(min(caps), 0) if caps else None
