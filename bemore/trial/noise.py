"""The marker noise of a recording, estimated from the recording itself.

A fit is judged against the noise its data carries (:mod:`bemore.identify.verdict`): a mean
joint-centre distance of 0.4 mm is excellent on markers with 1 mm of noise and poor on markers
with 0.1 mm. The noise is read off the high-frequency part of the raw trajectories: what the
zero-lag low-pass of the trial preparation removes is mostly noise (human motion has little
power above the 6 Hz cutoff, white noise has most of its power there), and the exact fraction of
white noise the filter removes is known from its impulse response, so

    σ̂ = robust scale of (raw − low-passed) / √(fraction removed).

The motion's own content above the cutoff makes σ̂ an upper estimate (on synthetic circles at
1 mm: 1.0–1.1 mm, docs/identify.md, "Fit verdict").
"""

from __future__ import annotations

import numpy as np

from bemore.trial.filtering import butterworth_sos, forward_backward

MAD_TO_SIGMA = 1.482602218505602  # σ of a normal distribution per median absolute deviation


def removed_noise_fraction(rate_hz: float, cutoff_hz: float, order: int) -> float:
    """Fraction of a white noise's variance that the zero-lag Butterworth low-pass of
    ``order`` at ``cutoff_hz`` (Hz) removes at ``rate_hz`` (Hz), away from the ends.

    With h the filter's impulse response, the residual (δ − h) of a unit impulse carries
    ``(1 − h₀)² + Σ_{k≠0} h_k²`` of the variance.

    Checked on a long white noise (the fraction it measures agrees to its sampling error):

    >>> noise = np.random.default_rng(1).normal(size=(200_000, 1))
    >>> from bemore.trial.filtering import low_pass
    >>> measured = float(np.var(noise - low_pass(noise, 100.0, 6.0, 4)))
    >>> abs(measured - removed_noise_fraction(100.0, 6.0, 4)) < 0.01
    True
    """
    h = _impulse_response(rate_hz, cutoff_hz, order)
    residual = -h
    residual[h.size // 2] += 1.0
    return float(residual @ residual)


def kept_noise_fraction(rate_hz: float, cutoff_hz: float, order: int) -> float:
    """Fraction of a white noise's variance that the zero-lag Butterworth low-pass of
    ``order`` at ``cutoff_hz`` (Hz) keeps at ``rate_hz`` (Hz), away from the ends: Σ h_k² of its
    impulse response h (≈ 2·cutoff/rate: the share of the band it passes).

    >>> noise = np.random.default_rng(1).normal(size=(200_000, 1))
    >>> from bemore.trial.filtering import low_pass
    >>> measured = float(np.var(low_pass(noise, 2000.0, 20.0, 4)))
    >>> abs(measured / kept_noise_fraction(2000.0, 20.0, 4) - 1.0) < 0.05
    True
    """
    h = _impulse_response(rate_hz, cutoff_hz, order)
    return float(h @ h)


def _impulse_response(rate_hz: float, cutoff_hz: float, order: int) -> np.ndarray:
    """The zero-lag Butterworth low-pass's impulse response, centred (odd length, ≥ 40 time
    constants each side)."""
    length = int(40 * rate_hz / cutoff_hz) | 1
    impulse = np.zeros((length, 1))
    impulse[length // 2] = 1.0
    return forward_backward(butterworth_sos(order, cutoff_hz / (rate_hz / 2.0)), impulse)[:, 0]


def marker_noise_m(raw: np.ndarray, filtered: np.ndarray, rate_hz: float, cutoff_hz: float,
                   order: int, edge_frames: int) -> float:
    """Estimated standard deviation (m) of one marker coordinate's noise.

    ``raw`` and ``filtered``: (F, M, 3) gap-filled and low-passed positions (m) of the markers
    the trial uses; ``edge_frames`` frames at each end (where the filter's end fits act) are
    left out, as are non-finite samples. The scale is the median absolute deviation pooled over
    every coordinate, so a few bad samples do not move it. NaN if fewer than 20 samples remain.

    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(300) / 100.0
    >>> motion = np.sin(2 * np.pi * 0.5 * t)[:, None, None] * np.ones((1, 4, 3))
    >>> raw = motion + rng.normal(0.0, 0.001, motion.shape)
    >>> from bemore.trial.filtering import low_pass
    >>> filtered = low_pass(raw, 100.0, 6.0, 4)
    >>> round(float(marker_noise_m(raw, filtered, 100.0, 6.0, 4, 15)) * 1e3, 1)
    1.0
    """
    keep = slice(edge_frames, raw.shape[0] - edge_frames)
    difference = (raw[keep] - filtered[keep]).reshape(-1)
    difference = difference[np.isfinite(difference)]
    if difference.size < 20:
        return float("nan")
    scale = MAD_TO_SIGMA * float(np.median(np.abs(difference - np.median(difference))))
    return float(scale / np.sqrt(removed_noise_fraction(rate_hz, cutoff_hz, order)))
