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

That holds for white noise only, and many labs export markers already low-passed (at 10–15 Hz,
or spline-smoothed): their noise has no power left high above the chain's cutoff, where σ̂ is
read, while the band the chain keeps (what the fit sees) still carries all of it; σ̂ is then
several times too small (0.18–0.52 mm for 1 mm low-passed at 8–15 Hz, of which the chain keeps
what 0.85–1.0 mm of white noise leaves). Coloured noise (more power at low frequencies) does the
same. So the residual's spectrum is checked
(:func:`high_to_low_density`): a white noise's is flat, and a mean power density in the top of
the band (from half the Nyquist frequency) below ``FALL_OFF_LIMIT`` of that just above the
cutoff (2–3 cutoffs: where the chain's low-pass passes nothing and the motion has little
power) means the noise is not white. The noise the chain keeps cannot be read from such a
recording (below the cutoff it is indistinguishable from the motion), so σ̂ is then only a lower
bound (:class:`NoiseEstimate`), said so wherever it is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bemore.trial.filtering import butterworth_sos, forward_backward

MAD_TO_SIGMA = 1.482602218505602  # σ of a normal distribution per median absolute deviation
FALL_OFF_LIMIT = 0.6  # high-to-low density ratio below which the noise is not white. Measured
# (6 Hz chain; synthetic circles, 1.6 s at 100 Hz, 12 noise seeds): white noise of 0.1–3 mm
# 0.93–1.09 (1.5–2.5 s at 100 and 200 Hz with gaps, 3 seeds: 0.87–1.06; docs-kinematics circles,
# 6 seeds: 0.92–1.05); 1 mm low-passed at 8–15 Hz (Butterworth, orders 1–4, zero-lag or one
# pass) 0.000–0.032, averaged over 3–5 frames 0.09–0.28; AR(1) (0.5, 0.8) and pink noise
# 0.24–0.44 (docs/trials.md, "Marker noise")
NOISE_CEILING_M = 2e-3  # marker noise taken at most where the recording's is only a lower bound
# (m): a fit beyond the verdict's limits even at 2 mm is poor whatever the noise (optical markers
# carry 0.1–1 mm; bemore.identify.verdict)
LOW_BAND_CUTOFFS = (2.0, 3.0)  # the low band, in cutoffs (12–18 Hz at 6 Hz)
MIN_BAND_BINS = 3  # frequency bins each band needs for the check (else it is not made)


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


@dataclass(frozen=True)
class NoiseEstimate:
    """A recording's marker noise: ``sigma_m`` (m, :func:`marker_noise_m`) and
    ``high_to_low`` (:func:`high_to_low_density`; NaN: not checked, too short or too slow a
    recording). A ratio below ``FALL_OFF_LIMIT`` makes σ only a lower bound."""

    sigma_m: float
    high_to_low: float = float("nan")

    @property
    def lower_bound(self) -> bool:
        """True when the noise is not white and ``sigma_m`` is only a lower bound."""
        return bool(self.high_to_low < FALL_OFF_LIMIT)

    def note(self) -> str:
        """One line on a lower bound (why, and what it makes of the verdict and the standard
        errors); "" when the noise is white.

        >>> print(NoiseEstimate(0.00029, 0.01).note())  # doctest: +NORMALIZE_WHITESPACE
        marker noise ≥ 0.29 mm, a lower bound: the markers' noise is not white (its power density
        from half the Nyquist frequency is 0.01 × that just above the cutoff: low-passed before
        export, coloured noise or motion above the cutoff), so the noise the fit sees cannot be
        measured: the fit is judged good within this bound's limits, poor beyond those of 2 mm,
        else not judged, and the standard errors are lower bounds
        """
        if not self.lower_bound:
            return ""
        return (f"marker noise ≥ {self.sigma_m * 1e3:.2f} mm, a lower bound: the markers' noise "
                "is not white (its power density from half the Nyquist frequency is "
                f"{self.high_to_low:.2g} × that just above the cutoff: low-passed before export, "
                "coloured noise or motion above the cutoff), so the noise the fit sees cannot be "
                "measured: the fit is judged good within this bound's limits, poor beyond those "
                f"of {NOISE_CEILING_M * 1e3:g} mm, else not judged, and the standard errors are "
                "lower bounds")


def high_to_low_density(raw: np.ndarray, filtered: np.ndarray, rate_hz: float,
                        cutoff_hz: float, edge_frames: int) -> float:
    """Mean power density of (raw − filtered) from half the Nyquist frequency up (at least 3
    cutoffs) over its mean density at 2–3 cutoffs (Hz): ≈ 1 for white noise, well below 1 for
    markers low-passed before export or coloured noise.

    ``raw``, ``filtered``: (F, M, 3) positions (m) as :func:`marker_noise_m` takes them; the
    ``edge_frames`` at each end are left out, as are coordinates not finite throughout. The
    density is the Hann-windowed periodogram averaged over the coordinates. NaN when a band
    holds fewer than ``MIN_BAND_BINS`` frequencies (a short or slow recording).

    >>> rng = np.random.default_rng(0)
    >>> white = rng.normal(0.0, 0.001, (300, 4, 3))
    >>> from bemore.trial.filtering import low_pass
    >>> 0.8 < high_to_low_density(white, low_pass(white, 100.0, 6.0, 4), 100.0, 6.0, 15) < 1.25
    True
    >>> smooth = low_pass(white, 100.0, 12.0, 4)   # exported low-passed at 12 Hz
    >>> high_to_low_density(smooth, low_pass(smooth, 100.0, 6.0, 4), 100.0, 6.0, 15) < 0.01
    True
    """
    keep = slice(edge_frames, raw.shape[0] - edge_frames)
    difference = (raw[keep] - filtered[keep]).reshape(max(raw.shape[0] - 2 * edge_frames, 0),
                                                       -1)
    difference = difference[:, np.all(np.isfinite(difference), axis=0)]
    if difference.shape[0] < 2 or difference.shape[1] == 0:
        return float("nan")
    frequency = np.fft.rfftfreq(difference.shape[0], 1.0 / rate_hz)
    window = np.hanning(difference.shape[0])[:, None]
    power = np.mean(np.abs(np.fft.rfft((difference - difference.mean(axis=0)) * window,
                                       axis=0)) ** 2, axis=1)
    low = ((frequency >= LOW_BAND_CUTOFFS[0] * cutoff_hz)
           & (frequency < LOW_BAND_CUTOFFS[1] * cutoff_hz))
    high = frequency >= max(LOW_BAND_CUTOFFS[1] * cutoff_hz, rate_hz / 4.0)
    if low.sum() < MIN_BAND_BINS or high.sum() < MIN_BAND_BINS:
        return float("nan")
    low_power = float(np.mean(power[low]))
    return float(np.mean(power[high]) / low_power) if low_power > 0 else float("nan")


def marker_noise(raw: np.ndarray, filtered: np.ndarray, rate_hz: float, cutoff_hz: float,
                 order: int, edge_frames: int) -> NoiseEstimate:
    """The markers' noise (:class:`NoiseEstimate`): σ (m, :func:`marker_noise_m`) and whether
    it is white (:func:`high_to_low_density`); the arguments are :func:`marker_noise_m`'s."""
    return NoiseEstimate(marker_noise_m(raw, filtered, rate_hz, cutoff_hz, order, edge_frames),
                         high_to_low_density(raw, filtered, rate_hz, cutoff_hz, edge_frames))
