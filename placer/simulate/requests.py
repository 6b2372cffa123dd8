"""What the simulation (:mod:`placer.simulate.des`) tracks of each request, and the room left
for requests on the devices of a route: each device's KV cache and state reserve."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from placer.problem import memory
from placer.problem.instance import Instance

__all__ = ["Request", "Reserve"]


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
