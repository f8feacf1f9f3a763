"""Small identification problems and a chunk function that dies, for the scale tests."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np

from bemore.identify.problem import IdentificationProblem
from bemore.settings import load_identification
from tests.identify.synthetic import synthetic_case

FRAMES = 300

# A synthesis box around the default athlete's optimum, one start: seconds, not minutes.
SYNTHESIS = """
[bounds]
final_time_s = { lower = 2.9, upper = 3.03 }
flexion_end_time_s = { lower = 1.67, upper = 1.79 }
max_flexion_deg = { lower = 155.0, upper = 160.0 }
[constraints]
min_extension_duration_s = 0.5
final_rotation_deg = { lower = 360.0, upper = 362.0 }
[solver]
starts = 1
[seed_result]
final_time_s = 2.405
flexion_end_time_s = 1.468
max_flexion_deg = 160.0
evaluations = 354
elapsed_s = 23.82
"""


def small_problem(frames: int = FRAMES) -> IdentificationProblem:
    """The synthetic identification problem at the seed's parameters, 1 mm noise."""
    truth = {item.name: item.seed_value for item in load_identification().parameters}
    return synthetic_case(truth, noise_m=0.001, seed=2, frames=frames).problem


class DyingProblem(IdentificationProblem):
    """An identification problem whose evaluation, on a Dask worker, SIGKILLs that worker once.

    The first worker that finds ``flag`` renames it to ``flag.claimed`` (atomic: only one
    worker wins) and kills its own process in the middle of evaluating its chunk.
    """

    flag: str = ""
    client_pid: int = 0

    def _evaluate(self, X: np.ndarray) -> np.ndarray:
        if os.getpid() != self.client_pid and self.flag:
            try:
                os.rename(self.flag, self.flag + ".claimed")
            except FileNotFoundError:
                pass
            else:
                Path(self.flag + ".pid").write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
        return super()._evaluate(X)


def dying_copy(problem: IdentificationProblem, flag: Path) -> DyingProblem:
    """The same problem as a :class:`DyingProblem` armed with the file ``flag``."""
    dying = DyingProblem.__new__(DyingProblem)
    dying.__dict__.update(problem.__dict__)
    dying.flag = str(flag)
    dying.client_pid = os.getpid()
    return dying
