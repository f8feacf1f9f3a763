"""The result of an optimisation run, like scipy's ``OptimizeResult`` but a plain dataclass.

One result type for every optimiser of bemore: the box-bounded global runs and the polish of
identification, and the constrained multi-start searches of synthesis. A result explains itself:
the best point ``x``, its objective ``fun``, its constraint values and largest violation
``maxcv`` (constrained runs), whether it succeeded and why (``status``, ``message``), what it
cost (``nfev``, ``njev``, ``nit``, ``nbatch``), the convergence ``history`` and, for a multi-start
run, every local run (:class:`LocalRun`).

>>> import numpy as np
>>> result = OptimisationResult(x=np.array([1.25, 0.75]), fun=2.125, nfev=40, nit=6,
...     status=7, algorithm="slsqp", constraints=np.array([1.9]), constraint_names=("sum",),
...     maxcv=0.1, detail="best of 2 start(s)")
>>> result.success, result.message
(False, 'no feasible point found: the least-violating point is returned (best of 2 start(s))')
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# One table of status codes and their messages (scipy's habit): a run that merely stops early is
# a result, not an exception.
STATUS_MESSAGES = {
    0: "iteration budget used",
    1: "interrupted by the user (Ctrl-C): best result so far",
    2: "stopped by the callback",
    3: "local polish converged",
    4: "local polish stopped at its evaluation budget",
    5: "the algorithm stopped by its own convergence test",
    6: "a feasible point found: every constraint holds within the tolerance",
    7: "no feasible point found: the least-violating point is returned",
}
SUCCESS = (0, 3, 5, 6)
FEASIBLE, INFEASIBLE = 6, 7  # the statuses of a constrained run


@dataclass
class IterationRecord:
    """One line of the convergence history (costs in the problem's unit)."""

    iteration: int
    nfev: int
    best: float
    batch_best: float
    batch_mean: float
    elapsed_s: float


@dataclass
class LocalRun:
    """One local run of a multi-start search (problem units): from ``x0`` to ``x``, where the
    objective is ``fun``, the constraints ``constraints`` (each in its own unit) and their largest
    violation ``maxcv``; ``nit`` iterations, ``nfev`` points evaluated; the local method's own
    ``success`` and ``message``; ``stage`` names the search stage it belongs to."""

    x0: list[float]
    x: list[float]
    fun: float
    maxcv: float
    nit: int
    nfev: int
    success: bool
    message: str
    constraints: list[float] = field(default_factory=list)
    stage: str = "search"


@dataclass
class OptimisationResult:
    """Outcome of a run: best point ``x`` (problem units), its objective ``fun``, counts, history.

    Constrained runs also give the constraint values at ``x`` (``constraints``, named by
    ``constraint_names``, each in its own unit) and their largest violation ``maxcv`` (0 when
    feasible); ``njev`` counts objective/constraint Jacobians, ``nbatch`` batched evaluation
    requests, ``runs`` the local runs of a multi-start search. ``detail`` completes the status
    message (e.g. how many starts ended feasible).
    """

    x: np.ndarray
    fun: float
    nfev: int
    nit: int
    status: int
    algorithm: str
    seed: int | None = None
    elapsed_s: float = 0.0
    history: list[IterationRecord] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    njev: int = 0
    nbatch: int = 0
    constraints: np.ndarray | None = None
    constraint_names: tuple[str, ...] = ()
    maxcv: float = 0.0
    runs: list[LocalRun] = field(default_factory=list)
    detail: str = ""

    @property
    def success(self) -> bool:
        """True when the run finished its budget, converged or found a feasible point (not
        interrupted, stopped, or infeasible)."""
        return self.status in SUCCESS

    @property
    def interrupted(self) -> bool:
        """True when the user stopped the run with Ctrl-C."""
        return self.status == 1

    @property
    def message(self) -> str:
        """Human-readable status (one table, :data:`STATUS_MESSAGES`), then ``detail``."""
        text = STATUS_MESSAGES[self.status]
        return f"{text} ({self.detail})" if self.detail else text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: arrays become lists, and a value that is not a finite number (the
        history's best before any feasible point, NaN) becomes None (JSON null)."""
        data = asdict(self)
        data["x"] = [float(value) for value in np.asarray(self.x)]
        if self.constraints is not None:
            data["constraints"] = [float(value) for value in np.asarray(self.constraints)]
        data["constraint_names"] = list(self.constraint_names)
        data["success"] = self.success
        data["interrupted"] = self.interrupted
        data["message"] = self.message
        return _finite_or_none(data)

    def to_json(self, path: str | Path | None = None) -> str:
        """Serialise to JSON text; also write it to ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            from bemore.paths import write_file

            write_file(path, text + "\n")
        return text

    def history_csv(self) -> str:
        """The convergence history as CSV text (one row per iteration)."""
        header = "iteration,nfev,best,batch_best,batch_mean,elapsed_s"
        rows = [
            f"{r.iteration},{r.nfev},{r.best:.10g},{r.batch_best:.10g},{r.batch_mean:.10g},"
            f"{r.elapsed_s:.4f}"
            for r in self.history
        ]
        return "\n".join([header, *rows]) + "\n"


def _finite_or_none(value: Any) -> Any:
    """``value`` with every non-finite float inside (dicts, lists) replaced by None."""
    if isinstance(value, dict):
        return {key: _finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(item) for item in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
