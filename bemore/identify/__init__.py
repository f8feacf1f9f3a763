"""Identification of the real-gymnast model from a motion-capture trial (``bemore identify``).

:class:`~bemore.identify.space.ParameterSpace` (the searched box, normalised to [0, 1]),
:class:`~bemore.identify.problem.IdentificationProblem` (cost f1 over a whole population in one
engine call), :func:`~bemore.identify.run.identify` (global run, polish, identifiability) and
:func:`~bemore.identify.outputs.write_outputs` (athlete.json, convergence.csv, plots).
"""

from bemore.identify.problem import IdentificationProblem
from bemore.identify.run import Outcome, RunSettings, identify
from bemore.identify.space import ParameterSpace

__all__ = ["IdentificationProblem", "Outcome", "ParameterSpace", "RunSettings", "identify"]
