"""The result of an optimisation run, like scipy's ``OptimizeResult`` but a plain dataclass."""

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
}


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
class OptimisationResult:
    """Outcome of a run: best point ``x`` (problem units), its cost ``fun``, counts and history."""

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

    @property
    def success(self) -> bool:
        """True when the run finished its budget or converged (not interrupted or stopped)."""
        return self.status in (0, 3, 5)

    @property
    def interrupted(self) -> bool:
        """True when the user stopped the run with Ctrl-C."""
        return self.status == 1

    @property
    def message(self) -> str:
        """Human-readable status (one table, :data:`STATUS_MESSAGES`)."""
        return STATUS_MESSAGES[self.status]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (arrays become lists)."""
        data = asdict(self)
        data["x"] = [float(value) for value in np.asarray(self.x)]
        data["success"] = self.success
        data["interrupted"] = self.interrupted
        data["message"] = self.message
        return data

    def to_json(self, path: str | Path | None = None) -> str:
        """Serialise to JSON text; also write it to ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
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
