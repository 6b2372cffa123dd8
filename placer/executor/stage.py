"""One pipeline stage: the nodes one device holds, their weights, caches and memory counters.

A :class:`StageWorker` is plain Python with no threads: the local backend wraps it in a thread
with an inbox queue, the Ray backend in an actor. It runs a micro-batch through every
consecutive node it owns, starting at ``batch.node``, and hands the batch back; a free-mode
route that comes back to this device later simply sends the batch here again.
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.executor.tiny import Batch, NodeRunner, TinySpec

__all__ = ["StageWorker", "StageStats"]


@dataclass(frozen=True)
class StageStats:
    """What one stage measured: bytes of its caches and states at their peak, and live requests."""

    device: str
    nodes: tuple[str, ...]
    weight_bytes: int
    peak_cache_bytes: int
    peak_live_requests: int
    batches: int
    node_visits: int
    final_cache_bytes: int = 0     # after the run: 0 when every finished request was freed

    def to_dict(self) -> dict:
        return dict(device=self.device, nodes=list(self.nodes), weight_bytes=self.weight_bytes,
                    peak_cache_bytes=self.peak_cache_bytes, peak_live_requests=self.peak_live_requests,
                    batches=self.batches, node_visits=self.node_visits, final_cache_bytes=self.final_cache_bytes)


class StageWorker:
    """The nodes of ``spec`` placed on ``device``; builds only their weights."""

    def __init__(self, spec: TinySpec, device: str):
        self.spec = spec
        self.device = device
        self.owner = tuple(n.device for n in spec.nodes)
        self.runners = {i: NodeRunner(spec, i) for i, n in enumerate(spec.nodes) if n.device == device}
        if not self.runners:
            raise ValueError(f"device {device} holds no node")
        self.live: set[int] = set()
        self.cache_bytes = 0
        self.peak_cache_bytes = 0
        self.peak_live = 0
        self.batches = 0
        self.node_visits = 0

    def process(self, batch: Batch) -> Batch:
        """Run ``batch`` through this stage's consecutive nodes from ``batch.node`` on."""
        if self.owner[batch.node] != self.device:
            raise ValueError(f"node {batch.node} is on {self.owner[batch.node]}, not {self.device}")
        self.batches += 1
        new = [r for r in batch.req_ids if r not in self.live]
        if new:
            # a request entering the stage reserves its caches and states in every node here, for
            # its whole context, as placer's accounting does (nodes visited later in a free-mode
            # route included)
            for runner in self.runners.values():
                if runner.owns_cache:
                    before = runner.cache_bytes()
                    for r in new:
                        runner.reserve(r)
                    self.cache_bytes += runner.cache_bytes() - before
            self.live.update(new)
            self.peak_cache_bytes = max(self.peak_cache_bytes, self.cache_bytes)
            self.peak_live = max(self.peak_live, len(self.live))
        n = len(self.owner)
        while batch.node < n and self.owner[batch.node] == self.device:
            self.runners[batch.node].run(batch)
            batch.node += 1
            self.node_visits += 1
        return batch

    def free(self, req_ids) -> None:
        """Release the caches and states of finished requests."""
        for runner in self.runners.values():
            if runner.owns_cache:
                before = runner.cache_bytes()
                runner.free(req_ids)
                self.cache_bytes -= before - runner.cache_bytes()
        self.live.difference_update(req_ids)

    def stats(self) -> StageStats:
        return StageStats(device=self.device, nodes=tuple(self.spec.nodes[i].name for i in sorted(self.runners)),
                          weight_bytes=sum(r.weight_bytes for r in self.runners.values()),
                          peak_cache_bytes=self.peak_cache_bytes, peak_live_requests=self.peak_live,
                          batches=self.batches, node_visits=self.node_visits,
                          final_cache_bytes=self.cache_bytes)
