"""Planar tree dynamics engine and the two gymnast models (see docs/model.md)."""

from bemore.model.core import Model
from bemore.model.gymnasts import (
    exemplary_parameters,
    load_model,
    straight_posture,
)
from bemore.model.simulate import (
    COST_POINTS,
    DrivenMotion,
    Simulation,
    joint_centre_cost,
    simulate,
)

__all__ = [
    "COST_POINTS",
    "DrivenMotion",
    "Model",
    "Simulation",
    "exemplary_parameters",
    "joint_centre_cost",
    "load_model",
    "simulate",
    "straight_posture",
]
