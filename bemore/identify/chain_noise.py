"""Errors in variables: the residuals' error covariance with the noise of what drives the model.

The simulation is driven by inputs the trial chain makes from the same noisy markers — the
driven motion above all (docs/identify.md, "Bar forces"), the start, the measured segment
lengths — so the residuals at the truth are not the measurements' noise alone: they also carry
the simulation's response to its inputs' noise, correlated over the whole trial (the clear hip
circle is near-critical: a few tenths of a degree of joint-angle noise between 1.5 and 6 Hz move
the simulated body and its bar force coherently). Least squares with the measurements' noise
alone reads that response as information: on synthetic trials with bar forces it is what puts
the bar mass 10–18 % off on a third of the noise seeds (a first-order error: the same noise
with its sign flipped gives the opposite error).

Weighting (generalised least squares, the input noise marginalised to first order): with the
residuals r(x) ≈ r_true(x) + U z, z ~ N(0, I_K), their covariance is C = D + U Uᵀ:

* D (diagonal): the targets' own noise — each joint-centre coordinate's as the chain leaves it,
  σ_ref² (the mean square of the copies' measured joint-centre changes); each scaled force
  residual's, weight·σ_ref²: the force scale (:func:`~bemore.identify.problem.force_scales`)
  gives the force residuals the markers' noise density times √weight, so in W r the weight
  cancels — the force term is weighed by the noise alone, the driven motion's part of the
  simulated force's error being in U;
* U (m, K): the simulation's response to the chain's noise, from K copies of the trial's
  markers with independent noise (:func:`bemore.identify.propagation.simulate_copies`: the
  whole chain run again, each copy simulated at x with its own driven motion, start and body),
  measured against the trial's own targets, linearised at :data:`~bemore.identify.propagation.
  LINEAR_FRACTION` of the noise and scaled back, divided by √(K − 1).

The start's nuisance unknowns (:mod:`bemore.identify.initial`) are fitted with the parameters,
so the part of U their Jacobian columns J_n span (D^(−1)-orthogonally) is taken out of U: with
U = J_n A + U', min over (θ, z) of |D^(−1/2)(r − Jθ − U z)|² + |z|² is the same problem with U'
and θ_n + A z in place of θ_n — the parameters' estimate does not change, but without it the
start could drift along the input noise's largest response (the near-critical circle's
fall-back-or-go-over mode, 40 mm RMS per σ of marker noise on the synthetic circles) at no cost.

The fit minimises |W r|² with W = σ_ref·C^(−1/2) (σ_ref² the joint centres' variance of D, so
that the weighted residuals stay in m of joint-centre distance): with D^(−1/2)U = Q S Vᵀ (thin
SVD), C^(−1/2) = [I − Q (I − (I + S²)^(−1/2)) Qᵀ] D^(−1/2). The copies are drawn with
:data:`SEED`, independent of the standard errors' copies (``propagation.SEED``): the weighting
shrinks exactly the directions its own copies span, so the same draws would hide their
noise from the standard errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

SEED = 51013  # the weighting's noise draws; independent of bemore.identify.propagation.SEED


@dataclass
class ChainNoiseWeighting:
    """W = σ_ref·C^(−1/2) of the residuals' error covariance C = D + U Uᵀ (module docstring).

    ``scale`` (m,) is σ_ref/√D per residual row, ``basis`` (m, K) the orthonormal Q of
    D^(−1/2)U, ``shrink`` (K,) 1 − (1 + s²)^(−1/2) per singular value s; ``joint_centre_noise_m``
    is σ_ref (m), ``realisations`` the copies used, ``seed`` their draws'."""

    scale: np.ndarray
    basis: np.ndarray
    shrink: np.ndarray
    joint_centre_noise_m: float
    realisations: int
    seed: int

    def apply(self, residuals: np.ndarray) -> np.ndarray:
        """W r of residual rows (…, m) (same units, m of joint-centre distance)."""
        weighted = residuals * self.scale
        return weighted - ((weighted @ self.basis) * self.shrink) @ self.basis.T

    def apply_jacobian(self, jacobian: np.ndarray) -> np.ndarray:
        """W J of Jacobians (…, m, d)."""
        return np.swapaxes(self.apply(np.swapaxes(jacobian, -1, -2)), -1, -2)

    def record(self) -> dict[str, Any]:
        """JSON-ready description (athlete.json ``chain_noise_weighting``)."""
        return {
            "realisations": self.realisations,
            "seed": self.seed,
            "joint_centre_noise_mm": self.joint_centre_noise_m * 1e3,
            "singular_values": [float(v) for v in
                                np.sqrt(1.0 / (1.0 - self.shrink) ** 2 - 1.0)],
        }


def chain_noise_weighting(problem: Any, x: np.ndarray, realisations: int | None = None,
                          seed: int = SEED) -> ChainNoiseWeighting | None:
    """The weighting of ``problem`` (an :class:`~bemore.identify.problem.IdentificationProblem`
    made from a prepared trial) linearised at ``x`` (dim,), normalised (module docstring).
    None when the problem carries no trial chain to run again, its marker noise is unknown, or
    fewer than 3 copies can be simulated."""
    from bemore.identify.propagation import (
        LINEAR_FRACTION,
        REALISATIONS,
        residual_rows,
        simulate_copies,
    )
    from bemore.trial.realisations import noisy_markers

    trial = getattr(problem, "trial", None)
    noise = getattr(problem, "marker_noise_m", float("nan"))
    if (trial is None or getattr(trial, "markers", None) is None
            or getattr(trial, "unfiltered", None) is None or not np.isfinite(noise)
            or noise <= 0):
        return None
    count = realisations or REALISATIONS
    raw = noisy_markers(trial, count + 1, LINEAR_FRACTION * noise, seed)
    raw[0] = trial.unfiltered
    copies, points, force = simulate_copies(problem, np.asarray(x, dtype=float), raw)
    # Against the trial's own targets: what the copies' inputs do to the simulation alone.
    rows = residual_rows(problem, points - problem.measured, force)
    valid = np.isfinite(rows).all(axis=1)
    if not valid[0] or valid.sum() < 4:
        return None
    changes = (rows[1:][valid[1:]] - rows[0]) / LINEAR_FRACTION  # (K, m) at the noise's σ
    seen = np.isfinite(problem.measured)
    measured = (copies.joint_centres[1:] - copies.joint_centres[0]) / LINEAR_FRACTION
    joint_centre_noise = float(np.sqrt(np.mean(measured[:, seen] ** 2)))
    frames = problem.measured.shape[0]
    scale = np.ones((frames, problem.columns_per_frame))
    if problem.has_forces:
        # The force scale gives a force residual the markers' noise density times √weight:
        # its rows' noise is √weight·σ_ref (the weight cancels in W r).
        scale[:, 2 * len(problem.cost_points):] = 1.0 / np.sqrt(problem.force_weight)
    scale = scale.reshape(-1)
    spread = (changes * scale).T / np.sqrt(changes.shape[0] - 1)  # σ_ref·D^(−1/2)U (m, K)
    if problem.dim > problem.space.dim:
        # What the start's unknowns can absorb is fitted by them anyway: taken out of U, the
        # parameters' estimate is the same (module docstring) and the start stays determined.
        _, jacobian = problem.jacobian(np.asarray(x, dtype=float)[None, :])
        nuisance, _ = np.linalg.qr(jacobian[0][:, problem.space.dim:] * scale[:, None])
        spread -= nuisance @ (nuisance.T @ spread)
    basis, singular, _ = np.linalg.svd(spread, full_matrices=False)
    shrink = 1.0 - 1.0 / np.sqrt(1.0 + (singular / joint_centre_noise) ** 2)
    return ChainNoiseWeighting(scale=scale, basis=basis, shrink=shrink,
                               joint_centre_noise_m=joint_centre_noise,
                               realisations=int(changes.shape[0]), seed=seed)
