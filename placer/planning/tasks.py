"""Running many independent tasks: in this process, in worker processes, or as Ray tasks.

:func:`run_tasks` is the machinery a GPU plan's layouts (:func:`placer.planning.solve.search_layouts`),
a sweep's points (:mod:`placer.planning.studies.sweep`) and a speed frontier's placements and points
(:mod:`placer.planning.studies.frontier`) run on; :func:`check_backend` refuses an unknown backend,
or Ray not installed, before any work starts.

Ray's fixed cost is its start-up (``benchmarks/bench_ray.py`` measures it against local
processes): a local Ray started for one run costs several times the spawned processes, a running
cluster joined by ``address`` next to nothing. So local processes stay the default, and Ray pays on
a running cluster, and across machines where its tasks reach more cores than one machine has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from placer.algorithms.deadline import interrupted
from placer.specs.errors import ARGUMENT, InvalidSpec

__all__ = ["BACKENDS", "check_backend", "run_tasks", "stop_workers"]

BACKENDS = ("process", "ray")

_WORKER_INPUTS: tuple | None = None


def _init_worker(fn, shared):
    global _WORKER_INPUTS
    _WORKER_INPUTS = (fn, shared)


def _call_in_worker(item):
    fn, shared = _WORKER_INPUTS
    return fn(*shared, item)


def stop_workers(pool) -> None:
    """Stop a process pool now (Ctrl-C), rather than let its workers finish the items already queued
    to them. ProcessPoolExecutor has no public way to stop running workers; ``_processes`` is the
    documented-by-use handle (CPython 3.8+)."""
    workers = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in workers:
        proc.terminate()


def check_backend(backend: str) -> None:
    """Raise :class:`InvalidSpec` (``--backend``) for an unknown backend, or ``ray`` without Ray
    installed (before any work starts)."""
    if backend not in BACKENDS:
        raise InvalidSpec(ARGUMENT, "backend", f"unknown backend {backend!r} (use process or ray)")
    if backend == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise InvalidSpec(ARGUMENT, "backend", "Ray is not installed; install the extra with "
                                                      "pip install 'placer[ray]' or use --backend process") from None


def run_tasks(fn: Callable, shared: tuple, items: Sequence, finished: Callable, *, backend: str = "process",
              jobs: int = 1, address: str | None = None, failed: Callable | None = None) -> None:
    """``fn(*shared, item)`` for every item of ``items``; ``finished(item, value)`` as each returns.

    ``backend`` ``"process"``: ``jobs`` spawned processes (``shared`` sent once to each; 1 runs
    in this process, stopping at a noted Ctrl-C), ``"ray"``: one Ray task per item (``address``
    of a cluster, default a local one; ``shared`` put in the object store once). ``fn`` must be a
    module-level function. ``failed(item, message)`` is called when a worker or task dies (None:
    the error is raised). On Ctrl-C the queued items are cancelled and the workers stopped.
    Raises :class:`InvalidSpec` (``--backend``) for an unknown backend or Ray not installed.
    """
    check_backend(backend)
    if backend == "ray":
        _run_ray(fn, shared, items, finished, failed, address)
    elif jobs <= 1 or len(items) <= 1:
        for item in items:
            finished(item, fn(*shared, item))
            if interrupted():       # Ctrl-C stopped that item's search: keep what finished, stop here
                raise KeyboardInterrupt
    else:
        _run_processes(fn, shared, items, finished, failed, jobs)


def _run_processes(fn, shared, items, finished, failed, n_jobs) -> None:
    import multiprocessing as mp

    # spawn, not fork: forking a process that has run OR-Tools threads can deadlock the child
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(n_jobs, mp_context=ctx, initializer=_init_worker, initargs=(fn, shared)) as pool:
        futures = {pool.submit(_call_in_worker, item): item for item in items}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    _deliver(f.result, futures[f], finished, failed, "worker")
        except BaseException:
            stop_workers(pool)      # Ctrl-C: stop now, not after the items already queued to the workers
            raise


def _deliver(get, item, finished, failed, what: str) -> None:
    """``finished(item, get())``; a failure of the work (not Ctrl-C) goes to ``failed`` when given."""
    try:
        value = get()
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        if failed is None:
            raise
        failed(item, f"{what} failed: {type(exc).__name__}: {exc}")
        return
    finished(item, value)


def _run_ray(fn, shared, items, finished, failed, address) -> None:
    import ray  # check_backend has made sure it is installed

    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        remote = ray.remote(num_cpus=1)(fn)
        args = [ray.put(x) for x in shared]
        refs = {remote.remote(*args, item): item for item in items}
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    _deliver(lambda ref=ref: ray.get(ref), refs[ref], finished, failed, "task")
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    finally:
        if started:
            ray.shutdown()
