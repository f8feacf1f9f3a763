"""Where populations are evaluated: in this process (default) or on a Dask cluster.

>>> evaluator = make_evaluator(None)            # in-process, all local cores
>>> evaluator.name
'in-process'

``make_evaluator("tcp://scheduler:8786")`` connects to a Dask scheduler instead; see
:mod:`bemore.evaluate.cluster` and docs/scale.md.
"""

from __future__ import annotations

from bemore.evaluate.base import Evaluator, InProcessEvaluator, chunk_slices
from bemore.evaluate.problems import EvaluatedGestureProblem, EvaluatedProblem


def make_evaluator(address: str | None = None, threads: int | None = None) -> Evaluator:
    """The in-process evaluator (the run's engine ``threads``, None: the engine's setting), or
    a Dask evaluator connected to ``address`` when given."""
    if not address:
        return InProcessEvaluator(threads)
    from bemore.evaluate.cluster import DaskEvaluator

    return DaskEvaluator(address=address)


__all__ = [
    "EvaluatedGestureProblem",
    "EvaluatedProblem",
    "Evaluator",
    "InProcessEvaluator",
    "chunk_slices",
    "make_evaluator",
]
