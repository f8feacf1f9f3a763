"""The two gymnast models of docs/model.md §1, loaded by name, and the bridge between them.

``load_model("real_gymnast")`` / ``load_model("exemplary_gymnast")`` read
``configs/models/<name>.toml``; any other argument is a path to a description file.
:func:`exemplary_parameters` turns a real-gymnast parameter set (e.g. an identified athlete)
into the exemplary model's parameters: the arms (hands + forearms + upper arms) and the body
(trunk + head + legs, feet pointed) lumped as rigid straight solids.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from bemore.errors import ModelError
from bemore.model.core import Model
from bemore.model.description import load_description
from bemore.paths import configs_dir

BUILT_IN = ("real_gymnast", "exemplary_gymnast")
ARM_BODIES = ("hand", "forearm", "upper_arm")
BODY_BODIES = ("trunk", "head", "thigh", "shank", "foot")

_cache: dict[str, Model] = {}


def model_path(name: str) -> Path:
    """Path of a built-in model description (``configs/models/<name>.toml``)."""
    return configs_dir() / "models" / f"{name}.toml"


def load_model(name_or_path: str | Path) -> Model:
    """A built-in model by name, or a description file by path (cached per path)."""
    text = str(name_or_path)
    path = model_path(text) if text in BUILT_IN else Path(text)
    if not path.suffix == ".toml" and not path.exists():
        raise ModelError(
            f"unknown model {text!r}: use one of {', '.join(BUILT_IN)} or a path to a TOML file"
        )
    key = str(path.resolve())
    if key not in _cache:
        _cache[key] = Model(load_description(path))
    return _cache[key]


def straight_posture(real: Model) -> np.ndarray:
    """Driven coordinates (n_driven,) of the straight posture (segment-table lengths, toes
    pointed: ankle = π/2)."""
    lengths = {b.name: b.length for b in real.description.bodies}
    values = {"forearm_length": lengths["forearm"], "upper_arm_length": lengths["upper_arm"],
              "ankle": np.pi / 2}
    return np.array([values.get(name, 0.0) for name in real.driven_coordinates])


def _lump(real: Model, V: np.ndarray, names: tuple[str, ...], origin: np.ndarray
          ) -> tuple[float, float, float]:
    """Mass (kg), CoM distance from ``origin`` along +x (m), inertia about the CoM (kg·m²)."""
    # Plain Python (no numba to load): one posture's frames are a few dozen operations.
    from bemore.model import kinematics as kin

    ws = kin.workspace(real.tree)
    nf = real.n_free
    qd = straight_posture(real)
    zeros_f = np.zeros(nf)
    kin.load_coordinates(real._T, zeros_f, zeros_f, qd, qd * 0, qd * 0, ws)
    kin.driven_angles(real._T, qd, ws)
    kin.positions(real._T, V, ws)
    index = {b.name: i for i, b in enumerate(real.description.bodies)}
    masses, centres, inertias = [], [], []
    for name in names:
        b = index[name]
        k = real.tree.body_frame[b]
        m, cx, cy, inertia = V[real.tree.body_fields[b]]
        ca, sa = ws[kin.CA, k], ws[kin.SA, k]
        centres.append([ws[kin.OX, k] + ca * cx - sa * cy, ws[kin.OY, k] + sa * cx + ca * cy])
        masses.append(m)
        inertias.append(inertia)
    masses_a, centres_a = np.array(masses), np.array(centres)
    total = masses_a.sum()
    com = (masses_a[:, None] * centres_a).sum(axis=0) / total
    spread = ((centres_a - com) ** 2).sum(axis=1)
    return float(total), float(com[0] - origin[0]), float(np.sum(inertias) + masses_a @ spread)


def exemplary_parameters(real_parameters: Mapping[str, float] | None = None,
                         real_model: str | Path = "real_gymnast") -> dict[str, float]:
    """Exemplary-model parameters (SI) from real-gymnast ones (default: the seed's values) of
    the description ``real_model`` (a built-in name or a path)."""
    real = load_model(real_model)
    P = real.parameter_matrix([dict(real_parameters or {})])
    V, valid = real.fields(P)
    if not valid[0]:
        raise ModelError("real-gymnast parameters give a body a non-positive mass or inertia")
    V = V[0]
    arm = _lump(real, V, ARM_BODIES, np.zeros(2))
    shoulder_x = sum(b.length for b in real.description.bodies if b.name in ARM_BODIES)
    body = _lump(real, V, BODY_BODIES, np.array([shoulder_x, 0.0]))
    # The parameters both models declare (bar mass, bar and shoulder spring-dampers) carry over
    # unchanged; the lumped solids are computed.
    exemplary = load_model("exemplary_gymnast")
    shared = [name for name in exemplary.parameter_names if name in real.parameter_names]
    values = {name: float(P[0, real.parameter_names.index(name)]) for name in shared}
    values.update({"arm.mass": arm[0], "arm.com": arm[1], "arm.inertia": arm[2],
                   "body.mass": body[0], "body.com": body[1], "body.inertia": body[2]})
    return values
