"""Local backend: one thread per stage, joined by queues.

Each stage thread owns a :class:`~placer.executor.stage.StageWorker` and an inbox. A micro-batch
enters the inbox of the stage that owns its next node, is run through that stage's consecutive
nodes, and is put into the inbox of the next owner (a free-mode route may return to a stage it
visited before) or, after the last node, into the driver's queue. Many micro-batches are in the
pipeline at once, each in its own stage. Free messages travel through the same inboxes, so a
stage releases a request's caches only after every earlier message to it was handled.
"""

from __future__ import annotations

import queue
import threading

from placer.executor.stage import StageStats, StageWorker
from placer.executor.tiny import Batch, TinySpec

__all__ = ["LocalPipeline"]

_STOP = ("stop", None)


class LocalPipeline:
    """Threads and queues; ``submit`` a micro-batch, ``next_done`` blocks for a finished one."""

    name = "local"

    def __init__(self, spec: TinySpec, *, timeout_s: float = 600.0):
        self.spec = spec
        self.timeout_s = timeout_s
        self.owner = tuple(n.device for n in spec.nodes)
        self.workers = {d: StageWorker(spec, d) for d in spec.devices}
        self.inboxes: dict[str, queue.Queue] = {d: queue.Queue() for d in spec.devices}
        self.done: queue.Queue = queue.Queue()
        self.threads = [threading.Thread(target=self._loop, args=(d,), name=f"stage-{d}", daemon=True)
                        for d in spec.devices]
        for t in self.threads:
            t.start()
        self._closed = False

    def _loop(self, device: str) -> None:
        worker, inbox, n = self.workers[device], self.inboxes[device], len(self.owner)
        while True:
            kind, payload = inbox.get()
            if kind == "stop":
                return
            try:
                if kind == "free":
                    worker.free(payload)
                    continue
                batch = worker.process(payload)
                if batch.node >= n:
                    self.done.put(("batch", batch))
                else:
                    self.inboxes[self.owner[batch.node]].put(("batch", batch))
            except Exception as exc:  # hand the failure to the driver instead of hanging it
                self.done.put(("error", exc))

    def submit(self, batch: Batch) -> None:
        self.inboxes[self.owner[batch.node]].put(("batch", batch))

    def next_done(self) -> Batch:
        try:
            kind, payload = self.done.get(timeout=self.timeout_s)
        except queue.Empty:
            raise TimeoutError(f"no micro-batch finished within {self.timeout_s} s") from None
        if kind == "error":
            raise payload
        return payload

    def free(self, req_ids) -> None:
        ids = list(req_ids)
        for inbox in self.inboxes.values():
            inbox.put(("free", ids))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for inbox in self.inboxes.values():
            inbox.put(_STOP)
        for t in self.threads:
            t.join()

    def stats(self) -> list[StageStats]:
        """Per stage, in stage order (call after :meth:`close`, when no thread touches them)."""
        if not self._closed:
            raise RuntimeError("close the pipeline before reading its statistics")
        return [self.workers[d].stats() for d in self.spec.devices]
