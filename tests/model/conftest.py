"""Shared fixtures of the model tests: the two models, the built-in profile, a start state."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.model import load_model
from bemore.model.profiles import HANDSTAND_HAND_ROTATION, clear_hip_circle_profile


@pytest.fixture(scope="session")
def real():
    return load_model("real_gymnast")


@pytest.fixture(scope="session")
def exemplary():
    return load_model("exemplary_gymnast")


@pytest.fixture(scope="session")
def motion():
    return clear_hip_circle_profile(1.52, 1000.0)


@pytest.fixture(scope="session")
def start(real, motion):
    """Free state at the start of the profile: spring equilibrium near the handstand."""
    P = real.parameter_matrix([{}])
    free = np.zeros(real.n_free)
    free[2] = HANDSTAND_HAND_ROTATION + 0.05
    return real.equilibrium(P, motion.q[0], free_q=free)[0], np.zeros(real.n_free)
