"""The Grey Wolf Optimizer's pieces: leader update, coefficient a, pack move, ask/tell."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.errors import OptimisationError
from bemore.optimize.gwo import (
    GreyWolfOptimizer,
    GWOOptions,
    a_coefficient,
    move_pack,
    update_leaders,
)

# Four wolves (rows) with costs 5, 3, 4, 1, evaluated in this order.
POSITIONS = np.array([[5.0, 5.0], [3.0, 3.0], [4.0, 4.0], [1.0, 1.0]])
SCORES = np.array([5.0, 3.0, 4.0, 1.0])


def fresh_leaders() -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((3, 2)), np.full(3, np.inf)


def test_authors_form_does_not_demote_the_old_alpha() -> None:
    # 5 → α; 3 < α → α (β stays empty); 4 between α and β → β; 1 → α. δ never filled.
    positions, scores = update_leaders(*fresh_leaders(), POSITIONS, SCORES)
    assert scores.tolist() == [1.0, 4.0, np.inf]
    assert positions.tolist() == [[1.0, 1.0], [4.0, 4.0], [0.0, 0.0]]


def test_demotion_variant_pushes_leaders_down() -> None:
    # 5 → α; 3 → α, 5 → β; 4 → β, 5 → δ; 1 → α, 3 → β, 4 → δ.
    positions, scores = update_leaders(*fresh_leaders(), POSITIONS, SCORES, demotion=True)
    assert scores.tolist() == [1.0, 3.0, 4.0]
    assert positions[:, 0].tolist() == [1.0, 3.0, 4.0]


def test_leaders_are_kept_across_iterations_and_ties_are_ignored() -> None:
    leaders = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]), np.array([1.0, 2.0, 3.0])
    # Equal to α, equal to β, worse than δ: nothing changes; 2.5 replaces δ only.
    X = np.array([[9.0, 9.0], [8.0, 8.0], [7.0, 7.0], [6.0, 6.0]])
    positions, scores = update_leaders(*leaders, X, np.array([1.0, 2.0, 4.0, 2.5]))
    assert scores.tolist() == [1.0, 2.0, 2.5]
    assert positions[2].tolist() == [6.0, 6.0]


def test_a_decreases_linearly_from_two() -> None:
    assert a_coefficient(0, 50) == 2.0
    assert a_coefficient(25, 50) == 1.0
    assert a_coefficient(49, 50) == pytest.approx(0.04)
    assert a_coefficient(49, 50, "evaluations") == 0.0


def test_with_a_zero_every_wolf_moves_to_the_mean_of_the_leaders() -> None:
    leaders = np.array([[0.0, 3.0], [3.0, 0.0], [6.0, 6.0]])
    pack = np.random.default_rng(1).random((5, 2))
    moved = move_pack(pack, leaders, 0.0, np.random.default_rng(2))
    assert np.allclose(moved, [[3.0, 3.0]] * 5)


def test_with_a_two_wolves_can_land_beyond_the_leaders() -> None:
    # |A| up to 2: exploration reaches outside the leaders' hull (why positions are clipped).
    leaders = np.full((3, 1), 0.5)
    moved = move_pack(np.full((2000, 1), 0.5), leaders, 2.0, np.random.default_rng(3))
    assert moved.min() < 0.0 and moved.max() > 1.0


def test_asked_positions_are_clipped_to_the_box() -> None:
    optimiser = GreyWolfOptimizer(np.zeros(3), np.ones(3), pack=50, iterations=5, seed=0)
    for _ in range(5):
        X = optimiser.ask()
        assert X.min() >= 0.0 and X.max() <= 1.0
        optimiser.tell(X, np.sum((X - 0.9) ** 2, axis=1))
    assert optimiser.done


def run_sphere(seed: int, options: GWOOptions | None = None) -> GreyWolfOptimizer:
    optimiser = GreyWolfOptimizer(np.zeros(4), np.ones(4), 20, 30, seed=seed, options=options)
    while not optimiser.done:
        X = optimiser.ask()
        optimiser.tell(X, np.sum((X - 0.25) ** 2, axis=1))
    return optimiser


def test_same_seed_same_run_other_seed_other_run() -> None:
    assert run_sphere(4).best_f == run_sphere(4).best_f
    assert run_sphere(4).best_f != run_sphere(5).best_f
    assert run_sphere(4).best_f < 1e-3


def test_greedy_variant_never_worsens_a_wolf() -> None:
    optimiser = GreyWolfOptimizer(
        np.zeros(4), np.ones(4), 20, 10, seed=0, options=GWOOptions(greedy=True)
    )
    previous = None
    while not optimiser.done:
        X = optimiser.ask()
        optimiser.tell(X, np.sum((X - 0.25) ** 2, axis=1))
        if previous is not None:
            assert np.all(optimiser._kept_scores <= previous)
        previous = optimiser._kept_scores.copy()


def test_a_pack_of_one_is_refused() -> None:
    with pytest.raises(OptimisationError, match="pack = 1"):
        GreyWolfOptimizer(np.zeros(2), np.ones(2), pack=1, iterations=10)


def test_unknown_a_schedule_is_refused() -> None:
    with pytest.raises(OptimisationError, match="a_schedule"):
        GreyWolfOptimizer(np.zeros(2), np.ones(2), 5, 10, options=GWOOptions(a_schedule="x"))
