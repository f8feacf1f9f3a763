"""The :class:`Model`: a compiled description plus its parameter set, and state-level helpers.

Coordinates of a full state ``q`` are ordered free first, then driven
(``model.coordinates = free_coordinates + driven_coordinates``). Parameter matrices are
(B, n_parameters) float64 in ``model.parameter_names`` order. Units SI.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from bemore.errors import ModelError
from bemore.model.description import Description
from bemore.model.tree import Tree, compile_tree


class Model:
    """A planar tree model ready to simulate (see docs/model.md for the conventions)."""

    def __init__(self, description: Description, parameter_names: Iterable[str] | None = None):
        self.description = description
        names = tuple(parameter_names) if parameter_names else tuple(description.parameters)
        missing = [n for n in description.parameters if n not in names]
        if missing:
            raise ModelError(f"{description.source}: parameter order misses {missing[0]}")
        self.parameter_names: tuple[str, ...] = names
        self.free_coordinates: tuple[str, ...] = description.free_coordinates
        self.driven_coordinates: tuple[str, ...] = description.driven_coordinates
        self.coordinates = self.free_coordinates + self.driven_coordinates
        self.point_names: tuple[str, ...] = tuple(p.name for p in description.points)
        self.tree: Tree = compile_tree(description, names)
        self._T = self.tree.kernel_arrays()
        spring_of = {s.coordinate for s in description.springs}
        self.spring_coordinates = tuple(c for c in self.free_coordinates if c in spring_of)

    @property
    def name(self) -> str:
        """The description's name."""
        return self.description.name

    @property
    def n_free(self) -> int:
        """Number of free coordinates."""
        return len(self.free_coordinates)

    @property
    def n_driven(self) -> int:
        """Number of driven coordinates."""
        return len(self.driven_coordinates)

    def default_parameters(self) -> dict[str, float]:
        """Parameter name → default value (SI) as written in the description."""
        return dict(self.description.parameters)

    def parameter_matrix(self, parameters: Mapping[str, float] | Iterable[Mapping[str, float]]
                         ) -> np.ndarray:
        """(B, n_parameters) float64 from dicts; names left out take their default value."""
        rows = [parameters] if isinstance(parameters, Mapping) else list(parameters)
        defaults = self.default_parameters()
        matrix = np.empty((len(rows), len(self.parameter_names)))
        for b, row in enumerate(rows):
            unknown = [name for name in row if name not in defaults]
            if unknown:
                raise ModelError(
                    f"model {self.name}: unknown parameter {unknown[0]!r} "
                    f"(known: {', '.join(self.parameter_names)})"
                )
            for j, name in enumerate(self.parameter_names):
                matrix[b, j] = float(row.get(name, defaults[name]))
        return matrix

    def as_matrix(self, P: np.ndarray | Mapping[str, float] | Iterable) -> np.ndarray:
        """Accept a parameter matrix, a vector, or dict(s); return (B, n_parameters)."""
        if isinstance(P, np.ndarray):
            P = np.atleast_2d(np.asarray(P, dtype=np.float64))
            if P.shape[1] != len(self.parameter_names):
                raise ModelError(
                    f"model {self.name}: parameter matrix has {P.shape[1]} columns, expected "
                    f"{len(self.parameter_names)} ({', '.join(self.parameter_names)})"
                )
            return P
        return self.parameter_matrix(P)

    def fields(self, P) -> tuple[np.ndarray, np.ndarray]:
        """Per-member field vectors (B, n_fields) and a validity mask (B,).

        A member is invalid if a parameter is not finite or a body gets a non-positive mass or
        inertia (e.g. ``trunk.mass`` above the trunk+thighs total).
        """
        P = self.as_matrix(P)
        V = self.tree.fields(P)
        bf = self.tree.body_fields
        valid = np.all(np.isfinite(P), axis=1)
        valid &= np.all(V[:, bf[:, 0]] > 0.0, axis=1) & np.all(V[:, bf[:, 3]] > 0.0, axis=1)
        return V, valid

    def spring_forces(self, P, free_q: np.ndarray, free_qd: np.ndarray,
                      coordinates: Iterable[str]) -> np.ndarray:
        """Generalised force (B, F, k) of the spring-dampers of ``coordinates`` (k free
        coordinates that carry one) on their coordinate: ``−stiffness·(q − rest) −
        damping·q̇`` (N for a prismatic coordinate, N·m for a revolute one), from the free
        coordinates (B, F, n_free) and their rates, for each member's parameters P
        (B, n_parameters). For ``bar_x``/``bar_y`` it is the force the bar's supports exert on
        its moving mass (docs/model.md)."""
        V, _ = self.fields(P)
        names = list(coordinates)
        missing = [c for c in names if c not in self.spring_coordinates]
        if missing:
            raise ModelError(f"model {self.name}: no spring-damper on {missing[0]!r}")
        index = [self.free_coordinates.index(c) for c in names]
        fields = self.tree.spring_fields[index]  # (k, 3): stiffness, damping, rest
        k, c, rest = (V[:, fields[:, j]][:, None, :] for j in range(3))
        q, qd = free_q[..., index], free_qd[..., index]
        return -k * (q - rest) - c * qd

    def spring_force_tangents(self, P, free_q: np.ndarray, free_qd: np.ndarray, dP: np.ndarray,
                              d_free_q: np.ndarray, d_free_qd: np.ndarray,
                              coordinates: Iterable[str]) -> np.ndarray:
        """Derivatives (B, K, F, k) of :meth:`spring_forces` along K directions: each moves the
        parameters by dP (B, K, n_parameters) and the free state by d_free_q/d_free_qd
        (B, K, F, n_free), per unit of the direction (N or N·m per unit). Exact (the force is
        −stiffness·(q − rest) − damping·q̇, its fields affine in the parameters or products of
        two: :func:`bemore.model.sensitivity.field_tangents`)."""
        from bemore.model.sensitivity import field_tangents

        P = self.as_matrix(P)
        V, _ = self.fields(P)
        dV = field_tangents(self.tree, P, dP)  # (B, K, n_fields)
        names = list(coordinates)
        missing = [c for c in names if c not in self.spring_coordinates]
        if missing:
            raise ModelError(f"model {self.name}: no spring-damper on {missing[0]!r}")
        index = [self.free_coordinates.index(c) for c in names]
        fields = self.tree.spring_fields[index]
        k, c, rest = (V[:, None, None, fields[:, j]] for j in range(3))  # (B, 1, 1, k)
        dk, dc, drest = (dV[:, :, None, fields[:, j]] for j in range(3))  # (B, K, 1, k)
        q, qd = free_q[:, None][..., index], free_qd[:, None][..., index]  # (B, 1, F, k)
        dq, dqd = d_free_q[..., index], d_free_qd[..., index]  # (B, K, F, k)
        return -dk * (q - rest) - k * (dq - drest) - dc * qd - c * dqd

    def _split(self, q_full: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q_full = np.asarray(q_full, dtype=np.float64)
        if q_full.shape[-1] != len(self.coordinates):
            raise ModelError(
                f"model {self.name}: a full state has {len(self.coordinates)} coordinates "
                f"({', '.join(self.coordinates)}), got {q_full.shape[-1]}"
            )
        return q_full[..., : self.n_free], q_full[..., self.n_free:]

    def point_positions(self, P, q_full: np.ndarray) -> np.ndarray:
        """Named points (B, ..., n_points, 2) in m for full states q_full (..., n) or (B, ..., n).

        If q_full has a leading axis of length B (the number of parameter rows, B > 1) it is
        matched member by member; otherwise every member sees the same states.
        """
        from bemore.model.reference_batch import points_batch  # numba loads on first use only

        V, _ = self.fields(P)
        q = np.asarray(q_full, dtype=np.float64)
        self._split(q)
        B = V.shape[0]
        per_member = B > 1 and q.ndim >= 2 and q.shape[0] == B
        inner = q.shape[1:-1] if per_member else q.shape[:-1]
        qb = q.reshape(B, -1, q.shape[-1]) if per_member else np.broadcast_to(
            q.reshape(1, -1, q.shape[-1]), (B, int(np.prod(inner, dtype=int)), q.shape[-1]))
        out = np.zeros((B, qb.shape[1], len(self.point_names), 2))
        points_batch(self._T, V, np.ascontiguousarray(qb), self.n_free, out)
        return out.reshape((B, *inner, len(self.point_names), 2))

    def hybrid(self, P, qf, vf, qd, vd, ad) -> tuple[np.ndarray, np.ndarray]:
        """Free accelerations (N, n_free) and driven efforts (N, n_driven) for N states.

        P has one row (shared) or N rows; states are (N, ·) arrays. Spring-dampers included.
        A state whose free mass matrix is not positive definite gives NaN.
        """
        from bemore.model.reference_batch import hybrid_batch  # numba loads on first use only

        args = [np.atleast_2d(np.asarray(a, dtype=np.float64)) for a in (qf, vf, qd, vd, ad)]
        N = max(a.shape[0] for a in args)
        args = [np.ascontiguousarray(np.broadcast_to(a, (N, a.shape[1]))) for a in args]
        V, _ = self.fields(P)
        V = np.ascontiguousarray(np.broadcast_to(V, (N, V.shape[1])))
        acc = np.full((N, self.n_free), np.nan)
        eff = np.full((N, self.n_driven), np.nan)
        ok = np.zeros(N, dtype=np.bool_)
        hybrid_batch(self._T, V, *args, acc, eff, ok)
        return acc, eff

    def mass_matrix_and_inverse_dynamics(self, P, q, qdot, qddot) -> tuple[np.ndarray, np.ndarray]:
        """Full mass matrix (n, n) and τ = M q̈ + bias (n,) for one state (no spring-dampers)."""
        from bemore.model import dynamics  # numba loads on first use only

        V, _ = self.fields(P)
        qf, qd = self._split(q)
        vf, vd = self._split(qdot)
        af, ad = self._split(qddot)
        n = len(self.coordinates)
        M = np.zeros((n, n))
        tau = np.zeros(n)
        ws = dynamics.workspace(self.tree)
        dynamics.full_matrices(self._T, V[0], qf, vf, qd, vd, af, ad, ws, M, tau)
        return M, tau

    def energy(self, P, qf, vf, qd, vd) -> np.ndarray:
        """Total mechanical energy (J): kinetic + gravity + springs, for N states (N, ·)."""
        from bemore.model.reference_batch import energy_batch  # numba loads on first use only

        args = [np.atleast_2d(np.asarray(a, dtype=np.float64)) for a in (qf, vf, qd, vd)]
        N = max(a.shape[0] for a in args)
        args = [np.ascontiguousarray(np.broadcast_to(a, (N, a.shape[1]))) for a in args]
        V, _ = self.fields(P)
        V = np.ascontiguousarray(np.broadcast_to(V, (N, V.shape[1])))
        out = np.zeros(N)
        energy_batch(self._T, V, *args, out)
        return out

    def equilibrium(self, P, driven_q0, free_q=None, driven_qd0=None, driven_qdd0=None,
                    tol: float = 1e-10, max_iterations: int = 30) -> np.ndarray:
        """Free state (B, n_free) where the spring coordinates do not accelerate at t0.

        The free coordinates without a spring (e.g. ``hand_rotation``) keep their value from
        ``free_q`` ((n_free,) or (B, n_free), default 0); the free velocities are zero; the
        driven coordinates are at ``driven_q0`` (velocities/accelerations default 0). For a
        posture held at rest this is the static equilibrium of the springs under gravity; for a
        posture that starts to rotate, the springs already carry that motion's load, so a
        simulation from it starts without a spurious spring oscillation. Newton iterations.
        """
        V, valid = self.fields(P)
        B = V.shape[0]
        nf, nd = self.n_free, self.n_driven
        q = np.zeros((B, nf)) if free_q is None else np.array(
            np.broadcast_to(np.asarray(free_q, dtype=np.float64), (B, nf)))
        qd = np.broadcast_to(np.asarray(driven_q0, dtype=np.float64), (B, nd))
        vd = np.zeros((B, nd)) if driven_qd0 is None else np.broadcast_to(driven_qd0, (B, nd))
        ad = np.zeros((B, nd)) if driven_qdd0 is None else np.broadcast_to(driven_qdd0, (B, nd))
        springs = [self.free_coordinates.index(c) for c in self.spring_coordinates]
        zeros = np.zeros((B, nf))
        rows = self.tree.spring_fields[springs]
        for i, row in zip(springs, rows, strict=True):
            q[:, i] = V[:, row[2]]  # start at the rest values
        P = self.as_matrix(P)
        for _ in range(max_iterations):
            acc, _ = self.hybrid(P, q, zeros, qd, vd, ad)
            r = acc[:, springs]
            if np.all(np.abs(r[valid]) < tol):
                break
            J = np.empty((B, len(springs), len(springs)))
            for c, i in enumerate(springs):
                step = 1e-7
                qp = q.copy()
                qp[:, i] += step
                accp, _ = self.hybrid(P, qp, zeros, qd, vd, ad)
                J[:, :, c] = (accp[:, springs] - acc[:, springs]) / step
            J[~valid] = np.eye(len(springs))
            r = np.where(valid[:, None], r, 0.0)
            q[:, springs] -= np.linalg.solve(J, r[..., None])[..., 0]
        q[~valid] = np.nan
        return q
