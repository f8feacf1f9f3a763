"""What the symbolic-model and exported-C tests share: the three descriptions, random
parameters and states, the symbolic models derived once per session."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from bemore.model import load_model
from bemore.model.symbolic import derive

FEATURES = Path(__file__).parent / "data" / "features.toml"
# The two built-in gymnast models (configs/models/) and a description with the features they
# do not use (tests/model/data/features.toml).
MODELS = ("real_gymnast", "exemplary_gymnast", str(FEATURES))


def model_id(name: str) -> str:
    """A short test id for a model name or path."""
    return Path(name).stem


@functools.cache
def symbolic(name: str):
    """(engine model, symbolic model) of a description, derived once per session."""
    model = load_model(name)
    return model, derive(model.description)


def random_parameters(model, rng: np.random.Generator) -> np.ndarray:
    """(1, n_parameters): every default × U(0.8, 1.2); a zero default (rest positions, the neck
    offset) becomes U(−0.02, 0.02). Masses stay positive (trunk.mass well below its budget)."""
    values = {}
    for name, default in model.default_parameters().items():
        values[name] = (default * rng.uniform(0.8, 1.2) if default != 0.0
                        else rng.uniform(-0.02, 0.02))
    P = model.parameter_matrix([values])
    assert model.fields(P)[1][0]
    return P


def random_state(model, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, q̇, q̈) over every coordinate (free then driven): angles U(−π, π), driven lengths
    U(0.15, 0.35) m, spring translations U(−0.05, 0.05) m, rates N(0, 3), accelerations N(0, 30)."""
    n = len(model.coordinates)
    q = rng.uniform(-np.pi, np.pi, n)
    for i, c in enumerate(model.coordinates):
        if "length" in c or c == "reach":
            q[i] = rng.uniform(0.15, 0.35)
        elif c.startswith(("bar_", "shoulder_a", "shoulder_p")) or c == "slide":
            q[i] = rng.uniform(-0.05, 0.05)
    return q, rng.normal(0.0, 3.0, n), rng.normal(0.0, 30.0, n)
