"""Optimisers behind one ask/tell interface, on problems that evaluate a whole population at once.

* :mod:`~bemore.optimize.problem` — a box-bounded problem with a vectorised ``evaluate``;
* :mod:`~bemore.optimize.constrained` — a constrained problem (objective and range constraints,
  batched), and the one conversion of constraint sign conventions;
* :mod:`~bemore.optimize.result` — the result of every optimiser (box-bounded or constrained);
* :mod:`~bemore.optimize.gwo` — the Grey Wolf Optimizer (Mirjalili et al. 2014, the authors' form);
* :mod:`~bemore.optimize.adapters` — PSO (pyswarms), DE and CMA-ES (pymoo), same interface;
* :mod:`~bemore.optimize.driver` — the ask → evaluate → tell loop, history, Ctrl-C, callback;
* :mod:`~bemore.optimize.polish` — a local least-squares polish (scipy) after any global run;
* :mod:`~bemore.optimize.testfunctions` — F1–F7 of the 2014 paper.
"""

from bemore.optimize.constrained import ConstrainedProblem, FunctionConstrainedProblem
from bemore.optimize.driver import ALGORITHMS, make_algorithm, minimize
from bemore.optimize.problem import FunctionProblem, Problem
from bemore.optimize.result import IterationRecord, LocalRun, OptimisationResult

__all__ = [
    "ALGORITHMS",
    "ConstrainedProblem",
    "FunctionConstrainedProblem",
    "FunctionProblem",
    "IterationRecord",
    "LocalRun",
    "OptimisationResult",
    "Problem",
    "make_algorithm",
    "minimize",
]
