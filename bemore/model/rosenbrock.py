"""The ROS34PW2 Rosenbrock-W tableau the integrators use (numpy only, no numba).

ROS34PW2 (Rang & Angermann 2005) is a W-method: order 3 whatever the approximate Jacobian,
L-stable. The tableau is given in its (alpha, gamma) form and transformed once, here, into the
form the kernels evaluate: with the stage increments u_j,

- stage i is evaluated at Y_i = y + Σ_j A_T[i, j] u_j, at time t + STAGE_TIMES[i]·h;
- its right-hand side gets Σ_j C_T[i, j] / h · u_j added (h the step, s);
- the new state is y + Σ_j M_T[j] u_j;
- every stage solves with (I/(GAMMA·h) − J).

The reference kernel (``kernels.py``), the generated kernels and the driven-value tables
(``stages.py``) all read these names from here: one definition.
"""

from __future__ import annotations

import numpy as np

# ROS34PW2 in the (alpha, gamma) form of Rang & Angermann (2005), transformed below.
GAMMA = 0.435866521508459
_ALPHA = np.array([
    [0.0, 0.0, 0.0, 0.0],
    [0.87173304301691801, 0.0, 0.0, 0.0],
    [0.84457060015369423, -0.11299064236484185, 0.0, 0.0],
    [0.0, 0.0, 1.0, 0.0],
])
_GAMMA = np.array([
    [GAMMA, 0.0, 0.0, 0.0],
    [-0.87173304301691801, GAMMA, 0.0, 0.0],
    [-0.90338057013044082, 0.054180672388095326, GAMMA, 0.0],
    [0.24212380706095346, -1.2232505839045147, 0.54526025533510214, GAMMA],
])
_B = np.array([0.24212380706095346, -1.2232505839045147, 1.5452602553351020, GAMMA])
STAGE_TIMES = _ALPHA.sum(axis=1)  # fractions of the step
_GINV = np.linalg.inv(_GAMMA)
A_T = _ALPHA @ _GINV  # Y_i = y + Σ A_T[i, j] u_j
C_T = np.diag(1.0 / np.diag(_GAMMA)) - _GINV  # r_i += Σ C_T[i, j] / h · u_j
M_T = _B @ _GINV  # y_new = y + Σ M_T[j] u_j
