"""Other algorithms behind the GWO's ask/tell interface: PSO (pyswarms), DE and CMA-ES (pymoo).

Each adapter converts between bemore's batches (points (N, d) in the problem's box, costs (N,))
and its library's own objects, here and nowhere else. The driver evaluates the population, so the
libraries never call the cost themselves, and it keeps and re-evaluates the best point itself.

Randomness is passed in: pymoo takes a seed; pyswarms draws from NumPy's *global* generator, so
each pyswarms step runs inside :func:`_seeded_global_numpy`, which seeds the global generator from
the adapter's own Generator and restores the previous global state afterwards.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np

from bemore.errors import OptimisationError


@contextlib.contextmanager
def _seeded_global_numpy(rng: np.random.Generator) -> Iterator[None]:
    """Run a block with NumPy's global generator seeded from ``rng``; restore it afterwards."""
    saved = np.random.get_state()
    np.random.seed(int(rng.integers(2**32)))
    try:
        yield
    finally:
        np.random.set_state(saved)


class _Budget:
    """Common bookkeeping: box, population size, iteration budget, settings."""

    name = ""

    def __init__(self, lower: np.ndarray, upper: np.ndarray, pack: int, iterations: int) -> None:
        if pack < 2:
            raise OptimisationError(f"pack = {pack}: {self.name} needs at least 2 members")
        self.lower = np.asarray(lower, dtype=float)
        self.upper = np.asarray(upper, dtype=float)
        self.pack, self.iterations = int(pack), int(iterations)
        self.iteration = 0
        self.settings: dict[str, Any] = {}

    @property
    def done(self) -> bool:
        """True once the iteration budget is used (or the library stopped by itself)."""
        return self.iteration >= self.iterations

    def describe(self) -> dict[str, Any]:
        """Settings to record in a result."""
        return {"pack": self.pack, "iterations": self.iterations, **self.settings}


@contextlib.contextmanager
def quiet_pyswarms_reporter() -> Iterator[None]:
    """Import and construct pyswarms without its Reporter's side effects.

    Each pyswarms Reporter (one is made when pyswarms is imported, one per optimiser) calls
    ``logging.config.dictConfig`` with a root handler writing ``report.log`` in the current
    folder, unless the ``LOG_CFG`` variable names a configuration: a user's ``bemore identify
    --algorithm pso`` would leave that file behind and reroute every library's logging into it.
    Here ``LOG_CFG`` names an incremental (no-op) configuration while pyswarms is used.
    """
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as config:
        config.write("version: 1\nincremental: true\n")
    previous = os.environ.get("LOG_CFG")
    os.environ["LOG_CFG"] = config.name
    try:
        yield
    finally:
        if previous is None:
            del os.environ["LOG_CFG"]
        else:
            os.environ["LOG_CFG"] = previous
        os.unlink(config.name)


class PyswarmsPSO(_Budget):
    """Global-best PSO of pyswarms (``GlobalBestPSO``), one swarm step per tell.

    Defaults: Clerc's constriction coefficients (w = 0.7298, c1 = c2 = 1.49618) and particles that
    leave the box are put back on its nearest face.
    """

    name = "pso"

    def __init__(
        self,
        lower: np.ndarray,
        upper: np.ndarray,
        pack: int,
        iterations: int,
        seed: int | np.random.Generator = 0,
        w: float = 0.7298,
        c1: float = 1.49618,
        c2: float = 1.49618,
    ) -> None:
        super().__init__(lower, upper, pack, iterations)
        with quiet_pyswarms_reporter():
            from pyswarms.single.global_best import GlobalBestPSO

        self.rng = np.random.default_rng(seed)
        self.settings = {"w": w, "c1": c1, "c2": c2, "library": "pyswarms GlobalBestPSO"}
        width = self.upper - self.lower
        start = self.lower + self.rng.random((self.pack, self.lower.size)) * width
        with _seeded_global_numpy(self.rng), quiet_pyswarms_reporter():
            self.optimizer = GlobalBestPSO(
                n_particles=self.pack,
                dimensions=self.lower.size,
                options={"w": w, "c1": c1, "c2": c2},
                bounds=(self.lower, self.upper),
                bh_strategy="nearest",
                init_pos=start,
            )
        swarm = self.optimizer.swarm
        # What GlobalBestPSO.optimize does before its loop.
        self.optimizer.bh.memory = swarm.position
        self.optimizer.vh.memory = swarm.position
        swarm.pbest_cost = np.full(self.pack, np.inf)

    def ask(self) -> np.ndarray:
        """Current particle positions (pack, d)."""
        return np.array(self.optimizer.swarm.position, dtype=float)

    def tell(self, X: np.ndarray, F: np.ndarray) -> None:
        """One pyswarms iteration: personal and global bests, then velocity and position."""
        from pyswarms.backend.operators import compute_pbest

        opt, swarm = self.optimizer, self.optimizer.swarm
        swarm.current_cost = np.asarray(F, dtype=float)
        swarm.pbest_pos, swarm.pbest_cost = compute_pbest(swarm)
        swarm.best_pos, swarm.best_cost = opt.top.compute_gbest(swarm)
        swarm.options = opt.oh(opt.options, iternow=self.iteration, itermax=self.iterations)
        with _seeded_global_numpy(self.rng):
            swarm.velocity = opt.top.compute_velocity(swarm, opt.velocity_clamp, opt.vh, opt.bounds)
            swarm.position = opt.top.compute_position(swarm, opt.bounds, opt.bh)
        self.iteration += 1


class _PymooAdapter(_Budget):
    """pymoo's own ask/tell on a box-bounded single-objective problem it never evaluates."""

    def __init__(
        self, lower: np.ndarray, upper: np.ndarray, pack: int, iterations: int, algorithm: Any
    ) -> None:
        super().__init__(lower, upper, pack, iterations)
        from pymoo.core.problem import Problem as PymooProblem

        self.box = PymooProblem(n_var=self.lower.size, n_obj=1, xl=self.lower, xu=self.upper)
        self.algorithm = algorithm
        self._population: Any = None
        self._stopped = False

    @property
    def done(self) -> bool:
        """True once the budget is used or pymoo has terminated (e.g. CMA-ES converged)."""
        return self._stopped or self.iteration >= self.iterations

    @property
    def stopped_early(self) -> bool:
        """True when pymoo terminated by its own criterion before the budget was used."""
        return self._stopped and self.iteration < self.iterations

    def ask(self) -> np.ndarray:
        """The population pymoo wants evaluated (N, d), clipped to the box."""
        self._population = self.algorithm.ask()
        return np.clip(self._population.get("X"), self.lower, self.upper)

    def tell(self, X: np.ndarray, F: np.ndarray) -> None:
        """Give pymoo the costs of the last population (objective only, no constraints)."""
        from pymoo.core.evaluator import Evaluator
        from pymoo.problems.static import StaticProblem

        static = StaticProblem(self.box, F=np.asarray(F, dtype=float)[:, None])
        Evaluator().eval(static, self._population)
        self.algorithm.tell(infills=self._population)
        self.iteration += 1
        self._stopped = not self.algorithm.has_next()


class PymooDE(_PymooAdapter):
    """pymoo's Differential Evolution (DE/rand/1/bin, CR = 0.9, F dithered in [0.5, 1])."""

    name = "de"

    def __init__(
        self,
        lower: np.ndarray,
        upper: np.ndarray,
        pack: int,
        iterations: int,
        seed: int | np.random.Generator = 0,
        variant: str = "DE/rand/1/bin",
        CR: float = 0.9,
    ) -> None:
        from pymoo.algorithms.soo.nonconvex.de import DE

        seed_int = _integer_seed(seed)
        algorithm = DE(pop_size=pack, variant=variant, CR=CR, dither="vector")
        super().__init__(lower, upper, pack, iterations, algorithm)
        self.settings = {"variant": variant, "CR": CR, "library": "pymoo DE"}
        algorithm.setup(self.box, termination=("n_iter", iterations), seed=seed_int)


class PymooCMAES(_PymooAdapter):
    """pymoo's CMA-ES (the ``cma`` package) with ``pack`` offspring per generation.

    Starts from the centre of the box with σ = 0.3 of the (normalised) box width; the first round
    evaluates that start point alone (pymoo's initialisation). Stops early when CMA-ES itself
    terminates (tolerances reached).
    """

    name = "cmaes"

    def __init__(
        self,
        lower: np.ndarray,
        upper: np.ndarray,
        pack: int,
        iterations: int,
        seed: int | np.random.Generator = 0,
        sigma: float = 0.3,
    ) -> None:
        from pymoo.algorithms.soo.nonconvex.cmaes import CMAES

        seed_int = _integer_seed(seed)
        centre = 0.5 * (np.asarray(lower, dtype=float) + np.asarray(upper, dtype=float))
        algorithm = CMAES(x0=centre, sigma=sigma, pop_size=pack, restarts=0)
        super().__init__(lower, upper, pack, iterations, algorithm)
        self.settings = {"sigma": sigma, "x0": "box centre", "library": "pymoo CMAES (cma)"}
        algorithm.setup(self.box, termination=("n_iter", iterations + 1), seed=seed_int)


def _integer_seed(seed: int | np.random.Generator) -> int:
    """An integer seed for libraries that take one (drawn from a Generator if given one)."""
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(2**31 - 1))
    return int(seed)
