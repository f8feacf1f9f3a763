"""Benchmark functions F1–F7 of the Grey Wolf Optimizer paper (Mirjalili et al. 2014, Table 1).

Each function takes a population ``X`` of shape (N, d) and returns (N,) costs. The definitions are
those of the authors' reference code, which produced the published table: F6 is
``Σ (x_i + 0.5)²`` (the code's form, not the floor step function printed in the paper's table) and
F7 adds one uniform random number in [0, 1) per evaluation, drawn from the Generator passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def f1_sphere(X: np.ndarray) -> np.ndarray:
    """F1: Σ x_i²."""
    return np.sum(X * X, axis=1)


def f2_schwefel_2_22(X: np.ndarray) -> np.ndarray:
    """F2: Σ |x_i| + Π |x_i|."""
    magnitude = np.abs(X)
    return np.sum(magnitude, axis=1) + np.prod(magnitude, axis=1)


def f3_schwefel_1_2(X: np.ndarray) -> np.ndarray:
    """F3: Σ_i (Σ_{j ≤ i} x_j)²."""
    return np.sum(np.cumsum(X, axis=1) ** 2, axis=1)


def f4_schwefel_2_21(X: np.ndarray) -> np.ndarray:
    """F4: max_i |x_i|."""
    return np.max(np.abs(X), axis=1)


def f5_rosenbrock(X: np.ndarray) -> np.ndarray:
    """F5: Σ 100·(x_{i+1} − x_i²)² + (x_i − 1)²."""
    head, tail = X[:, :-1], X[:, 1:]
    return np.sum(100.0 * (tail - head * head) ** 2 + (head - 1.0) ** 2, axis=1)


def f6_shifted_sphere(X: np.ndarray) -> np.ndarray:
    """F6 (authors' code): Σ (x_i + 0.5)²."""
    return np.sum((X + 0.5) ** 2, axis=1)


def f7_quartic_noise(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """F7: Σ i·x_i⁴ + uniform[0, 1) noise (one draw per point, from ``rng``)."""
    weights = np.arange(1, X.shape[1] + 1)
    return np.sum(weights * X**4, axis=1) + rng.random(X.shape[0])


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: its function, its box [−bound, bound]^d and the paper's GWO mean (Table 2)."""

    name: str
    bound: float
    published_mean: float
    function: Callable[..., np.ndarray]
    noisy: bool = False

    def cost(self, rng: np.random.Generator) -> Callable[[np.ndarray], np.ndarray]:
        """Vectorised cost ``X (N, d) -> (N,)``; the noisy F7 draws from ``rng``."""
        if self.noisy:
            return lambda X: self.function(X, rng)
        return self.function


# Published GWO means over 30 runs (dim 30, 30 wolves, 500 iterations): Mirjalili 2014, Table 2.
BENCHMARKS = {
    "F1": Benchmark("F1", 100.0, 6.59e-28, f1_sphere),
    "F2": Benchmark("F2", 10.0, 7.18e-17, f2_schwefel_2_22),
    "F3": Benchmark("F3", 100.0, 3.29e-6, f3_schwefel_1_2),
    "F4": Benchmark("F4", 100.0, 5.61e-7, f4_schwefel_2_21),
    "F5": Benchmark("F5", 30.0, 26.81258, f5_rosenbrock),
    "F6": Benchmark("F6", 100.0, 0.816579, f6_shifted_sphere),
    "F7": Benchmark("F7", 1.28, 0.002213, f7_quartic_noise, noisy=True),
}
