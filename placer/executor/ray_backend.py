"""Ray backend: one actor per stage, micro-batches chained through actor calls.

Each actor builds its own :class:`~placer.executor.stage.StageWorker` from the picklable
:class:`~placer.executor.tiny.TinySpec` (weights are generated on the actor from the seed, never
shipped). For a micro-batch the driver submits one call per run of consecutive nodes on one
device, each taking the previous call's result (an ``ObjectRef``), so activations move from actor
to actor without returning to the driver; many micro-batches are chained at once. Calls from the
driver to one actor run in submission order, which keeps each stage's micro-batches and frees in
order. Ray is an optional dependency: ``pip install -e '.[ray]'``.
"""

from __future__ import annotations

from placer.executor.stage import StageStats, StageWorker
from placer.executor.tiny import Batch, TinySpec

__all__ = ["RayPipeline", "ray_available"]


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


class _StageActor:
    def __init__(self, spec: TinySpec, device: str):
        self.worker = StageWorker(spec, device)

    def process(self, batch: Batch) -> Batch:
        return self.worker.process(batch)

    def free(self, req_ids) -> None:
        self.worker.free(req_ids)

    def stats(self) -> StageStats:
        return self.worker.stats()


class RayPipeline:
    """One Ray actor per stage; ``address`` joins a running cluster, else a local Ray starts."""

    name = "ray"

    def __init__(self, spec: TinySpec, *, address: str | None = None, timeout_s: float = 600.0):
        try:
            import ray
        except ImportError as exc:
            from placer.specs.errors import ARGUMENT, InvalidSpec
            raise InvalidSpec(ARGUMENT, "backend",
                              "Ray is not installed (pip install -e '.[ray]')") from exc
        self.ray = ray
        self.timeout_s = timeout_s
        self._started = False
        if not ray.is_initialized():
            kwargs = dict(address=address) if address else dict(num_cpus=max(1, len(spec.devices)))
            ray.init(include_dashboard=False, ignore_reinit_error=True, log_to_driver=False, **kwargs)
            self._started = True
        actor = ray.remote(num_cpus=0)(_StageActor)
        self.spec = spec
        self.actors = {d: actor.remote(spec, d) for d in spec.devices}
        owner = [n.device for n in spec.nodes]
        # the devices a full pass visits, one entry per run of consecutive nodes
        self.segments = [d for i, d in enumerate(owner) if i == 0 or owner[i - 1] != d]
        self.pending: dict = {}
        self._closed = False
        self._stats: list[StageStats] | None = None

    def submit(self, batch: Batch) -> None:
        if batch.node != 0:
            raise ValueError("a micro-batch enters the Ray pipeline at its first node")
        ref = batch
        for d in self.segments:
            ref = self.actors[d].process.remote(ref)
        self.pending[ref] = batch.mb

    def next_done(self) -> Batch:
        ready, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=self.timeout_s)
        if not ready:
            raise TimeoutError(f"no micro-batch finished within {self.timeout_s} s")
        ref = ready[0]
        del self.pending[ref]
        return self.ray.get(ref)

    def free(self, req_ids) -> None:
        ids = list(req_ids)
        for a in self.actors.values():
            a.free.remote(ids)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stats = self.ray.get([self.actors[d].stats.remote() for d in self.spec.devices])
        for a in self.actors.values():
            self.ray.kill(a)
        if self._started:
            self.ray.shutdown()

    def stats(self) -> list[StageStats]:
        if self._stats is None:
            raise RuntimeError("close the pipeline before reading its statistics")
        return self._stats
