"""Population evaluation on a Dask cluster (``dask.distributed``).

- The shared data of a run (model, trial arrays) is scattered to every worker once
  (``broadcast=True``) and referred to by its future afterwards; it is sent again only if every
  copy was lost with the workers that held it.
- The population is split into one contiguous chunk per worker thread (times
  ``chunks_per_thread``); every chunk is one task with a key unique to this call.
- Results are taken in chunk order, so the stacked result is bitwise the one of the in-process
  evaluator whenever the chunk function evaluates rows independently (the engine does).
- A worker that dies mid-run: the scheduler reschedules its tasks on the others (up to its
  ``allowed_failures``); a chunk that still comes back lost or cancelled is resubmitted by this
  evaluator (after scattering the shared data again), up to ``resubmits`` times.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import numpy as np

from bemore.errors import ConfigError, OptimisationError
from bemore.evaluate.base import (
    ChunkFunction,
    as_costs,
    as_points,
    check_rows,
    chunk_slices,
    stack_chunks,
)

CONNECT_TIMEOUT_S = 10.0


def require_distributed(option: str = "--dask (or a configured Dask address)") -> Any:
    """The ``distributed`` module (Dask's scheduler client), an optional extra of bemore.

    Without it, ``option`` (the flag that asked for a cluster) gets one ConfigError line that
    names the extra to install.
    """
    try:
        import distributed
    except ImportError:
        raise ConfigError(
            f"{option} needs Dask, which is not installed: pip install 'bemore[dask]'"
        ) from None
    return distributed


def _run_chunk(fn: ChunkFunction, shared: Any, chunk: np.ndarray, engine_threads: int) -> Any:
    """Worker side: evaluate one chunk and check it gave one row per point.

    ``engine_threads`` > 0 caps the engine's threads in this worker (at most its cores):
    several workers on one machine would otherwise each start one thread per core.
    """
    if engine_threads > 0:
        import os

        from bemore.model.simulate import set_engine_threads

        set_engine_threads(min(engine_threads, os.cpu_count() or 1))
    result = fn(shared, chunk)
    check_rows(result, chunk.shape[0])
    return result


def lost_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean 'the work was lost with a worker', not 'the function failed'."""
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    return (KilledWorker, FutureCancelledError, CommClosedError, ConnectionError, TimeoutError)


def connect(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> Any:
    """A ``distributed.Client`` connected to the scheduler at ``address`` (e.g. tcp://host:8786).

    A scheduler that cannot be reached raises one ConfigError line naming the address; without
    Dask installed, one line naming the ``bemore[dask]`` extra.
    """
    Client = require_distributed().Client

    try:
        return Client(address, timeout=timeout_s, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(
            f"--dask {address}: cannot connect to a Dask scheduler there ({reason})"
        ) from None


class DaskEvaluator:
    """Evaluate populations on the workers of a Dask cluster.

    Give either ``address`` (the evaluator connects and closes its own client) or an existing
    ``client`` (left open on :meth:`close`). ``chunks_per_thread`` chunks are made per worker
    thread; ``resubmits`` bounds how often one call resubmits lost chunks; ``timeout_s`` is how
    long to try to connect (s); ``engine_threads`` > 0 caps the engine threads of each chunk
    (0 = the worker's default, one per core).
    """

    name = "dask"

    def __init__(
        self,
        address: str | None = None,
        client: Any = None,
        chunks_per_thread: int = 1,
        resubmits: int = 3,
        timeout_s: float = CONNECT_TIMEOUT_S,
        engine_threads: int = 0,
    ) -> None:
        if (address is None) == (client is None):
            raise ConfigError("dask evaluator: give exactly one of a scheduler address or a client")
        if chunks_per_thread < 1 or resubmits < 0:
            raise ConfigError(
                f"dask evaluator: chunks_per_thread = {chunks_per_thread} must be ≥ 1 and "
                f"resubmits = {resubmits} ≥ 0"
            )
        self._owns_client = client is None
        self.client = connect(address, timeout_s) if client is None else client
        self.address = address or self.client.scheduler.address
        self.chunks_per_thread = chunks_per_thread
        self.resubmits = resubmits
        self.engine_threads = engine_threads
        self._run = uuid.uuid4().hex[:8]
        self._calls = itertools.count()
        self._scattered: dict[int, tuple[Any, Any]] = {}
        self.tasks_submitted = 0
        self.chunks_resubmitted = 0
        self.scatters = 0

    # ------------------------------------------------------------------ cluster facts

    def worker_threads(self) -> int:
        """Worker threads currently in the cluster (waits up to 30 s for the first worker)."""
        threads = self.client.nthreads()
        if not threads:
            try:
                self.client.wait_for_workers(1, timeout=30)
            except TimeoutError:
                raise OptimisationError(
                    f"the Dask cluster at {self.address} has no worker (waited 30 s)"
                ) from None
            threads = self.client.nthreads()
        return max(1, sum(int(count) for count in threads.values()))

    def describe(self) -> dict[str, Any]:
        """``{"kind": "dask", "address", "worker_threads", "tasks", "resubmitted"}``."""
        return {
            "kind": self.name,
            "address": str(self.address),
            "worker_threads": self.worker_threads(),
            "tasks": self.tasks_submitted,
            "resubmitted": self.chunks_resubmitted,
        }

    # ------------------------------------------------------------------ evaluation

    def map_rows(self, fn: ChunkFunction, X: np.ndarray, shared: Any = None) -> Any:
        """``fn(shared, X)`` over one chunk of X (N, d) per worker thread, stacked in row order."""
        X = as_points(X)
        slices = chunk_slices(X.shape[0], self.worker_threads() * self.chunks_per_thread)
        call = next(self._calls)
        results: list[Any] = [None] * len(slices)
        pending = list(range(len(slices)))
        for attempt in range(self.resubmits + 1):
            remote = self._shared_future(shared)
            futures = {
                index: self.client.submit(
                    _run_chunk,
                    fn,
                    remote,
                    X[slices[index]],
                    self.engine_threads,
                    key=f"bemore-{self._run}-{call}-{index}-{attempt}",
                    pure=False,
                )
                for index in pending
            }
            self.tasks_submitted += len(futures)
            lost = []
            for index, future in futures.items():
                try:
                    results[index] = future.result()
                except lost_errors():
                    lost.append(index)
            if not lost:
                return stack_chunks(results)
            # The shared data may have gone with the workers that held it: send it again.
            self._scattered.pop(id(shared), None)
            self.chunks_resubmitted += len(lost)
            pending = lost
        raise OptimisationError(
            f"Dask cluster at {self.address}: {len(pending)} chunk(s) lost {self.resubmits + 1} "
            "times (workers keep dying); the run cannot continue"
        )

    def map_cost(self, fn: ChunkFunction, X: np.ndarray, shared: Any = None) -> np.ndarray:
        """Costs (N,) of the points X (N, d) computed on the cluster."""
        return as_costs(self.map_rows(fn, X, shared), X)

    def _shared_future(self, shared: Any) -> Any:
        """The future of ``shared`` on every worker, scattered on first use."""
        if shared is None:
            return None
        held = self._scattered.get(id(shared))
        if held is not None and held[0] is shared:
            return held[1]
        future = self.client.scatter(shared, broadcast=True, hash=False)
        self.scatters += 1
        # Keep the object itself: its id() must not be reused while the future lives.
        self._scattered[id(shared)] = (shared, future)
        return future

    def forget(self, shared: Any) -> None:
        """Release the scattered copy of ``shared`` (e.g. at the end of a run)."""
        held = self._scattered.pop(id(shared), None)
        if held is not None:
            held[1].release()

    def close(self) -> None:
        """Release scattered data; close the client if this evaluator opened it."""
        for key in list(self._scattered):
            self._scattered.pop(key)[1].release()
        if self._owns_client:
            self.client.close()
