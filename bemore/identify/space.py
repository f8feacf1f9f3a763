"""The identified parameters' search box, and its normalisation to [0, 1] for the optimisers.

The box is the one of ``configs/identification.toml``, except the trunk-mass upper bound, which
is the one actually searched: ``bemore.settings.trunk_mass_upper_bound_kg`` (the thighs keep at
least ``[mass_budget] min_thigh_pair_mass_kg``). The space also carries the configured
``[initial_state]`` margins: the trial's nuisance unknowns (:mod:`bemore.identify.initial`)
are searched with the parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bemore.errors import ConfigError
from bemore.settings import Gymnast, Identification, InitialState, trunk_mass_upper_bound_kg


class Box:
    """Names with lower/upper bounds (SI) and the map to and from the unit cube the optimisers
    search; subclasses are dataclasses with ``names``, ``lower`` and ``upper``."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray

    @property
    def dim(self) -> int:
        """Number of unknowns."""
        return len(self.names)

    @property
    def width(self) -> np.ndarray:
        """upper − lower, per unknown (SI)."""
        return self.upper - self.lower

    def to_physical(self, X: np.ndarray) -> np.ndarray:
        """Normalised points (..., d) in [0, 1] → SI values (..., d)."""
        return self.lower + np.asarray(X, dtype=float) * self.width

    def to_normalised(self, P: np.ndarray) -> np.ndarray:
        """SI values (..., d) → normalised points (..., d) (0 = lower bound, 1 = upper)."""
        return (np.asarray(P, dtype=float) - self.lower) / self.width


@dataclass(frozen=True)
class ParameterSpace(Box):
    """Names, units and bounds (SI) of the identified parameters, in the configured order."""

    names: tuple[str, ...]
    units: tuple[str, ...]
    descriptions: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    seed_values: np.ndarray
    configured_upper: np.ndarray
    initial_state: InitialState | None = None  # None: simulate from the trial's own start

    @classmethod
    def from_config(
        cls, identification: Identification, gymnast: Gymnast, source: str = "identification.toml",
        body_mass_kg: float | None = None,
    ) -> ParameterSpace:
        """The searched box: configured bounds, trunk-mass upper bound from the mass budget.

        The configured trunk-mass bounds are the segment table's body's; for an athlete of
        ``body_mass_kg`` (None: the table's) both scale with her body mass.
        """
        from bemore.model.body import table_mass_kg

        scale = body_mass_kg / table_mass_kg(gymnast.segments) if body_mass_kg else 1.0
        parameters = identification.parameters
        lower = np.array([item.lower for item in parameters])
        configured = np.array([item.upper for item in parameters])
        upper = configured.copy()
        names = tuple(item.name for item in parameters)
        if "trunk.mass" in names:
            index = names.index("trunk.mass")
            lower[index] *= scale
            upper[index] = trunk_mass_upper_bound_kg(identification, gymnast, scale)
            if not lower[index] < upper[index]:
                raise ConfigError(
                    f"{source}: trunk.mass lower = {lower[index]:g} kg is not below the searched "
                    f"upper bound {upper[index]:g} kg (trunk+thighs total − "
                    "[mass_budget] min_thigh_pair_mass_kg)"
                )
        return cls(
            names=names,
            units=tuple(item.unit for item in parameters),
            descriptions=tuple(item.description for item in parameters),
            lower=lower,
            upper=upper,
            seed_values=np.array([item.seed_value for item in parameters]),
            configured_upper=configured,
            initial_state=identification.initial_state,
        )

    def without(self, names: tuple[str, ...] | list[str]) -> tuple[ParameterSpace,
                                                                    list[dict[str, Any]]]:
        """The space without ``names`` (parameters the trial cannot determine, held at their
        seed values) and those parameters' rows (:meth:`describe`'s, with ``seed_value`` and
        ``description``)."""
        keep = [k for k, name in enumerate(self.names) if name not in names]
        held = [{**self.describe()[k], "seed_value": float(self.seed_values[k]),
                 "description": self.descriptions[k]}
                for k, name in enumerate(self.names) if name in names]
        space = ParameterSpace(
            names=tuple(self.names[k] for k in keep), units=tuple(self.units[k] for k in keep),
            descriptions=tuple(self.descriptions[k] for k in keep), lower=self.lower[keep],
            upper=self.upper[keep], seed_values=self.seed_values[keep],
            configured_upper=self.configured_upper[keep], initial_state=self.initial_state)
        return space, held

    def as_dict(self, values: np.ndarray) -> dict[str, float]:
        """SI values (d,) → {name: value}."""
        return {name: float(value) for name, value in zip(self.names, values, strict=True)}

    def describe(self) -> list[dict[str, Any]]:
        """The box as JSON-ready rows (name, unit, lower, upper, configured upper)."""
        return [
            {
                "name": name,
                "unit": unit,
                "lower": float(low),
                "upper": float(high),
                "configured_upper": float(configured),
            }
            for name, unit, low, high, configured in zip(
                self.names, self.units, self.lower, self.upper, self.configured_upper, strict=True
            )
        ]
