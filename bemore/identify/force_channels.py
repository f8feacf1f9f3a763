"""The bar force channels' calibration and timing errors, fitted with the parameters.

A strain-gauge channel reads F_meas,a(t) = (1 + g_a)·F_a(t − τ_a) + c_a·F_b(t − τ_a) + o_a on
axis a (b the other axis): an offset o (N: the tare), a gain error g (fraction: the
calibration), a cross-talk c (fraction of the other axis' force the gauge also reads) and a lag
τ (s) of the force behind the markers (the amplifier's filter, a trigger's delay), each axis
its own (two amplifiers; an inverted channel's lag is the other's with its sign flipped). None
of them is visible in the force alone, and each moves what the force identifies: on the
synthetic trials, a vertical offset of 3 N or a gain 0.5 % off puts the bar mass 30–45 % off, a
lag of 1 ms the trunk mass 13 % off — each reported identifiable, the force residual as small
as with exact channels (docs/identify.md, "The force channels").

To first order F_a ≈ F_meas,a − o_a − g_a·F_meas,a − c_a·F_meas,b + τ_a·Ḟ_meas,a, so with the
errors corrected a scaled force residual s·(F_sim − F) is r + B θ, θ = (o_x, o_y, g_x, g_y,
c_x, c_y, τ_x, τ_y) and B's columns s·1, s·F_meas on the axis, s·F_meas of the other axis,
−s·Ḟ_meas on the axis — data only, independent of the model's parameters. Fitting θ with the
parameters is therefore the same minimum as minimising |P r|² with P the projection onto the
complement of B's span (variable projection, Golub & Pereyra 1973):
:meth:`ForceChannelErrors.project` applies it to the force rows of residuals and Jacobians
alike, so the search, the polish, the weighting and every standard error fit the channels'
errors without any change to the engine; :meth:`ForceChannelErrors.estimate` gives θ back from
the unprojected residual at the fit (a gain as the correction's g/(1 + g), equal to g for small
errors: a channel read inverted, g = −2, comes back as +200 %). Ḟ_meas is the gradient of the
prepared force, which the trial chain has low-passed (``[forces] cutoff_hz``).

What the projection cannot take: a force and its channel errors moving together — a constant
vertical force is both the weight (M + m_bar)·g and an offset, so with the offset fitted the bar
mass comes from the bar's own accelerations alone, and its standard error grows (≈ ×4–5 on the
synthetic trials); the weighing of the body mass then matters less. The first-order model holds
while the neglected term stays below the force's noise: F(t) = F_meas(t + τ)/(1 + g) (one
axis, no offset or cross-talk) is F_meas/(1 + g) + τ/(1 + g)·Ḟ_meas + τ²/(2(1 + g))·F̈_meas + …,
linear in the columns to first order in τ whatever g (an inverted channel included), so what
is left is τ²/2·F̈, whose size :meth:`ForceChannelErrors.estimate` reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

import numpy as np

from bemore.settings import ForceChannelError

KINDS: tuple[str, ...] = get_args(ForceChannelError)  # what [forces] fitted_channel_errors names


def channel_error_columns(bar_force: np.ndarray, t: np.ndarray, scale: np.ndarray,
                          kinds: tuple[str, ...] = KINDS) -> tuple[tuple[str, ...], np.ndarray]:
    """The labels and columns B (F, 2, k) of the channel errors ``kinds`` (of :data:`KINDS`):
    per unit of each error in SI (offset N, gain and cross-talk fractions, lag s), the change of
    the scaled force residuals (m). ``bar_force`` (F, 2) N as prepared, ``t`` (F,) s,
    ``scale`` (2,) m/N.

    >>> labels, B = channel_error_columns(np.array([[0.0, 10.0], [2.0, 14.0], [4.0, 18.0]]),
    ...                                   np.array([0.0, 0.5, 1.0]), np.array([1.0, 0.5]))
    >>> labels  # doctest: +NORMALIZE_WHITESPACE
    ('offset_x_n', 'offset_y_n', 'gain_x', 'gain_y', 'crosstalk_x', 'crosstalk_y', 'lag_x_s',
     'lag_y_s')
    >>> B[:, 1, 3].tolist(), B[:, 0, 4].tolist(), B[:, 0, 6].tolist()  # s·F_y; s·F_y; −s·Ḟ_x
    ([5.0, 7.0, 9.0], [10.0, 14.0, 18.0], [-4.0, -4.0, -4.0])
    >>> B[:, 1, 7].tolist(), B[:, 1, 6].tolist()  # −s·Ḟ_y on the y rows; the x lag not there
    ([-4.0, -4.0, -4.0], [0.0, 0.0, 0.0])
    """
    force = np.asarray(bar_force, dtype=float)
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown:
        raise ValueError(f"unknown force channel error {unknown[0]!r} (known: {', '.join(KINDS)})")
    labels, columns = [], []
    for kind in KINDS:
        if kind not in kinds:
            continue
        rate = np.gradient(force, np.asarray(t, dtype=float), axis=0) if kind == "lag" else None
        for axis, name in enumerate("xy"):
            column = np.zeros_like(force)
            column[:, axis] = {"offset": 1.0, "gain": force[:, axis],
                               "crosstalk": force[:, 1 - axis],
                               "lag": -rate[:, axis] if rate is not None else 0.0}[kind]
            labels.append(f"{kind}_{name}" + {"offset": "_n", "lag": "_s"}.get(kind, ""))
            columns.append(column)
    B = np.stack(columns, axis=-1) if columns else np.zeros((*force.shape, 0))
    return tuple(labels), B * np.asarray(scale, dtype=float)[None, :, None]


@dataclass
class ForceChannelErrors:
    """The channel errors fitted by projection (module docstring): ``labels`` (k,), their
    columns ``columns`` (F, 2, k) m per SI unit, and ``basis`` (2F, k), an orthonormal basis of
    their span in the flattened (frame, axis) order of the force residuals."""

    labels: tuple[str, ...]
    columns: np.ndarray
    basis: np.ndarray

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds fitted (of :data:`KINDS`), in :data:`KINDS`' order."""
        return tuple(kind for kind in KINDS if any(label.startswith(kind)
                                                   for label in self.labels))

    @classmethod
    def of_force(cls, bar_force: np.ndarray, t: np.ndarray, scale: np.ndarray,
                 kinds: tuple[str, ...] = KINDS) -> ForceChannelErrors | None:
        """The errors ``kinds`` of a prepared force (F, 2) N sampled at ``t`` (F,) s with
        residual scales ``scale`` (2,) m/N; None when ``kinds`` is empty."""
        labels, columns = channel_error_columns(bar_force, t, scale, tuple(kinds))
        if not labels:
            return None
        basis, _ = np.linalg.qr(columns.reshape(-1, len(labels)))
        return cls(labels, columns, basis)

    def project(self, force_residuals: np.ndarray) -> np.ndarray:
        """``force_residuals`` (…, F, 2) with their component in the errors' span removed:
        what is left once the channel errors are fitted (a new array)."""
        shape = force_residuals.shape
        flat = np.reshape(force_residuals, (*shape[:-2], -1))
        return (flat - (flat @ self.basis) @ self.basis.T).reshape(shape)

    def estimate(self, raw_force_residuals: np.ndarray, bar_force: np.ndarray,
                 t: np.ndarray) -> dict[str, Any]:
        """The fitted errors from the unprojected scaled force residual (F, 2) m at the fit:
        θ = −(BᵀB)⁻¹Bᵀ r, in the record's units (offsets N, gains and cross-talks %, lags ms),
        and ``second_order_rms_n`` (per axis, N): the size of what the first-order correction
        neglects (τ²/2·F̈), to compare with the force's noise."""
        k = len(self.labels)
        theta, *_ = np.linalg.lstsq(self.columns.reshape(-1, k),
                                    -np.asarray(raw_force_residuals).reshape(-1), rcond=None)
        fitted = dict(zip(self.labels, theta.tolist(), strict=True))
        record: dict[str, Any] = in_record_units(fitted)
        t = np.asarray(t, dtype=float)
        lag = np.array([fitted.get("lag_x_s", 0.0), fitted.get("lag_y_s", 0.0)])
        second = 0.5 * lag**2 * np.gradient(np.gradient(bar_force, t, axis=0), t, axis=0)
        record["second_order_rms_n"] = np.sqrt(np.mean(second**2, axis=0)).tolist()
        return record

    def coefficients(self, force_residuals: np.ndarray) -> np.ndarray:
        """(…, k) SI: the least-squares coefficients of the errors' columns in scaled force
        residuals (…, F, 2) m, A r with A = (BᵀB)⁻¹Bᵀ (the fitted errors are −A r at the
        fit)."""
        k = len(self.labels)
        shape = np.shape(force_residuals)
        flat = np.reshape(force_residuals, (*shape[:-2], -1))
        return flat @ np.linalg.pinv(self.columns.reshape(-1, k)).T

    def standard_errors(self, covariance: np.ndarray) -> dict[str, float]:
        """Standard errors in the record's units and keys (:func:`in_record_units`) of the
        fitted errors whose covariance (k, k) SI is ``covariance`` (:func:`error_covariance`)."""
        errors = np.sqrt(np.clip(np.diag(np.asarray(covariance, dtype=float)), 0.0, None))
        return in_record_units(dict(zip(self.labels, errors.tolist(), strict=True)))


def error_covariance(sensitivity: np.ndarray, copies: tuple[np.ndarray, np.ndarray],
                     systematic: tuple[np.ndarray, np.ndarray, np.ndarray],
                     unpropagated_covariance: np.ndarray | None,
                     noise_covariance: np.ndarray
                     ) -> np.ndarray:
    """(k, k) SI: the covariance of the fitted channel errors θ = −A r(x̂), to first order.

    Each input the trial chain propagates (its noise copies, the systematic members: the body
    mass, the arm-end recipe, the declared channel errors not fitted) changes the unprojected
    force residual at the fit by δr and moves the estimate by δx (the fit's own response, its
    weighting included): θ moves by −(A δr + S δx), ``sensitivity`` S = A J (k, d) with J the
    unprojected force rows' Jacobian. The two parts cancel largely — the fit moves the start's
    rotation rate to follow a copy's driven motion, and its force with it — so they are taken
    together, member by member: ``copies`` = (A δr (K, k), δx (K, d)), their sample covariance;
    ``systematic`` = (A δr (n, k), δx (n, d), variance factor (n,): 1 for a standard
    uncertainty, 1/3 for a rectangular half-width), Σ f·δθ δθᵀ. The parameters' covariance
    beyond those inputs, ``unpropagated_covariance`` (d, d; the model error's, or the whole
    residual sandwich when nothing was propagated; None: none), moves θ through S alone;
    ``noise_covariance`` (k, k) is the force noise inside the errors' span, which the fit does
    not see (:func:`span_noise_covariance`).

    >>> S = np.array([[2.0]])
    >>> copies = (np.array([[1.0], [-1.0], [0.0]]), np.array([[-0.5], [0.5], [0.0]]))
    >>> none = (np.zeros((0, 1)), np.zeros((0, 1)), np.zeros(0))
    >>> error_covariance(S, copies, none, None, np.zeros((1, 1))).tolist()  # they cancel
    [[0.0]]
    >>> body = (np.array([[3.0]]), np.array([[1.0]]), np.array([1.0]))
    >>> error_covariance(S, copies, body, np.array([[0.25]]), np.array([[1.0]])).tolist()
    [[27.0]]
    """
    S = np.asarray(sensitivity, dtype=float)
    direct, response = (np.asarray(a, dtype=float) for a in copies)
    moved = direct + response @ S.T
    covariance = (np.atleast_2d(np.cov(moved, rowvar=False)) if moved.shape[0] > 1
                  else np.zeros((S.shape[0], S.shape[0])))
    direct, response, factor = (np.asarray(a, dtype=float) for a in systematic)
    moved = direct + response @ S.T
    covariance = covariance + (moved * factor[:, None]).T @ moved
    if unpropagated_covariance is not None:
        covariance = covariance + S @ np.asarray(unpropagated_covariance, dtype=float) @ S.T
    return covariance + np.asarray(noise_covariance, dtype=float)


def span_noise_covariance(errors: ForceChannelErrors, row_variance: np.ndarray) -> np.ndarray:
    """(k, k) SI: the covariance of A ε, the force noise ε inside the errors' span, with
    ``row_variance`` (2,) m² per scaled residual row of each axis (:func:`row_noise_variance`).

    >>> columns = np.zeros((4, 2, 1)); columns[:, 1, 0] = 2.0  # an offset of y, s = 2 m/N
    >>> errors = ForceChannelErrors(("offset_y_n",), columns, np.zeros((8, 1)))
    >>> span_noise_covariance(errors, np.array([0.0, 8.0])).tolist()  # (2 N)²/4 rows
    [[0.5]]
    """
    k = len(errors.labels)
    A = np.linalg.pinv(errors.columns.reshape(-1, k))
    rows = np.broadcast_to(np.asarray(row_variance, dtype=float),
                           errors.columns.shape[:2]).reshape(-1)
    return (A * rows) @ A.T


def in_record_units(values: dict[str, float]) -> dict[str, float]:
    """Channel errors keyed by their SI labels (:func:`channel_error_columns`) in the record's
    units and keys: offsets N (``offset_x_n``), gains and cross-talks % (``gain_x_pct``), lags
    ms (``lag_x_ms``).

    >>> in_record_units({"offset_y_n": 1.5, "gain_x": 0.002, "lag_y_s": 0.001})
    {'offset_y_n': 1.5, 'gain_x_pct': 0.2, 'lag_y_ms': 1.0}
    """
    record: dict[str, float] = {}
    for label, value in values.items():
        if label.startswith("lag"):
            record[label.replace("_s", "_ms")] = value * 1e3
        elif label.startswith(("gain", "crosstalk")):
            record[f"{label}_pct"] = value * 100.0
        else:
            record[label] = value
    return record


def row_noise_variance(scale: np.ndarray, noise_density: np.ndarray, row_rate_hz: float
                       ) -> np.ndarray:
    """(2,) m²: the variance per scaled force residual row (``scale`` (2,) m/N) of white noise
    with the force's ``noise_density`` (2,) N/√Hz (σ/√f of the raw channels) on rows sampled at
    ``row_rate_hz``: what the force noise puts into a sum over the rows of a column that varies
    slowly against the trial chain's low-pass (Σ bᵢεᵢ has the variance (σ²/f)·f_rows·Σ bᵢ²
    however the force was resampled within its band).

    >>> row_noise_variance(np.array([1.0, 0.5]), np.array([2.0, 2.0]), 100.0).tolist()
    [400.0, 100.0]
    """
    return (np.asarray(scale, dtype=float) * np.asarray(noise_density, dtype=float)) ** 2 * float(
        row_rate_hz)
