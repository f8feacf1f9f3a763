"""Which parameters a trial can determine: sensitivities and correlations from the Jacobian.

At the optimum, J (m × d) is the Jacobian of the stacked joint-centre residuals (m) with respect
to the normalised parameters (0 → lower bound, 1 → upper bound). Three quantities per parameter:

* **sensitivity**: the RMS displacement of the joint-centre coordinates when the parameter moves
  by 10 % of its range, ``0.1·‖J_k‖/√m`` (mm);
* **standard error**: from the linearised covariance ``σ²·(JᵀJ)⁻¹`` with ``σ² = Σr²/(m − d)``
  (white-noise assumption: optimistic when the residual is mostly model error), in SI units and
  relative to the value;
* **correlation** with every other parameter, from the same covariance.

A parameter is flagged as not determined by the trial when its sensitivity is below
``SENSITIVITY_FLOOR`` of the largest one, when it is correlated beyond ``MAX_CORRELATION`` with
another one (the trial sees only their combination), or when its relative standard error exceeds
``MAX_RELATIVE_ERROR``. The trial's nuisance unknowns (initial rotation rate, bar rest offsets)
are part of J — they are estimated with the parameters, so they widen the parameters' errors —
but they are not flagged, do not set the sensitivity floor (the near-critical initial rate is
by far the most sensitive unknown), and their relative error is relative to their search range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SENSITIVITY_FLOOR = 0.01  # fraction of the most sensitive parameter's sensitivity
MAX_CORRELATION = 0.95  # |correlation| above which two parameters are not told apart
MAX_RELATIVE_ERROR = 0.25  # standard error / |value| above which a value is not trusted


@dataclass
class ParameterIdentifiability:
    """Identifiability of one parameter (JSON-ready)."""

    name: str
    sensitivity_mm: float
    standard_error: float
    relative_standard_error: float
    most_correlated_with: str
    correlation: float
    identifiable: bool
    reasons: list[str]


@dataclass
class Identifiability:
    """Per-parameter results and the full correlation matrix (order of ``names``)."""

    parameters: list[ParameterIdentifiability]
    names: list[str]
    correlation_matrix: list[list[float]]
    residual_rms_mm: float
    nuisance: list[str]

    @property
    def flagged(self) -> list[str]:
        """Names of the model parameters the trial does not determine."""
        return [
            item.name
            for item in self.parameters
            if not item.identifiable and item.name not in self.nuisance
        ]


def analyse(
    jacobian: np.ndarray,
    residuals: np.ndarray,
    names: list[str] | tuple[str, ...],
    values: np.ndarray,
    widths: np.ndarray,
    nuisance: int = 0,
) -> Identifiability:
    """Identifiability at the optimum.

    ``jacobian``: (m, d) in metres per normalised unit; ``residuals``: (m,) m; ``values``: (d,)
    SI values at the optimum; ``widths``: (d,) upper − lower (SI); the last ``nuisance``
    columns are the trial's nuisance unknowns (see the module docstring).
    """
    J = np.asarray(jacobian, dtype=float)
    r = np.asarray(residuals, dtype=float)
    m, d = J.shape
    column_norms = np.linalg.norm(J, axis=0)
    sensitivity_mm = 0.1 * column_norms / np.sqrt(m) * 1e3
    sigma2 = float(r @ r) / max(m - d, 1)
    # Pseudo-inverse: a parameter with no effect at all must not break the analysis.
    covariance = sigma2 * np.linalg.pinv(J.T @ J)
    standard_error_n = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        correlation = covariance / np.outer(standard_error_n, standard_error_n)
    correlation = np.nan_to_num(correlation, nan=0.0)
    np.fill_diagonal(correlation, 1.0)
    standard_error = standard_error_n * np.asarray(widths, dtype=float)
    relative = standard_error / np.maximum(np.abs(values), 1e-300)
    parameters = d - nuisance
    relative[parameters:] = standard_error_n[parameters:]  # fraction of the search range
    floor = SENSITIVITY_FLOOR * float(sensitivity_mm[:parameters].max()) if parameters else 0.0
    rows = []
    for k, name in enumerate(names):
        others = np.abs(correlation[k]).copy()
        others[k] = -1.0
        partner = int(np.argmax(others)) if d > 1 else k
        reasons = []
        if sensitivity_mm[k] <= floor:
            reasons.append(
                f"insensitive: {sensitivity_mm[k]:.3g} mm per 10 % of its range "
                f"(< {SENSITIVITY_FLOOR:.0%} of the most sensitive parameter)"
            )
        if d > 1 and abs(correlation[k, partner]) > MAX_CORRELATION:
            reasons.append(
                f"correlated with {names[partner]} ({correlation[k, partner]:+.3f}): "
                "the trial shows only their combination"
            )
        if relative[k] > MAX_RELATIVE_ERROR:
            reasons.append(f"relative standard error {relative[k]:.0%} > {MAX_RELATIVE_ERROR:.0%}")
        rows.append(
            ParameterIdentifiability(
                name=name,
                sensitivity_mm=float(sensitivity_mm[k]),
                standard_error=float(standard_error[k]),
                relative_standard_error=float(relative[k]),
                most_correlated_with=names[partner] if d > 1 else "",
                correlation=float(correlation[k, partner]) if d > 1 else 0.0,
                identifiable=not reasons,
                reasons=reasons,
            )
        )
    return Identifiability(
        parameters=rows,
        names=list(names),
        correlation_matrix=[[float(value) for value in row] for row in correlation],
        residual_rms_mm=float(np.sqrt(r @ r / max(m, 1))) * 1e3,
        nuisance=list(names[parameters:]),
    )
