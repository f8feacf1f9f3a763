"""The labelled marker time series every reader returns, and label matching.

Time is one explicit axis, labels and units travel with the data, and positions are in metres
whatever the file used (readers convert at the boundary with :func:`metres_per_unit`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bemore.errors import DataError

# Length units a mocap file may declare, and how many metres one of them is.
_UNITS_M = {"mm": 1e-3, "millimeter": 1e-3, "millimeters": 1e-3, "cm": 1e-2, "m": 1.0,
            "meter": 1.0, "meters": 1.0, "metre": 1.0, "metres": 1.0}


def metres_per_unit(unit: str, source: str) -> float:
    """Metres per one ``unit`` (``"mm"`` → 0.001); an unknown unit raises DataError."""
    key = unit.strip().lower()
    if key not in _UNITS_M:
        raise DataError(f"{source}: unknown length unit {unit!r} (known: mm, cm, m)")
    return _UNITS_M[key]


def bare_label(label: str) -> str:
    """Label without its subject prefix: ``"Gymnast:C7"`` → ``"C7"``."""
    return label.rsplit(":", 1)[-1].strip()


@dataclass(frozen=True)
class Markers:
    """Marker trajectories of one recording.

    Attributes:
        t: (F,) sample times in s, strictly increasing (from the file, usually from 0).
        positions: (F, M, 3) positions in m in the laboratory frame; NaN where missing.
        labels: the M labels as written in the file (subject prefix kept).
        rate_hz: sampling rate in Hz.
        source: the file read.
        unit_in_file: the length unit the file declared (converted to m here).
        notes: anything the reader noticed but accepted (e.g. a frame count mismatch).
    """

    t: np.ndarray
    positions: np.ndarray
    labels: tuple[str, ...]
    rate_hz: float
    source: str
    unit_in_file: str = "m"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def n_frames(self) -> int:
        """Number of frames F."""
        return int(self.positions.shape[0])

    @property
    def duration_s(self) -> float:
        """Time from the first to the last frame (s)."""
        return float(self.t[-1] - self.t[0]) if self.n_frames else 0.0

    def find(self, name: str) -> int | None:
        """Index of the marker called ``name`` (with or without subject prefix), or None.

        An exact label match wins; otherwise the labels are compared without their prefixes.
        A bare name carried by two subjects is ambiguous and raises DataError.
        """
        if name in self.labels:
            return self.labels.index(name)
        wanted = bare_label(name)
        hits = [i for i, label in enumerate(self.labels) if bare_label(label) == wanted]
        if len(hits) > 1:
            found = ", ".join(self.labels[i] for i in hits)
            raise DataError(
                f"{self.source}: marker {name} is ambiguous ({found}); use the prefixed label"
            )
        return hits[0] if hits else None

    def marker(self, name: str) -> np.ndarray:
        """(F, 3) trajectory of ``name`` in m; a marker absent from the file raises DataError."""
        index = self.find(name)
        if index is None:
            raise DataError(f"{self.source}: marker {name} not found in the file")
        return self.positions[:, index, :]

    def with_positions(self, positions: np.ndarray, note: str | None = None) -> Markers:
        """A copy holding ``positions`` (same shape, m), with ``note`` appended to the notes."""
        notes = (*self.notes, note) if note else self.notes
        return Markers(self.t, positions, self.labels, self.rate_hz, self.source,
                       self.unit_in_file, notes)
