"""The evaluator interface, and the in-process evaluator that is the default.

An evaluator runs ``fn(shared, X_chunk)`` over the rows of a population ``X`` (N, d) and returns
the results stacked in row order, as if ``fn(shared, X)`` had been called once. ``shared`` holds
what every evaluation needs and does not change during a run (model, trial arrays): an evaluator
that sends work elsewhere sends it once per run, not with every population.

``fn`` must be a module-level function (it may travel to another process), evaluate the rows of
its chunk independently of each other (so that any split gives the same numbers), and return
either one array whose first axis is the chunk's rows or a tuple of such arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from bemore.errors import OptimisationError

ChunkFunction = Callable[[Any, np.ndarray], Any]


class Evaluator(Protocol):
    """What identification and synthesis need to evaluate a population."""

    name: str

    def map_rows(self, fn: ChunkFunction, X: np.ndarray, shared: Any = None) -> Any:
        """``fn(shared, X)`` computed over row chunks of X (N, d), stacked in row order."""
        ...

    def describe(self) -> dict[str, Any]:
        """What to record in a result (kind, address, workers)."""
        ...

    def close(self) -> None:
        """Release what the evaluator holds (connections, scattered data)."""
        ...


class InProcessEvaluator:
    """Evaluate the whole population in one call in this process (the engine's threads: all
    local cores unless ``--workers`` / :func:`bemore.model.simulate.engine_threads_set` says
    otherwise).

    Exactly what the optimisers did before evaluators existed: ``fn(shared, X)`` once.
    """

    name = "in-process"

    def __init__(self, threads: int | None = None) -> None:
        """``threads``: the engine threads the run will use, as recorded by :meth:`describe`
        (None: the engine's setting when asked)."""
        self.threads = threads

    def map_rows(self, fn: ChunkFunction, X: np.ndarray, shared: Any = None) -> Any:
        """``fn(shared, X)``, checked to give one result row per point."""
        X = as_points(X)
        result = fn(shared, X)
        check_rows(result, X.shape[0])
        return result

    def map_cost(self, fn: ChunkFunction, X: np.ndarray, shared: Any = None) -> np.ndarray:
        """Costs (N,) of the points X (N, d): ``fn(shared, X)`` as a float vector."""
        return as_costs(self.map_rows(fn, X, shared), X)

    def describe(self) -> dict[str, Any]:
        """``{"kind": "in-process", "workers": the engine's threads}``."""
        from bemore.model.simulate import engine_threads

        return {"kind": self.name, "workers": self.threads or engine_threads()}

    def close(self) -> None:
        """Nothing to release."""


def chunk_slices(n_rows: int, n_chunks: int) -> list[slice]:
    """Split ``range(n_rows)`` into at most ``n_chunks`` contiguous, near-equal, non-empty slices.

    The first ``n_rows % n_chunks`` slices hold one row more than the others.
    """
    if n_rows < 0 or n_chunks < 1:
        raise OptimisationError(f"cannot split {n_rows} rows into {n_chunks} chunks")
    n_chunks = min(n_chunks, n_rows) or 1
    base, extra = divmod(n_rows, n_chunks)
    slices, start = [], 0
    for index in range(n_chunks):
        stop = start + base + (1 if index < extra else 0)
        slices.append(slice(start, stop))
        start = stop
    return [item for item in slices if item.stop > item.start] or [slice(0, 0)]


def stack_chunks(results: list[Any]) -> Any:
    """Concatenate per-chunk results in chunk order (arrays, or tuples of arrays)."""
    if not results:
        raise OptimisationError("no chunk results to stack")
    if isinstance(results[0], tuple):
        return tuple(np.concatenate(parts, axis=0) for parts in zip(*results, strict=True))
    return np.concatenate([np.asarray(result) for result in results], axis=0)


def as_costs(result: Any, X: np.ndarray) -> np.ndarray:
    """A chunk function's result as a cost vector (N,) of floats."""
    costs = np.asarray(result, dtype=float).reshape(-1)
    if costs.shape != (np.atleast_2d(X).shape[0],):
        raise OptimisationError(
            f"the cost function gave {costs.size} values for {np.atleast_2d(X).shape[0]} points"
        )
    return costs


def as_points(X: np.ndarray) -> np.ndarray:
    """The population as a 2-D float array (N, d)."""
    X = np.atleast_2d(np.asarray(X, dtype=float))
    if X.ndim != 2:
        raise OptimisationError(f"evaluate: expected points of shape (N, d), got {X.shape}")
    return X


def check_rows(result: Any, n_rows: int) -> None:
    """Every returned array must have one row per point."""
    parts = result if isinstance(result, tuple) else (result,)
    for part in parts:
        rows = np.shape(part)[0] if np.ndim(part) else None
        if rows != n_rows:
            raise OptimisationError(
                f"the evaluation function returned {rows} rows for {n_rows} points"
            )
