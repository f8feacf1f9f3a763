"""The inertial mode: every segment's mass, centre of mass and inertia from the measured bar force.

After the kinematic fit (search + polish) the fitted model reproduces the markers within their
noise; its simulation is the trial's motion, smooth and complete (free coordinates of the bar,
hands and shoulders included). On that motion and the trial's driven coordinates the whole
system's momentum balance is linear in the 36 segment parameters π (4 per body, see
:mod:`bemore.identify.inertial`): Y(q, q̇, q̈)·π = F_bar, two rows per frame. Both sides are
low-passed with the same zero-lag filter (``[inertial] cutoff_hz``, the markers' cutoff: the
motion carries nothing faster; the filter is linear, so the equation still holds).

Only the two **force rows** are used. The third row of the regressor (the moment about the bar)
is evaluated on a motion the fitted model itself produced, so it holds exactly for the
parameters the kinematic fit simulated with (to the integrator's 0.005 N·m on a synthetic
trial) and for no other: it would only repeat the kinematic fit's assumptions (the table's
segment values) instead of measuring anything. The bar force is a measurement independent of
the markers.

The force rows see the total mass exactly, but not every segment's: a child's mass acts on the
bar like the same mass at its joint on the parent (the base-parameter regrouping of a serial
chain), and only the prismatic joints (bar and shoulder springs, the arm lengths) break that
up. The segment table is therefore the **prior** (a Gaussian: ``mass_spread``, ``com_spread_m``,
``inertia_spread`` of ``[inertial]``), the bar force the data, each row weighted by 1/σ with σ
the force residual's RMS per axis and the whole data block by √(N_eff/N), N_eff the number of
independent residuals (their autocorrelation: the filtered residuals of neighbouring frames are
the same error). The linear estimate is that weighted least squares with m ≥ 0 and I_o ≥ 0
(:func:`~bemore.identify.inertial.linear_estimate`), then the log-Cholesky fit from it
(:func:`~bemore.identify.inertial.consistent_fit`, J ≻ 0 throughout). Standard errors are the
posterior's (the same weighted normal equations with the prior), propagated to the centre of
mass and the inertia about it; a quantity is **determined** by the trial when its standard
error is below ``determined_share`` of its prior standard deviation (the bar force removed at
least that much of the table's uncertainty) **with a prior** :data:`PRIOR_WIDENING` **times
wider** (the data pin it, not the table), otherwise reported with the flag. The same test on
groups of segments (a segment with all it carries, a segment with its parent: :class:`MassGroup`)
says which masses the bar force determines together (the total, everything beyond the wrists,
the trunk with the head and legs) when no single segment's is.

Of the force channels' errors the kinematic fit fits (``[forces] fitted_channel_errors``;
:mod:`bemore.identify.force_channels`) the lag is fitted here the same way, its column (−Ḟ of
the filtered force) projected out of both sides before any estimate. The offsets and gains are
read as calibrated (:data:`INERTIAL_CHANNEL_ERRORS`): the inertial mode's masses are only as
good as the vertical channel's calibration, which the kinematic fit's own estimates of them
(``bar_forces.fitted_channel_errors``) let the lab check.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bemore.errors import DataError
from bemore.identify import inertial
from bemore.identify.force_channels import ForceChannelErrors

QUANTITIES = ("mass", "first_moment_x", "first_moment_y", "inertia_origin")
UNITS = ("kg", "kg·m", "kg·m", "kg·m²")
CORRELATION_FLOOR = 0.05  # residual autocorrelation below which lags are not summed
PRIOR_WIDENING = 10.0  # a quantity is determined when the data pin it under a prior this wide
FILTER_ORDER = 4  # Butterworth order of the regressor's low-pass (zero-lag: 8 in effect)
# The force channels' errors the inertial mode fits when the kinematic fit does: the lag only.
# A gain is the regression's mass scale (Y·π = (1 + g)·F for π scaled by 1 + g) and an offset
# its weight; fitted, they leave the total mass to the table (measured: 25.7 kg off at
# 11 standard errors on test_inertial_mode's trial), so the force is read as calibrated.
INERTIAL_CHANNEL_ERRORS = ("lag",)


@dataclass
class InertialParameter:
    """One regressor parameter of one body (SI: kg, kg·m, kg·m²).

    ``data_share``: 1 − (posterior variance / prior variance), the fraction of the table's
    uncertainty the bar force removed (0: the trial says nothing about it, 1: all of it).
    """

    name: str
    unit: str
    value: float
    table: float
    standard_error: float
    prior_standard_error: float
    data_share: float
    determined: bool


@dataclass
class SegmentInertia:
    """One segment: identified (log-Cholesky fit) against the table, in its body frame (m from
    its origin, x along the segment), with standard errors and whether the trial determines
    each quantity. ``j_min_eigenvalue``: the smallest eigenvalue of its 3×3 planar
    pseudo-inertia J (SI, > 0: physically consistent)."""

    body: str
    mass_kg: float
    mass_se_kg: float
    table_mass_kg: float
    mass_difference_kg: float
    mass_determined: bool
    com_m: list[float]
    com_se_m: list[float]
    table_com_m: list[float]
    com_difference_m: list[float]
    com_determined: list[bool]
    inertia_com_kgm2: float
    inertia_com_se_kgm2: float
    table_inertia_com_kgm2: float
    inertia_difference_kgm2: float
    inertia_determined: bool
    j_min_eigenvalue: float


@dataclass
class MassGroup:
    """The mass of a group of segments (kg): a segment with everything beyond it (away from the
    bar), or a segment with its parent; ``determined`` as for a segment."""

    bodies: list[str]
    mass_kg: float
    se_kg: float
    table_kg: float
    determined: bool


@dataclass
class InertialResult:
    """What the inertial mode found (JSON-ready through ``dataclasses.asdict``)."""

    segments: list[SegmentInertia]
    parameters: list[InertialParameter]
    groups: list[MassGroup]  # segment masses together: what a segment's own mass may not be
    total_mass_kg: float
    total_mass_se_kg: float
    table_total_mass_kg: float
    force_residual_rms_n: list[float]  # x, y at the consistent fit (filtered, N)
    table_force_residual_rms_n: list[float]  # x, y with the table's parameters (N)
    effective_samples: float  # independent force residuals (of 2·frames)
    determined_combinations: int  # directions of π whose prior SD the bar force halves
    singular_values: list[float]  # of the data rows, π in prior standard deviations
    frames: int
    cutoff_hz: float
    consistent_status: int  # scipy least_squares status of the log-Cholesky fit (> 0: converged)
    elapsed_s: float
    linear_estimate: list[float] = field(default_factory=list)  # π before the J ≻ 0 fit
    # The force channels' errors fitted with π (projected out, as in the kinematic fit).
    fitted_channel_errors: list[str] = field(default_factory=list)

    @property
    def undetermined(self) -> list[str]:
        """Segment quantities the trial does not determine ("trunk.mass", "head.com_y", …)."""
        names = []
        for row in self.segments:
            if not row.mass_determined:
                names.append(f"{row.body}.mass")
            names += [f"{row.body}.com_{axis}" for axis, ok in zip("xy", row.com_determined,
                                                                   strict=True) if not ok]
            if not row.inertia_determined:
                names.append(f"{row.body}.inertia")
        return names


def prior_sigma(table: np.ndarray, settings: Any) -> np.ndarray:
    """Standard deviations (4·n,) of the table's π under ``settings`` (``InertialMode``): mass
    ``mass_spread``·m, first moment √((mass_spread·h)² + (m·com_spread_m)²), inertia about the
    origin ``inertia_spread``·I_o (floors 1e-3 kg, 1e-4 kg·m², SI)."""
    pi = np.asarray(table, dtype=float).reshape(-1, 4)
    m = np.maximum(pi[:, 0], 1e-3)
    sigma = np.empty_like(pi)
    sigma[:, 0] = settings.mass_spread * m
    for j in (1, 2):
        sigma[:, j] = np.hypot(settings.mass_spread * pi[:, j], m * settings.com_spread_m)
    sigma[:, 3] = np.maximum(settings.inertia_spread * pi[:, 3], 1e-4)
    return sigma.reshape(-1)


def effective_samples(residuals: np.ndarray) -> float:
    """Independent samples among ``residuals`` (F, k) (k series pooled): F·k / τ with
    τ = 1 + 2·Σ ρ_lag (Bartlett weights) over the lags until the pooled autocorrelation ρ falls
    below :data:`CORRELATION_FLOOR`."""
    r = np.asarray(residuals, dtype=float)
    r = r - r.mean(axis=0)
    frames = r.shape[0]
    variance = float(np.sum(r * r))
    if variance <= 0.0:
        return float(r.size)
    rho = []
    for lag in range(1, frames // 2):
        value = float(np.sum(r[lag:] * r[:-lag])) / variance
        if value < CORRELATION_FLOOR:
            break
        rho.append(value)
    bandwidth = len(rho) + 1
    tau = 1.0 + 2.0 * sum((1.0 - (k + 1) / (bandwidth + 1)) * value
                          for k, value in enumerate(rho))
    return float(r.size / max(tau, 1.0))


def _derived(block: np.ndarray, covariance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(m, c_x, c_y, I_c) of one body's π (4,) and their standard errors from π's covariance
    (4, 4) by the linearised map c = h/m, I_c = I_o − |h|²/m."""
    m, hx, hy, io = block
    m_safe = max(m, 1e-9)
    values = np.array([m, hx / m_safe, hy / m_safe, io - (hx * hx + hy * hy) / m_safe])
    G = np.array([
        [1.0, 0.0, 0.0, 0.0],
        [-hx / m_safe**2, 1.0 / m_safe, 0.0, 0.0],
        [-hy / m_safe**2, 0.0, 1.0 / m_safe, 0.0],
        [(hx * hx + hy * hy) / m_safe**2, -2.0 * hx / m_safe, -2.0 * hy / m_safe, 1.0],
    ])
    return values, np.sqrt(np.maximum(np.diag(G @ covariance @ G.T), 0.0))


def mass_groups(model: Any) -> list[np.ndarray]:
    """Body indices of the groups of :class:`MassGroup`: every segment with all it carries
    (its subtree, away from the bar; the bar's is the whole system), then every segment with
    its parent, each group once and of 2 or more bodies."""
    bodies = model.description.bodies
    names = [body.name for body in bodies]
    parent = [names.index(body.parent) if body.parent in names else -1 for body in bodies]
    groups: list[tuple[int, ...]] = []
    for b in range(len(bodies)):
        members, frontier = {b}, [b]
        while frontier:
            children = [k for k in range(len(bodies)) if parent[k] in frontier]
            members.update(children)
            frontier = children
        groups.append(tuple(sorted(members)))
    groups += [tuple(sorted((parent[b], b))) for b in range(len(bodies)) if parent[b] >= 0]
    unique = []
    for group in groups:
        if len(group) >= 2 and group not in unique:
            unique.append(group)
    return [np.array(group) for group in unique]


def fitted_motion(problem: Any, x: np.ndarray) -> tuple[np.ndarray, inertial.FrameMotion]:
    """The engine parameters P (n_parameters,) of the fitted point ``x`` (normalised) of the
    identification ``problem`` and the frame kinematics of its simulation along the trial's
    driven motion (free accelerations by second-order differences of the simulated rates)."""
    from bemore.model import simulate

    P, q0, qd0 = problem.members(np.atleast_2d(x))
    sim = simulate(problem.model, P, problem.motion, q0, qd0, outputs=("free_q", "free_qd"))
    if not np.all(np.isfinite(sim.free_qd)):
        raise DataError("inertial mode: the fitted model cannot be simulated over the trial")
    t = problem.motion.t
    qf, vf = sim.free_q[0], sim.free_qd[0]
    af = np.gradient(vf, t, axis=0, edge_order=2)
    m = problem.motion
    return P[0], inertial.frame_motion(problem.model, P[0], qf, vf, af, m.q, m.qd, m.qdd)


def table_body(problem: Any, P: np.ndarray) -> np.ndarray:
    """Engine parameters (n_parameters,) of the segment table (``configs/gymnast.toml``) scaled
    to her body: the problem's ``body`` (masses, CoMs and gyrations of the table scaled to her
    mass and lengths) and, for the three the kinematic fit identifies, the table's too — the
    trunk's share of the trunk+thighs mass, the trunk's CoM at the table's fraction of her
    shoulder-to-hip length (``trunk.neck_to_hip`` − the fitted ``neck.offset`` of P), the
    thighs' at the table's fraction of their length. Other parameters: the model's defaults."""
    from bemore.settings import load_gymnast

    model = problem.model
    names = model.parameter_names
    values = dict(zip(names, model.parameter_matrix([problem.body])[0], strict=True))
    segments = load_gymnast().segments
    trunk, thigh = segments.get("trunk"), segments.get("thigh")
    if trunk is not None and thigh is not None and {"trunk.mass", "trunk_thighs.mass"} <= set(
            names):
        share = trunk.mass_kg * trunk.count / (trunk.mass_kg * trunk.count
                                               + thigh.mass_kg * thigh.count)
        values["trunk.mass"] = share * values["trunk_thighs.mass"]
    if trunk is not None and {"trunk.com", "trunk.neck_to_hip", "neck.offset"} <= set(names):
        shoulder_to_hip = values["trunk.neck_to_hip"] - P[names.index("neck.offset")]
        values["trunk.com"] = trunk.com_from_proximal_m / trunk.length_m * shoulder_to_hip
    if thigh is not None and {"thigh.com", "thigh.length"} <= set(names):
        values["thigh.com"] = thigh.com_from_proximal_m / thigh.length_m * values["thigh.length"]
    return model.parameter_matrix([values])[0]


def identify_inertial(problem: Any, x: np.ndarray, settings: Any) -> InertialResult:
    """Every segment's inertial parameters from the bar force of ``problem`` (an
    IdentificationProblem with bar forces) on the motion of its fitted point ``x``, under
    ``settings`` (``bemore.settings.InertialMode``): the module docstring's method. DataError
    when the trial has no bar forces."""
    from bemore.trial.filtering import low_pass

    started = time.perf_counter()
    if not getattr(problem, "has_forces", False):
        raise DataError("inertial mode: the trial has no bar forces (configs/trial.toml "
                        "[forces]; identification.toml [forces] use = true)")
    model = problem.model
    P, motion = fitted_motion(problem, x)
    rate_hz = 1.0 / float(np.median(np.diff(problem.motion.t)))
    Y = inertial.regressor(model, P, motion)[:, :2]  # the force rows (module docstring)
    frames, n = Y.shape[0], Y.shape[-1]
    filtered = low_pass(np.concatenate([Y.reshape(frames, -1), problem.bar_force], axis=1),
                        rate_hz, settings.cutoff_hz, FILTER_ORDER, "inertial mode",
                        setting="[inertial] cutoff_hz")
    edge = round(0.5 * rate_hz / settings.cutoff_hz)  # the filter's ends left out
    if frames - 2 * edge < 10 * n:
        raise DataError(f"inertial mode: the trial is too short ({frames} frames) for the "
                        f"{n} segment parameters at {settings.cutoff_hz:g} Hz")
    Y = filtered[edge:frames - edge, : 2 * n].reshape(-1, 2, n)
    f = filtered[edge:frames - edge, 2 * n:]
    channels = getattr(problem, "channel_errors", None)
    kinds = tuple(kind for kind in (channels.kinds if channels is not None else ())
                  if kind in INERTIAL_CHANNEL_ERRORS)
    if kinds:
        # The force's lag, when the kinematic fit fits it, is fitted here too: projected out
        # of both sides (bemore.identify.force_channels).
        fitted = ForceChannelErrors.of_force(f, problem.motion.t[edge:frames - edge],
                                             np.ones(2), kinds)
        Y = np.moveaxis(fitted.project(np.moveaxis(Y, -1, 0)), 0, -1)
        f = fitted.project(f)
    table = inertial.table_parameters(model, table_body(problem, P))
    sigma_prior = prior_sigma(table, settings)

    # Weights: 1/σ per axis (the residual's RMS) × √(N_eff/N); refined from the estimate.
    sigma = np.sqrt(np.mean((np.einsum("frn,n->fr", Y, table) - f) ** 2, axis=0))
    sigma = np.maximum(sigma, 1e-3 * np.sqrt(np.mean(f**2, axis=0)))
    share = 1.0
    estimate = table
    for _ in range(3):
        weights = np.broadcast_to(np.sqrt(share) / sigma, f.shape)
        estimate = inertial.linear_estimate(Y, f, table, weights=weights,
                                            prior_sigma=sigma_prior)
        residual = np.einsum("frn,n->fr", Y, estimate) - f
        sigma = np.maximum(np.sqrt(np.mean(residual**2, axis=0)), 1e-9)
        share = effective_samples(residual / sigma) / residual.size
    weights = np.broadcast_to(np.sqrt(share) / sigma, f.shape)

    start = estimate.copy()
    try:
        theta0 = inertial.log_cholesky_of(start)
    except DataError:  # a bound active (m = 0 or I_o = 0): start from the table instead
        theta0 = inertial.log_cholesky_of(table)
    fit = inertial.consistent_fit(Y, f, table, theta0, weights=weights,
                                  prior_sigma=sigma_prior)
    pi = fit.parameters

    # Posterior covariance of π: the weighted normal equations with the prior.
    A = Y.reshape(-1, n) * weights.reshape(-1)[:, None]
    covariance = np.linalg.inv(A.T @ A + np.diag(1.0 / sigma_prior**2))
    se = np.sqrt(np.diag(covariance))
    # The same with a prior PRIOR_WIDENING times wider: what the data alone pin down.
    wide = np.linalg.inv(A.T @ A + np.diag(1.0 / (PRIOR_WIDENING * sigma_prior) ** 2))
    se_wide = np.sqrt(np.diag(wide))
    scaled = A * sigma_prior[None, :]
    singular = np.linalg.svd(scaled, compute_uv=False)
    # Along a direction with singular value s (prior units) the posterior SD is 1/√(1 + s²).
    needed = np.sqrt(1.0 / settings.determined_share**2 - 1.0)
    bodies = [body.name for body in model.description.bodies]
    parameters = []
    for k in range(n):
        b, j = divmod(k, 4)
        parameters.append(InertialParameter(
            f"{bodies[b]}.{QUANTITIES[j]}", UNITS[j], float(pi[k]), float(table[k]),
            float(se[k]), float(sigma_prior[k]), float(1.0 - (se[k] / sigma_prior[k]) ** 2),
            bool(se_wide[k] < settings.determined_share * sigma_prior[k])))
    segments = []
    prior_covariance = np.diag(sigma_prior**2)
    eigen = np.linalg.eigvalsh(fit.J)
    for b, body in enumerate(bodies):
        block = slice(4 * b, 4 * b + 4)
        value, error = _derived(pi[block], covariance[block, block])
        reference, reference_error = _derived(table[block], prior_covariance[block, block])
        data_error = _derived(pi[block], wide[block, block])[1]
        determined = data_error < settings.determined_share * reference_error
        segments.append(SegmentInertia(
            body, float(value[0]), float(error[0]), float(reference[0]),
            float(value[0] - reference[0]), bool(determined[0]),
            [float(v) for v in value[1:3]], [float(v) for v in error[1:3]],
            [float(v) for v in reference[1:3]], [float(v) for v in value[1:3] - reference[1:3]],
            [bool(v) for v in determined[1:3]],
            float(value[3]), float(error[3]), float(reference[3]),
            float(value[3] - reference[3]), bool(determined[3]), float(eigen[b].min())))
    groups = [MassGroup(bodies=[bodies[b] for b in members], mass_kg=float(pi[4 * members].sum()),
                        se_kg=float(np.sqrt(covariance[np.ix_(4 * members, 4 * members)].sum())),
                        table_kg=float(table[4 * members].sum()),
                        determined=bool(np.sqrt(wide[np.ix_(4 * members, 4 * members)].sum())
                                        < settings.determined_share * np.sqrt(
                                            np.sum(sigma_prior[4 * members] ** 2))))
              for members in mass_groups(model)]
    ones = np.zeros(n)
    ones[0::4] = 1.0
    rms = np.sqrt(np.mean((np.einsum("frn,n->fr", Y, pi) - f) ** 2, axis=0))
    table_rms = np.sqrt(np.mean((np.einsum("frn,n->fr", Y, table) - f) ** 2, axis=0))
    return InertialResult(
        segments=segments, parameters=parameters, groups=groups,
        total_mass_kg=float(pi[0::4].sum()),
        total_mass_se_kg=float(np.sqrt(ones @ covariance @ ones)),
        table_total_mass_kg=float(table[0::4].sum()),
        force_residual_rms_n=[float(v) for v in rms],
        table_force_residual_rms_n=[float(v) for v in table_rms],
        effective_samples=float(share * f.size),
        determined_combinations=int(np.sum(singular >= needed)),
        singular_values=[float(v) for v in singular],
        frames=int(f.shape[0]), cutoff_hz=float(settings.cutoff_hz),
        consistent_status=int(fit.status), elapsed_s=time.perf_counter() - started,
        linear_estimate=[float(v) for v in estimate], fitted_channel_errors=list(kinds))
