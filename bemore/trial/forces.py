"""The bar's force channels: read from a C3D's analog data, scaled, resampled to the markers.

Laboratories that study bar skills instrument the bar (strain gauges) and record its force as
analog channels beside the markers. ``configs/trial.toml [forces]`` declares them: for each
channel its label, the laboratory axis it measures along (``X``, ``Y`` or ``Z``, the markers'
axes), its gain (N per raw unit), offset (raw units, subtracted before the gain), sign and the
raw magnitude at which the amplifier saturates. The force they give, after
``sign · gain · (raw − offset)``, must be **the force the bar's supports (its springs and
dampers) exert on the bar's moving mass** — the model's ``−k·(bar − rest) − c·bar velocity``
per axis (docs/model.md, docs/trials.md "Bar forces"); a gauge that reads the opposite takes
``sign = -1``.

Preparation: each channel is scaled, checked (a channel that reaches its saturation, or holds
a non-finite sample, is refused with one line naming it), low-passed (zero-lag Butterworth at
``[forces] cutoff_hz``, the order of ``[filter]``) at the analog rate and sampled at the marker
frames (a C3D stores an integer number of analog samples per frame, the first at the frame's
time); the pipeline projects the lab vector onto the study plane and resamples it with the
markers. The noise of each channel is estimated from the raw samples as the markers' is
(:mod:`bemore.trial.noise`): the identification weights the force residuals by it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, PositiveFloat, model_validator

from bemore.config import Section
from bemore.errors import DataError
from bemore.trial.c3d import C3DFile, load_c3d, reason_of
from bemore.trial.filtering import low_pass
from bemore.trial.noise import kept_noise_fraction, marker_noise_m

LAB_AXES = ("X", "Y", "Z")


class ForceChannel(Section):
    """One analog channel of the bar's force."""

    label: str = Field(min_length=1, description="ANALOG:LABELS entry (subject prefix ignored)")
    axis: Literal["X", "Y", "Z"] = Field(description="laboratory axis it measures along")
    gain_n_per_unit: float = Field(1.0, description="N per raw unit (after ANALOG:SCALE)")
    offset: float = Field(0.0, description="raw units subtracted before the gain")
    sign: Literal[-1, 1] = 1
    saturation: PositiveFloat = Field(
        description="raw magnitude at or beyond which the amplifier is saturated")

    @model_validator(mode="after")
    def _gain_not_zero(self) -> ForceChannel:
        if self.gain_n_per_unit == 0.0:
            raise ValueError(f"channel {self.label}: gain_n_per_unit must not be 0")
        return self


class ForceSettings(Section):
    """``[forces]`` of configs/trial.toml: the bar's force channels and how they are used.

    ``use``: "auto" reads the channels when the file has all of them, none of them being no
    forces (a file with only some is refused); "required" refuses a file without them; "off"
    never reads them.
    """

    use: Literal["auto", "required", "off"] = "auto"
    cutoff_hz: PositiveFloat = Field(20.0, description="zero-lag low-pass before sampling (Hz)")
    channels: list[ForceChannel] = Field(default_factory=list)

    @model_validator(mode="after")
    def _channels(self) -> ForceSettings:
        labels = [channel.label for channel in self.channels]
        duplicated = sorted({label for label in labels if labels.count(label) > 1})
        if duplicated:
            raise ValueError(f"channels: {', '.join(duplicated)} listed more than once")
        if self.use == "required" and not self.channels:
            raise ValueError("use = 'required' needs at least one channel")
        return self


@dataclass(frozen=True)
class AnalogChannels:
    """Analog data of a C3D: (n_channels, S) samples at ``rate_hz`` (after ANALOG:SCALE,
    OFFSET and GEN_SCALE, as ezc3d gives them), labels, units, and samples per marker frame."""

    samples: np.ndarray
    labels: tuple[str, ...]
    units: tuple[str, ...]
    rate_hz: float
    per_frame: int
    source: str

    def find(self, label: str) -> int | None:
        """Index of ``label`` (a ``Subject:`` prefix on either side is ignored), else None."""
        bare = label.split(":")[-1].strip().lower()
        for index, name in enumerate(self.labels):
            if name.split(":")[-1].strip().lower() == bare:
                return index
        return None


@dataclass(frozen=True)
class BarForces:
    """The bar's force at the marker frames, laboratory frame.

    Attributes:
        t: (F,) s from the first marker frame; force_lab: (F, 3) N along X, Y, Z (axes no
        channel measures are 0); noise_n: (3,) estimated noise per axis (N, standard deviation
        of one raw analog sample; NaN for an axis without a channel); channels: labels read;
        analog_rate_hz: the channels' rate; source: the file; kept_noise_fraction: the share
        of a white noise's variance the force's low-pass keeps (so its noise per frame is
        noise_n·√kept_noise_fraction).
    """

    t: np.ndarray
    force_lab: np.ndarray
    noise_n: np.ndarray
    channels: tuple[str, ...]
    analog_rate_hz: float
    source: str
    kept_noise_fraction: float = 1.0

    def trimmed(self, keep: np.ndarray) -> BarForces:
        """The frames where ``keep`` (F,) is True, time from the first kept one."""
        t = self.t[keep]
        return BarForces(t - t[0], self.force_lab[keep], self.noise_n, self.channels,
                         self.analog_rate_hz, self.source, self.kept_noise_fraction)


def read_analogs(path: str | Path | C3DFile) -> AnalogChannels | None:
    """The analog channels of a C3D file (a path, or a :class:`~bemore.trial.c3d.C3DFile`
    already read; None if it has none); DataError on a damaged file."""
    _, acquisition, path = path if isinstance(path, C3DFile) else load_c3d(path)
    try:
        analog = acquisition["parameters"]["ANALOG"]
        point_rate = float(np.asarray(acquisition["parameters"]["POINT"]["RATE"]["value"])[0])
        samples = np.asarray(acquisition["data"]["analogs"], dtype=float)
        labels = list(analog["LABELS"]["value"]) if "LABELS" in analog else []
        units = list(analog["UNITS"]["value"]) if "UNITS" in analog else []
        rate = float(np.asarray(analog["RATE"]["value"]).ravel()[0]) if "RATE" in analog else 0.0
    except Exception as error:  # a parameter ezc3d did not fill
        raise DataError(f"{path}: unreadable C3D analog data ({reason_of(error)})") from None
    if samples.size == 0 or not labels:
        return None
    samples = samples.reshape(samples.shape[-2], samples.shape[-1])
    per_frame = round(rate / point_rate) if point_rate > 0 else 0
    if per_frame < 1 or abs(per_frame * point_rate - rate) > 1e-6 * rate:
        raise DataError(f"{path}: ANALOG:RATE {rate:g} Hz is not a whole multiple of "
                        f"POINT:RATE {point_rate:g} Hz")
    units = (units + [""] * len(labels))[: len(labels)]
    return AnalogChannels(samples, tuple(str(label).strip() for label in labels),
                          tuple(str(unit).strip() for unit in units), rate, per_frame,
                          str(path))


def bar_forces(analogs: AnalogChannels | None, settings: ForceSettings, n_frames: int,
               filter_order: int = 4) -> BarForces | None:
    """The bar's force (N, lab frame) at the ``n_frames`` marker frames from ``analogs``, per
    ``settings`` (see the module docstring); None when the file carries none and
    ``settings.use`` allows it. DataError (one line) for a missing, saturated or non-finite
    channel, or analog data shorter than the markers."""
    source = analogs.source if analogs is not None else "trial"
    if settings.use == "off" or not settings.channels:
        return None
    indices = {channel.label: analogs.find(channel.label) if analogs is not None else None
               for channel in settings.channels}
    missing = [label for label, index in indices.items() if index is None]
    if missing and (settings.use == "required" or len(missing) < len(indices)):
        have = ", ".join(analogs.labels) if analogs is not None else "no analog channels"
        raise DataError(f"{source}: bar force channel(s) {', '.join(missing)} missing from the "
                        f"file (it has {have}; [forces] in trial.toml)")
    if missing:
        return None
    assert analogs is not None
    needed = n_frames * analogs.per_frame
    if analogs.samples.shape[1] < needed - analogs.per_frame + 1:
        raise DataError(f"{source}: {analogs.samples.shape[1]} analog samples cover fewer than "
                        f"the {n_frames} marker frames ({analogs.per_frame} per frame)")
    force = np.zeros((n_frames, 3))
    noise = np.full(3, np.nan)
    pick = np.arange(n_frames) * analogs.per_frame
    for channel in settings.channels:
        raw = analogs.samples[indices[channel.label]]
        bad = np.flatnonzero(~np.isfinite(raw))
        if bad.size:
            raise DataError(f"{source}: bar force channel {channel.label} has no value at "
                            f"{bad[0] / analogs.rate_hz:.4f} s")
        saturated = np.flatnonzero(np.abs(raw) >= channel.saturation)
        if saturated.size:
            first_s = saturated[0] / analogs.rate_hz
            raise DataError(
                f"{source}: bar force channel {channel.label} saturated ({saturated.size} "
                f"samples at |raw| ≥ {channel.saturation:g} from {first_s:.4f} s): its force "
                "is unknown there")
        newtons = channel.sign * channel.gain_n_per_unit * (raw - channel.offset)
        smooth = low_pass(newtons[:, None], analogs.rate_hz, settings.cutoff_hz, filter_order,
                          source, setting="[forces] cutoff_hz")[:, 0]
        axis = LAB_AXES.index(channel.axis)
        force[:, axis] += smooth[pick]
        edge = round(analogs.rate_hz / settings.cutoff_hz)
        sigma = marker_noise_m(newtons[:, None, None], smooth[:, None, None], analogs.rate_hz,
                               settings.cutoff_hz, filter_order, edge)
        noise[axis] = sigma if np.isnan(noise[axis]) else float(np.hypot(noise[axis], sigma))
    t = np.arange(n_frames) * analogs.per_frame / analogs.rate_hz
    return BarForces(t, force, noise, tuple(channel.label for channel in settings.channels),
                     analogs.rate_hz, source,
                     kept_noise_fraction(analogs.rate_hz, settings.cutoff_hz, filter_order))
