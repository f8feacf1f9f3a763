"""Grey Wolf Optimizer (Mirjalili, Mirjalili & Lewis 2014), the form its authors published and ran.

The reference is the authors' MATLAB code, which produced the paper's table (docs/identify.md):

* positions are clipped to the box, then each wolf is evaluated and compared *in turn* with α, β
  and δ, with strict inequalities; a new α replaces α **without** demoting the old α to β (nor β
  to δ). Evaluating the whole pack in one call and then running that sequential comparison over
  the scores in pack order is exactly equivalent, and is what :func:`update_leaders` does;
* ``a = 2 − 2·l/L`` with ``l = 0 … L−1`` the iteration and ``L`` the number of iterations;
* ``A = 2a·r1 − a`` and ``C = 2·r2`` are drawn independently per wolf, per leader and per
  dimension; each wolf moves to the mean of ``X_k − A_k·|C_k·X_k − X|`` over the three leaders.

Named variants, never the default: ``demotion`` (a new α pushes the old α to β and β to δ),
``greedy`` (a wolf keeps its previous position when its new one is worse) and
``a_schedule="evaluations"`` (``a`` from the evaluations spent including the current pack, so it
reaches 0 at the last update).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from bemore.errors import OptimisationError


@dataclass(frozen=True)
class GWOOptions:
    """Variants of the Grey Wolf Optimizer; the defaults are the authors' 2014 form."""

    demotion: bool = False
    greedy: bool = False
    a_schedule: Literal["iteration", "evaluations"] = "iteration"


def update_leaders(
    leader_positions: np.ndarray,
    leader_scores: np.ndarray,
    positions: np.ndarray,
    scores: np.ndarray,
    demotion: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Compare each wolf in pack order with α, β, δ; return new (3, d) positions and (3,) scores.

    Authors' form (``demotion=False``): ``f < α`` → α; else ``α < f < β`` → β; else
    ``β < f < δ`` → δ — a new α leaves β and δ unchanged. ``demotion=True``: the later variant in
    which the old α becomes β and the old β becomes δ.
    """
    leader_positions = leader_positions.copy()
    leader_scores = leader_scores.copy()
    # α ≤ β ≤ δ always holds, so a wolf not better than δ at the start cannot change anything.
    candidates = np.flatnonzero(scores < leader_scores[2])
    if demotion:
        for index in candidates:
            _insert_with_demotion(leader_positions, leader_scores, positions[index], scores[index])
        return leader_positions, leader_scores
    # Plain Python floats: the scalar comparisons run once per wolf.
    alpha, beta, delta = leader_scores.tolist()
    sources = [-1, -1, -1]  # pack index that each leader now comes from (-1: unchanged)
    for index, fitness in zip(candidates.tolist(), scores[candidates].tolist(), strict=True):
        if fitness < alpha:
            alpha, sources[0] = fitness, index
        elif alpha < fitness < beta:
            beta, sources[1] = fitness, index
        elif beta < fitness < delta:
            delta, sources[2] = fitness, index
    leader_scores[:] = (alpha, beta, delta)
    for rank, index in enumerate(sources):
        if index >= 0:
            leader_positions[rank] = positions[index]
    return leader_positions, leader_scores


def _insert_with_demotion(
    leader_positions: np.ndarray, leader_scores: np.ndarray, position: np.ndarray, fitness: float
) -> None:
    """Demotion variant, in place: the wolf takes its rank and the leaders below it move down."""
    alpha, beta, delta = leader_scores
    if fitness < alpha:
        rank = 0
    elif alpha < fitness < beta:
        rank = 1
    elif beta < fitness < delta:
        rank = 2
    else:
        return
    leader_positions[rank + 1 :] = leader_positions[rank:2].copy()
    leader_scores[rank + 1 :] = leader_scores[rank:2].copy()
    leader_positions[rank] = position
    leader_scores[rank] = fitness


def move_pack(
    positions: np.ndarray, leader_positions: np.ndarray, a: float, rng: np.random.Generator
) -> np.ndarray:
    """New positions (N, d): mean over α, β, δ of ``X_k − A·|C·X_k − X|`` (not yet clipped).

    ``A = 2a·r1 − a`` and ``C = 2·r2`` with r1, r2 uniform on [0, 1), drawn per leader, per wolf
    and per dimension.
    """
    draws = rng.random((2, 3, *positions.shape))
    A = (2.0 * a) * draws[0] - a
    C = 2.0 * draws[1]
    leaders = leader_positions[:, None, :]
    steps = leaders - A * np.abs(C * leaders - positions[None, :, :])
    return (steps[0] + steps[1] + steps[2]) / 3.0


def a_coefficient(iteration: int, iterations: int, schedule: str = "iteration") -> float:
    """The coefficient ``a`` used after evaluating iteration ``iteration`` (0-based): 2 → 0."""
    spent = iteration if schedule == "iteration" else iteration + 1
    return 2.0 - 2.0 * spent / iterations


class GreyWolfOptimizer:
    """Ask/tell Grey Wolf Optimizer over the box [lower, upper] with ``pack`` wolves.

    ``ask()`` returns the pack's (clipped) positions to evaluate; ``tell(X, F)`` updates the
    leaders and moves the pack. ``done`` becomes true after ``iterations`` evaluations of the pack.
    """

    name = "gwo"

    def __init__(
        self,
        lower: np.ndarray,
        upper: np.ndarray,
        pack: int,
        iterations: int,
        seed: int | np.random.Generator = 0,
        options: GWOOptions | None = None,
    ) -> None:
        if pack < 2:
            raise OptimisationError(f"pack = {pack}: the Grey Wolf Optimizer needs 2 wolves")
        if iterations < 1:
            raise OptimisationError(f"iterations = {iterations}: must be at least 1")
        self.lower = np.asarray(lower, dtype=float)
        self.upper = np.asarray(upper, dtype=float)
        self.pack, self.iterations = int(pack), int(iterations)
        self.options = options or GWOOptions()
        if self.options.a_schedule not in ("iteration", "evaluations"):
            raise OptimisationError(
                f"GWO a_schedule = {self.options.a_schedule!r}: allowed iteration, evaluations"
            )
        self.rng = np.random.default_rng(seed)
        dim = self.lower.size
        self.positions = self.lower + self.rng.random((self.pack, dim)) * (self.upper - self.lower)
        # The authors initialise the leaders at the origin with infinite scores.
        self.leader_positions = np.zeros((3, dim))
        self.leader_scores = np.full(3, np.inf)
        self._kept_positions: np.ndarray | None = None
        self._kept_scores: np.ndarray | None = None
        self.iteration = 0

    @property
    def done(self) -> bool:
        """True once the iteration budget is used."""
        return self.iteration >= self.iterations

    def ask(self) -> np.ndarray:
        """Positions (pack, d) to evaluate, clipped to the box."""
        self.positions = np.clip(self.positions, self.lower, self.upper)
        return self.positions.copy()

    def tell(self, X: np.ndarray, F: np.ndarray) -> None:
        """Take the costs ``F`` (pack,) of the points ``X`` from :meth:`ask`; move the pack."""
        self.leader_positions, self.leader_scores = update_leaders(
            self.leader_positions, self.leader_scores, X, F, self.options.demotion
        )
        current = X
        if self.options.greedy:
            if self._kept_scores is not None:
                keep_new = np.less(F, self._kept_scores)
                current = np.where(keep_new[:, None], X, self._kept_positions)
                F = np.where(keep_new, F, self._kept_scores)
            self._kept_positions, self._kept_scores = current, F
        a = a_coefficient(self.iteration, self.iterations, self.options.a_schedule)
        self.positions = move_pack(current, self.leader_positions, a, self.rng)
        self.iteration += 1

    @property
    def best_x(self) -> np.ndarray:
        """Position of α."""
        return self.leader_positions[0].copy()

    @property
    def best_f(self) -> float:
        """Score of α."""
        return float(self.leader_scores[0])

    def describe(self) -> dict[str, object]:
        """Settings to record in a result."""
        return {"pack": self.pack, "iterations": self.iterations, **asdict(self.options)}
