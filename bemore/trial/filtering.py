"""Zero-lag low-pass filtering and resampling of trajectories."""

from __future__ import annotations

import numpy as np
from scipy.interpolate import make_interp_spline
from scipy.signal import butter, sosfiltfilt

from bemore.errors import DataError


def low_pass(
    samples: np.ndarray,
    rate_hz: float,
    cutoff_hz: float,
    order: int,
    source: str = "trial",
    edge_cycles: float = 0.9,
    edge: str = "extrapolate",
) -> np.ndarray:
    """Zero-lag Butterworth low-pass along axis 0 (forward-backward, so the gain is squared).

    ``samples`` (F, ...) at ``rate_hz``; ``cutoff_hz`` is the −3 dB frequency of one pass.
    The ends are padded from least-squares quadratics fitted over the first and last
    ``edge_cycles / cutoff_hz`` seconds (0.15 s at 6 Hz), so that a trial starting or ending
    mid-swing shows no edge transient: ``edge="extrapolate"`` continues the quadratic (session
    1's padding); ``edge="mirror"`` continues it plus the mirrored residuals
    (:func:`odd_extension`), so the end value is the fit's, not that of a noisy extrapolation.
    Raises DataError if the cutoff is not below Nyquist or the trial is too short.
    """
    nyquist = rate_hz / 2.0
    if not 0 < cutoff_hz < nyquist:
        raise DataError(
            f"{source}: filter cutoff {cutoff_hz:g} Hz must be below the Nyquist frequency "
            f"{nyquist:g} Hz ([filter] cutoff_hz)"
        )
    n_fit = max(5, round(edge_cycles * rate_hz / cutoff_hz))
    frames = samples.shape[0]
    if frames < n_fit:
        raise DataError(
            f"{source}: {frames} frames are too few to filter at {cutoff_hz:g} Hz (need at "
            f"least {n_fit}: edge_cycles = {edge_cycles:g})"
        )
    # Three time constants of the filter, as scipy's default padding.
    n_pad = max(10, round(3.0 * rate_hz / cutoff_hz))
    sos = butter(order, cutoff_hz / nyquist, btype="low", output="sos")
    if edge == "mirror":
        n_pad = min(n_pad, frames - 1)  # never more than the trial can mirror
        padded = odd_extension(samples, n_pad, n_fit)
    else:
        padded = np.concatenate(
            [_extrapolate(samples[:n_fit][::-1], n_pad)[::-1], samples,
             _extrapolate(samples[-n_fit:], n_pad)],
            axis=0,
        )
    return sosfiltfilt(sos, padded, axis=0, padlen=0)[n_pad:-n_pad]


def _extrapolate(window: np.ndarray, count: int) -> np.ndarray:
    """``count`` samples continuing ``window`` (W, ...) by its least-squares quadratic."""
    k = np.arange(window.shape[0], dtype=float)
    basis = np.stack([np.ones_like(k), k, k * k], axis=1)
    flat = window.reshape(window.shape[0], -1)
    coefficients, *_ = np.linalg.lstsq(basis, flat, rcond=None)
    ahead = np.arange(window.shape[0], window.shape[0] + count, dtype=float)
    future = np.stack([np.ones_like(ahead), ahead, ahead * ahead], axis=1) @ coefficients
    return future.reshape((count, *window.shape[1:]))


def odd_extension(samples: np.ndarray, n_pad: int, n_fit: int) -> np.ndarray:
    """``samples`` (F, ...) with ``n_pad`` samples added at each end: the least-squares
    quadratic p fitted to the ``n_fit`` samples nearest that end, continued, minus the mirrored
    residuals: ``x(−τ) = p(−τ) − (x(τ) − p(τ))`` (same units as ``samples``).

    Value, slope and curvature continue (a plain odd reflection flips the curvature), and a
    zero-lag Butterworth's output at the end is p's end value: every mirrored pair sums to
    p's even part 2(c0 + c2·τ²), whose τ² term the maximally flat filter does not see. The
    end carries the noise of a fit over ``n_fit`` samples, not that of the end sample.
    """
    return np.concatenate([_extension(samples, n_pad, n_fit)[::-1], samples,
                           _extension(samples[::-1], n_pad, n_fit)], axis=0)


def _extension(samples: np.ndarray, n_pad: int, n_fit: int) -> np.ndarray:
    """The ``n_pad`` samples before sample 0 of ``samples`` (F, ...), nearest first."""
    k = np.arange(n_fit, dtype=float)
    basis = np.stack([np.ones_like(k), k, k * k], axis=1)
    flat = samples[:n_fit].reshape(n_fit, -1)
    c, *_ = np.linalg.lstsq(basis, flat, rcond=None)
    tau = np.arange(1, n_pad + 1, dtype=float)[:, None]
    mirrored = samples[1 : n_pad + 1].reshape(n_pad, -1)
    even_part = 2.0 * (c[0] + c[2] * tau * tau)  # p(−τ) + p(τ)
    return (even_part - mirrored).reshape((n_pad, *samples.shape[1:]))


def start_value_and_rate(
    t: np.ndarray, samples: np.ndarray, window_s: float, degree: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Value and rate at ``t[0]`` of ``samples`` (F, ...) from a least-squares polynomial of
    ``degree`` fitted over ``t ≤ t[0] + window_s`` (at least degree + 3 samples); units of
    samples and per s."""
    count = max(degree + 3, int(np.searchsorted(t, t[0] + window_s + 1e-9)))
    if count > len(t):
        raise DataError(f"trial: {len(t)} frames are too few to fit the initial state")
    dt = t[:count] - t[0]
    basis = np.vander(dt, degree + 1, increasing=True)
    flat = samples[:count].reshape(count, -1)
    coefficients, *_ = np.linalg.lstsq(basis, flat, rcond=None)
    shape = samples.shape[1:]
    return coefficients[0].reshape(shape), coefficients[1].reshape(shape)


def uniform_times(duration_s: float, rate_hz: float) -> np.ndarray:
    """Times 0, 1/rate, … up to ``duration_s`` (s), computed as integers over the rate."""
    count = int(np.floor(duration_s * rate_hz + 1e-9)) + 1
    return np.arange(count) / rate_hz


def spline_derivatives(
    t: np.ndarray, samples: np.ndarray, t_new: np.ndarray, degree: int = 5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Value, first and second time derivatives of ``samples`` (F, ...) at ``t_new`` (s).

    An interpolating spline of ``degree`` (quintic by default, so that accelerations are
    smooth) through the samples; units are those of ``samples`` per s and per s².
    """
    spline = make_interp_spline(t, samples, k=degree, axis=0)
    return spline(t_new), spline.derivative(1)(t_new), spline.derivative(2)(t_new)
