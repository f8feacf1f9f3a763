"""Exact sensitivities of the simulated points: forward-mode derivatives of the generated kernel.

The derivative of a trial's simulated points with respect to the model parameters and the free
start state is computed *with* the simulation, by direct differentiation of the integrator's
discrete steps: every line of the generated ROS34PW2 kernel (``generated.py``: straight-line
single assignments of +, −, ×, ÷, polynomial sine/cosine, conditional selects) is rewritten
into the line itself followed by its tangents in ``K`` directions (:func:`tangent_source`, a
source-to-source transformation of the generated Python, so it covers everything the kernel
computes — stage dynamics, the Cholesky factors of M and of W = M₀ + γhC + γ²h²K, the solves,
the step combination, the points — with no second hand-written model of them). A sine and
cosine pair of the generated code and a pivot's reciprocal get their derivatives in closed form
(:meth:`_Tangents._sincos`, and d(1/r) in :meth:`_Tangents._binary`) instead of through the
polynomial's arithmetic or a division per direction. The result is the exact derivative of the
discrete map the engine computes (not of the ODE), to rounding.

The tangent kernel is compiled like the engine's kernels (C translation by clang, cached by
source digest; numba without a compiler) and run batched like them: lanes are members, each
lane carrying its ``K`` seed directions in the field vector V and the start state (q₀, q̇₀).
Seeds in the model's parameters become seeds in V through the field map's derivative
(:func:`field_tangents`: V is linear in the parameters plus products of two).
"""

from __future__ import annotations

import ast
import copy
import itertools
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bemore.errors import ModelError
from bemore.model.codegen import sincos_lines
from bemore.model.simulate import (
    MAX_ABS,
    _coefficients,
    runnable_fields,
    shared_table,
    work_sizes,
)

# Arrays whose tangents the kernel carries, and the axis of their direction index: the lane
# arrays (lanes last) get it first; the member-major point output gets it after the member.
TANGENT_ARRAYS = {"Vt": 0, "S": 0, "S0": 0, "MX": 0, "U": 0, "UN": 0, "R": 0, "out_pts": 1}
# With the free state stored as well (the bar-force residuals of an identification need it).
STATE_TANGENT_ARRAYS = {**TANGENT_ARRAYS, "out_q": 1, "out_v": 1}
_SUFFIX = "_d"
KERNEL = "integrate_shared"


def _tangent_name(name: str, t: int) -> str:
    return f"{name}_dT{t}"


class _Tangents:
    """Forward-mode rewriting of one generated kernel function (see the module docstring)."""

    def __init__(self, fn: ast.FunctionDef, directions: int, shared_primal: bool,
                 arrays: dict[str, int] | None = None) -> None:
        self.fn = fn
        self.arrays = TANGENT_ARRAYS if arrays is None else arrays
        self.K = directions
        self.shared_primal = shared_primal
        self.active = self._active_names()

    # -- which names carry a tangent -------------------------------------------------------
    def _reads_active(self, e: ast.expr, active: set[str]) -> bool:
        """True if ``e`` reads an active name or a tangent array (index expressions aside)."""
        if isinstance(e, ast.Name):
            return e.id in active
        if isinstance(e, ast.Subscript):
            return isinstance(e.value, ast.Name) and e.value.id in self.arrays
        if isinstance(e, ast.Call):
            name = ast.unparse(e.func)
            if name in ("np.floor", "np.uint64"):
                return False
            return any(self._reads_active(a, active) for a in e.args)
        if isinstance(e, ast.Compare | ast.BoolOp):
            return False
        if isinstance(e, ast.IfExp):
            return self._reads_active(e.body, active) or self._reads_active(e.orelse, active)
        return any(self._reads_active(child, active) for child in ast.iter_child_nodes(e)
                   if isinstance(child, ast.expr))

    def _active_names(self) -> set[str]:
        """Names assigned, anywhere, a value that depends on the seeds (fixed point: a name
        assigned in a loop may be read before a later assignment of it in the source)."""
        assigns = [node for node in ast.walk(self.fn) if isinstance(node, ast.Assign)
                   and isinstance(node.targets[0], ast.Name)]
        active: set[str] = set()
        while True:
            grown = {a.targets[0].id for a in assigns if self._reads_active(a.value, active)}
            if grown <= active:
                return active
            active |= grown

    # -- derivative of an expression (None: exactly zero) -------------------------------------
    def d(self, e: ast.expr, t: int) -> ast.expr | None:
        if isinstance(e, ast.Constant):
            return None
        if isinstance(e, ast.Name):
            return ast.Name(_tangent_name(e.id, t), ast.Load()) if e.id in self.active else None
        if isinstance(e, ast.Attribute):
            return None  # np.nan
        if isinstance(e, ast.Subscript):
            if not (isinstance(e.value, ast.Name) and e.value.id in self.arrays):
                return None
            return self._tangent_subscript(e, t, ast.Load())
        if isinstance(e, ast.UnaryOp):
            if isinstance(e.op, ast.USub):
                inner = self.d(e.operand, t)
                return None if inner is None else ast.UnaryOp(ast.USub(), inner)
            if isinstance(e.op, ast.UAdd):
                return self.d(e.operand, t)
            return None
        if isinstance(e, ast.BinOp):
            return self._binary(e, t)
        if isinstance(e, ast.IfExp):
            body, orelse = self.d(e.body, t), self.d(e.orelse, t)
            if body is None and orelse is None:
                return None
            zero = ast.Constant(0.0)
            return ast.IfExp(copy.deepcopy(e.test), body or zero, orelse or zero)
        if isinstance(e, ast.Call):
            name = ast.unparse(e.func)
            if name in ("np.floor", "np.uint64"):
                return None  # piecewise constant
            if name == "abs":
                inner = self.d(e.args[0], t)
                if inner is None:
                    return None
                test = ast.Compare(copy.deepcopy(e.args[0]), [ast.GtE()], [ast.Constant(0.0)])
                return ast.IfExp(test, inner, ast.UnaryOp(ast.USub(), copy.deepcopy(inner)))
        raise ModelError(f"sensitivity kernel: cannot differentiate {ast.unparse(e)!r}")

    def _binary(self, e: ast.BinOp, t: int) -> ast.expr | None:
        left, right = e.left, e.right
        dl, dr = self.d(left, t), self.d(right, t)
        if dl is None and dr is None:
            return None
        op = e.op
        if isinstance(op, ast.Add | ast.Sub):
            if dr is None:
                return dl
            if dl is None:
                return dr if isinstance(op, ast.Add) else ast.UnaryOp(ast.USub(), dr)
            return ast.BinOp(dl, op, dr)
        if isinstance(op, ast.Mult):
            terms = []
            if dl is not None:
                terms.append(ast.BinOp(dl, ast.Mult(), copy.deepcopy(right)))
            if dr is not None:
                terms.append(ast.BinOp(copy.deepcopy(left), ast.Mult(), dr))
            return terms[0] if len(terms) == 1 else ast.BinOp(terms[0], ast.Add(), terms[1])
        if isinstance(op, ast.Div):
            # d(l/r) = (dl − (l/r)·dr) / r
            quotient = ast.BinOp(copy.deepcopy(left), ast.Div(), copy.deepcopy(right))
            if dl is None and isinstance(left, ast.Constant) and left.value == 1.0:
                # d(1/r) = −(1/r)²·dr: no division per direction (1/r is the primal's own
                # value, the same expression: computed once, or hoisted out of a lane loop of
                # directions).
                square = ast.BinOp(quotient, ast.Mult(), copy.deepcopy(quotient))
                return ast.UnaryOp(ast.USub(), ast.BinOp(square, ast.Mult(), dr))
            top = dl
            if dr is not None:
                product = ast.BinOp(quotient, ast.Mult(), dr)
                top = (ast.UnaryOp(ast.USub(), product) if dl is None
                       else ast.BinOp(dl, ast.Sub(), product))
            return ast.BinOp(top, ast.Div(), copy.deepcopy(right))
        if isinstance(op, ast.Pow) and isinstance(right, ast.Constant) and dr is None:
            power = right.value
            base = (ast.Constant(1.0) if power == 1 else
                    ast.BinOp(copy.deepcopy(left), ast.Pow(), ast.Constant(power - 1)))
            return ast.BinOp(ast.BinOp(ast.Constant(float(power)), ast.Mult(), base),
                             ast.Mult(), dl)
        raise ModelError(f"sensitivity kernel: cannot differentiate {ast.unparse(e)!r}")

    def _sincos(self, name: str, t: int) -> ast.expr | None:
        """The tangent of a sine or cosine of the generated code (:func:`sincos_lines`):
        d sin r = cos r · dr, d cos r = −sin r · dr, with cos r = hc² − hs² and sin r = 2·hs·hc
        from the half angle's values (both known before either result), not the derivative
        of the polynomial (≈ 50 operations per direction fewer); None for any other name."""
        parts = sincos_lines(name)
        if parts is None or parts[1] not in self.active:
            return None
        kind, reduced, hs, hc = parts
        factor = (f"({hc} * {hc} - {hs} * {hs})" if kind == "sin"
                  else f"(-(2.0 * {hs} * {hc}))")
        return ast.parse(f"{factor} * {_tangent_name(reduced, t)}", mode="eval").body

    def _tangent_subscript(self, e: ast.Subscript, t: int, ctx) -> ast.Subscript:
        name = e.value.id
        indices = list(e.slice.elts) if isinstance(e.slice, ast.Tuple) else [e.slice]
        indices = [copy.deepcopy(i) for i in indices]
        indices.insert(self.arrays[name], ast.Constant(t))
        return ast.Subscript(ast.Name(name + _SUFFIX, ast.Load()),
                             ast.Tuple(indices, ast.Load()), ctx)

    # -- statements ---------------------------------------------------------------------------
    def statements(self, body: list[ast.stmt]) -> list[ast.stmt]:
        """``body`` with the tangent statements after each statement they differentiate."""
        out: list[ast.stmt] = []
        for s in body:
            if self.shared_primal and _is_lane_loop(s):
                out += self._hoisted(s)
                continue
            out.append(s)
            out += self._tangents_of(s)
        return out

    def _tangents_of(self, s: ast.stmt) -> list[ast.stmt]:
        """The tangent statements of ``s`` (its loops and branches rewritten in place)."""
        out: list[ast.stmt] = []
        if isinstance(s, ast.Assign):
            target = s.targets[0]
            if isinstance(target, ast.Name) and target.id in self.active:
                for t in range(self.K):
                    value = self._sincos(target.id, t) or self.d(s.value, t) or ast.Constant(0.0)
                    out.append(ast.Assign([ast.Name(_tangent_name(target.id, t), ast.Store())],
                                          value))
            elif (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                  and target.value.id in self.arrays):
                for t in range(self.K):
                    value = self.d(s.value, t) or ast.Constant(0.0)
                    out.append(ast.Assign([self._tangent_subscript(target, t, ast.Store())],
                                          value))
        elif isinstance(s, ast.AugAssign):
            target = s.target
            if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                    and target.value.id in self.arrays) or (
                    isinstance(target, ast.Name) and target.id in self.active):
                raise ModelError(f"sensitivity kernel: {ast.unparse(s)!r} is not supported")
        elif isinstance(s, ast.For):
            s.body = self.statements(s.body)
        elif isinstance(s, ast.If):
            s.body = self.statements(s.body)
            s.orelse = self.statements(s.orelse)
        return out

    def _hoisted(self, loop: ast.For) -> list[ast.stmt]:
        """A lane loop whose lanes are directions of ONE member: its own statements run once,
        for lane ``lo`` (the primal is the same in every lane), before the loop; the loop
        computes only the tangents, one direction per lane (vectorised across directions)."""
        primal, tangents = [], []
        for s in loop.body:
            if isinstance(s, ast.For | ast.If):
                raise ModelError("sensitivity kernel: a lane loop with a loop or branch inside")
            primal.append(s)
            tangents += self._tangents_of(s)
        for node in (n for t in tangents for n in ast.walk(t.value)):
            if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                    and node.value.id in self.arrays):
                # The member's arrays hold lane lo only: a tangent must read its values by name.
                raise ModelError(f"sensitivity kernel: a tangent reads {ast.unparse(node)!r}")
        # The member's statements in a loop of one lane (lo): a loop body, so the C backend
        # fuses its products into the expressions that read them exactly as in the engine's
        # kernel (the same rounding: the points are the engine's bit for bit).
        once = ast.parse("range(lo, lo + 1)", mode="eval").body
        member = ast.For(copy.deepcopy(loop.target), once, primal, [])
        if not tangents:
            return [member]
        return [member, ast.For(loop.target, loop.iter, tangents, [])]


def _is_lane_loop(s: ast.stmt) -> bool:
    return isinstance(s, ast.For) and ast.unparse(s.iter) == "range(lo, hi)"


def tangent_arguments(kinds: dict[str, str | int],
                      arrays: dict[str, int] | None = None) -> dict[str, str | int]:
    """The tangent kernel's argument kinds: the engine kernel's, then each tangent array
    (``X_d``, one rank more) of ``arrays`` (default :data:`TANGENT_ARRAYS`)."""
    out = dict(kinds)
    for name in TANGENT_ARRAYS if arrays is None else arrays:
        out[name + _SUFFIX] = int(kinds[name]) + 1
    return out


def tangent_source(source: str, name: str, directions: int, new_name: str,
                   shared_primal: bool = False, arrays: dict[str, int] | None = None) -> str:
    """Python source of ``new_name``: function ``name`` of the generated ``source`` with the
    tangents of ``directions`` seed directions per lane (arguments ``X_d`` appended, see
    :data:`TANGENT_ARRAYS`). ``shared_primal``: the lanes of a call are the directions of one
    member (``directions`` = 1): the member's own values are computed once per lane loop, for
    its first lane, and only the tangents run across the lanes. ``arrays``: the arrays whose
    tangents are carried (default :data:`TANGENT_ARRAYS`)."""
    arrays = TANGENT_ARRAYS if arrays is None else arrays
    if directions < 1 or (shared_primal and directions != 1):
        allowed = "exactly 1 with a shared primal" if shared_primal else "at least 1"
        raise ModelError(f"sensitivity kernel: {directions} directions per lane ({allowed})")
    module = ast.parse(source)
    header = [node for node in module.body if not isinstance(node, ast.FunctionDef)]
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            fn = copy.deepcopy(node)
            break
    else:
        raise ModelError(f"sensitivity kernel: no function {name}")
    rewriter = _Tangents(fn, directions, shared_primal, arrays)
    fn.body = rewriter.statements(fn.body)
    fn.name = new_name
    fn.args.args += [ast.arg(n + _SUFFIX) for n in arrays]
    out = ast.Module(body=[*header, fn], type_ignores=[])
    return ast.unparse(ast.fix_missing_locations(out)) + "\n"


def field_tangents(tree, P: np.ndarray, dP: np.ndarray) -> np.ndarray:
    """Directional derivatives (B, K, n_fields) of the field vectors V(P) (B, n_parameters)
    along dP (B, K, n_parameters): V = P·A + offset + Σ c·P_a·P_b, so exactly
    dV = dP·A + Σ c·(dP_a·P_b + P_a·dP_b) (units: the fields' per unit of the direction)."""
    P = np.asarray(P, dtype=np.float64)
    dP = np.asarray(dP, dtype=np.float64)
    dV = dP @ tree.field_matrix
    for (f, a, b), c in zip(tree.field_products, tree.product_coefficients, strict=True):
        dV[..., f] += c * (dP[..., a] * P[:, None, b] + P[:, None, a] * dP[..., b])
    return dV


@dataclass
class PointSensitivities:
    """Simulated points (B, F, n_points, 2) m and their derivatives (B, K, F, n_points, 2) in m
    per unit of each seed direction; ``valid`` (B,) False for members that failed (NaN). With
    ``states``: the free state ``free_q``/``free_qd`` (B, F, n_free) SI and its derivatives
    ``d_free_q``/``d_free_qd`` (B, K, F, n_free) per unit of each direction (else None)."""

    points: np.ndarray
    derivatives: np.ndarray
    valid: np.ndarray
    free_q: np.ndarray | None = None
    free_qd: np.ndarray | None = None
    d_free_q: np.ndarray | None = None
    d_free_qd: np.ndarray | None = None


DIRECTIONS = 4
"""Seed directions per lane of the ``"members"`` layout: a member with d directions runs as
⌈d/DIRECTIONS⌉ lanes, each recomputing the member's simulation beside its directions' tangents
(docs/model.md, "Exact sensitivities": the layouts and their cost)."""
LAYOUTS = ("directions", "members")

_kernels: dict[tuple, object] = {}


def tangent_kernel(model, cost_points: tuple[int, ...], directions: int = DIRECTIONS,
                   shared_primal: bool = False, states: bool = False,
                   stored_points: tuple[int, ...] | None = None):
    """(compiled tangent kernel, its :class:`~bemore.model.generated.Program`) of the shared-motion
    engine kernel of ``model`` with ``directions`` seed directions per lane (``states``: also
    the tangents of the stored free state, :data:`STATE_TANGENT_ARRAYS`), storing the points
    ``stored_points`` (indices, in that order; None: every point of the model); built once per
    machine (clang, cached on disk like the engine's kernels; numba without a compiler)."""
    from bemore.model import generated

    n_points = len(model.point_names)
    program = generated.program_for(model.tree, n_points, cost_points, stored_points)
    key = (id(model.tree), n_points, cost_points, directions, shared_primal, states,
           stored_points)
    name = (f"sensitivity_{'primal' if shared_primal else 'lanes'}_{directions}"
            + ("_states" if states else ""))
    arrays = STATE_TANGENT_ARRAYS if states else TANGENT_ARRAYS
    kernel = _compiled(model.tree, key, name, program.source,
                       lambda: tangent_source(program.source, KERNEL, directions, name,
                                              shared_primal, arrays),
                       lambda: tangent_arguments(generated._KINDS, arrays))
    return kernel, program


def _compiled(tree, key: tuple, name: str, engine_source: str, source, kinds):
    """The tangent kernel ``name`` made by ``source()`` (argument kinds ``kinds()``), once per
    process (``key``) and once per machine: clang's library cached on disk, keyed on what the
    tangent source is made from (the engine's source and this module), so that a cached library
    loads without the transformation (≈ 1 s); numba without a compiler."""
    from bemore.model import generated, native

    known = _kernels.get(key)
    if known is not None and known[0] is tree:
        return known[1]
    cc = native.compiler()
    if cc is None:
        kernel = getattr(generated._load_module(source()), name)
    else:
        digest = f"{name}\n{engine_source}\n{Path(__file__).read_text()}"
        kernel = native.cached(digest, name,
                               lambda: native.translate(source(), name, kinds()), cc)
    _kernels[key] = (tree, kernel)
    return kernel


class _SharedRun(NamedTuple):
    """What both layouts of :func:`point_sensitivities` pass the shared-motion tangent kernel:
    the kernel, the driven table D, frames F, points, step h (s), the integrator's coefficients,
    the packed mass-matrix size, the scratch rows and the cost points' indices."""

    kernel: object
    D: np.ndarray
    F: int
    n_points: int
    h: float
    coefficients: object
    tri: int
    rows: int
    selection: tuple[int, ...]
    samples_per_step: int


def _shared_run(model, motion, directions: int, shared_primal: bool, states: bool = False,
                samples_per_step: int = 1, stored_points: tuple[int, ...] | None = None
                ) -> _SharedRun:
    """The tangent kernel of ``model`` for ``directions`` (``states``: with the free state's
    tangents) and the arrays its calls share, for one integrator step per ``samples_per_step``
    samples (1 or 2, as :func:`bemore.model.simulate.simulate`)."""
    selection = program_selection(model)
    kernel, program = tangent_kernel(model, selection, directions, shared_primal=shared_primal,
                                     states=states, stored_points=stored_points)
    D = shared_table(model, program.slots, motion, 1, samples_per_step)
    n_points = len(model.point_names) if stored_points is None else len(stored_points)
    h = motion.dt * samples_per_step
    return _SharedRun(kernel, D, len(motion.t), n_points, h, _coefficients(h),
                      *work_sizes(model, n_points), selection, samples_per_step)


def point_sensitivities(model, P, motion, free_q0, free_qd0, dP, dq0, dqd0,
                        layout: str = "directions", directions: int = DIRECTIONS,
                        threads: int | None = None, max_abs: float = MAX_ABS,
                        states: bool = False, samples_per_step: int = 1,
                        points: tuple[int, ...] | None = None,
                        out: np.ndarray | None = None) -> PointSensitivities:
    """Simulated named points of every member and their exact derivatives along seed directions.

    ``P`` (B, n_parameters) SI; ``motion`` one shared DrivenMotion; ``free_q0``/``free_qd0``
    (n_free,) or (B, n_free). Seeds: ``dP`` (B, K, n_parameters), ``dq0``/``dqd0``
    (B, K, n_free) — direction k of member b moves its parameters by dP[b, k] and its start by
    (dq0[b, k], dqd0[b, k]). One integrator step per ``samples_per_step`` samples (1, the
    engine's default, or 2: the simulation :func:`~bemore.model.simulate.simulate` gives with
    the same setting, and its derivatives, at about half the cost). Returns the
    points and ∂points/∂direction (:class:`PointSensitivities`); NaN for failed members.

    ``layout``: "directions" (default) runs each member as one call whose vector lanes are its
    K directions, the member's simulation computed once (scalar) beside them — or, with several
    threads, as calls of some of its directions each (:func:`direction_pieces`: each computes
    the member's simulation again, the numbers the same); "members" runs
    lanes of members, each lane carrying ``directions`` of a member's directions (the member's
    simulation recomputed per lane). Both give the same numbers to rounding; the points are
    the engine's bit for bit in both. ``states``: also the free state at every frame and its
    derivatives (the same kernel storing its state, :data:`STATE_TANGENT_ARRAYS`). ``points``:
    the model's points to compute (indices, in that order; None: all of them): a kernel
    storing fewer points writes less, and its caller takes no subset afterwards. ``out``
    ("directions" layout): a C-contiguous (B, K′, F, n_points, 2) array, K′ ≥ K, that receives
    the derivatives of the K directions and is returned as ``derivatives``; its directions K..
    are left as they are (room for columns the caller computes otherwise, without a copy).
    """
    from bemore.model import generated
    from bemore.model.simulate import _check_motion, _lane_arrays, engine_threads

    if motion.members is not None:
        raise ModelError("sensitivities: one shared driven motion for every member")
    V, valid = model.fields(P)
    P = model.as_matrix(P)
    B, nf = V.shape[0], model.n_free
    _check_motion(model, motion, B)
    dP = np.asarray(dP, dtype=np.float64)
    K = dP.shape[1]
    dq0 = np.broadcast_to(np.asarray(dq0, dtype=np.float64), (B, K, nf))
    dqd0 = np.broadcast_to(np.asarray(dqd0, dtype=np.float64), (B, K, nf))
    if dP.shape != (B, K, P.shape[1]):
        raise ModelError(f"sensitivities: dP has shape {dP.shape}, expected ({B}, K, "
                         f"{P.shape[1]})")
    q0 = np.broadcast_to(np.asarray(free_q0, np.float64), (B, nf))
    v0 = np.broadcast_to(np.asarray(free_qd0, np.float64), (B, nf))
    valid = valid & np.all(np.isfinite(q0), axis=1) & np.all(np.isfinite(v0), axis=1)
    V = runnable_fields(model, V, valid)
    if points is not None:
        try:
            points = tuple(operator.index(i) for i in points)
        except TypeError:
            raise ModelError(f"sensitivities: points {list(points)} must be integer indices "
                             "of the model's points") from None
        if not points or min(points) < 0 or max(points) >= len(model.point_names):
            raise ModelError(f"sensitivities: points {list(points)} (indices of the model's "
                             f"{len(model.point_names)} points)")
    if layout not in LAYOUTS:
        raise ModelError(f"sensitivities: layout {layout!r} (allowed: {', '.join(LAYOUTS)})")
    dV = field_tangents(model.tree, P, dP)
    if layout == "directions":
        return _by_directions(model, V, valid, q0, v0, dV, dq0, dqd0, motion, threads, max_abs,
                              states, samples_per_step, points, out)
    if out is not None:
        raise ModelError('sensitivities: out is for the "directions" layout')
    # Lanes: member b's directions in chunks of ``directions`` (the last chunk zero-padded).
    chunks = -(-K // directions)
    lanes = B * chunks
    member = np.repeat(np.arange(B), chunks)
    nfield = V.shape[1]
    seeds_V = np.zeros((lanes, directions, nfield))
    seeds_S = np.zeros((lanes, directions, 2 * nf))
    for c in range(chunks):
        lo, hi = c * directions, min(K, (c + 1) * directions)
        seeds_V[c::chunks, : hi - lo] = dV[:, lo:hi]
        seeds_S[c::chunks, : hi - lo, :nf] = dq0[:, lo:hi]
        seeds_S[c::chunks, : hi - lo, nf:] = dqd0[:, lo:hi]
    run = _shared_run(model, motion, directions, shared_primal=False, states=states,
                      samples_per_step=samples_per_step, stored_points=points)
    kernel, D, F, n_points, h, coefficients, tri, rows, selection, per_step = run
    out_pts = np.empty((lanes, F, n_points, 2))
    out_d = np.empty((lanes, directions, F, n_points, 2))
    shape = (lanes, F, nf) if states else (1, 1, 1)
    out_q, out_v = np.empty(shape), np.empty(shape)
    shape_d = (lanes, directions, F, nf) if states else (1, 1, 1, 1)
    out_q_d, out_v_d = np.empty(shape_d), np.empty(shape_d)
    alive = valid[member].astype(np.float64)
    cost = np.zeros(lanes)
    unused = np.empty((1, 1, 1))
    after = (np.zeros((1, len(selection), 2)), np.zeros((1, len(selection))), int(states), 1, 0,
             max_abs)
    calls = []
    for lo, hi in generated.lane_groups(lanes, threads or engine_threads()):
        n = hi - lo
        S = np.concatenate([q0[member[lo:hi]].T, v0[member[lo:hi]].T])
        work = _lane_arrays(V[member[lo:hi]].T, S, nf, tri, rows)
        tangents = _tangent_arrays(seeds_V[lo:hi].transpose(1, 2, 0),
                                   seeds_S[lo:hi].transpose(1, 2, 0), nf, tri, rows)
        stored = ((out_q[lo:hi], out_v[lo:hi]) if states else (unused, unused))
        calls.append((*work, coefficients, D, h, 1, per_step, 0, n, *after, *stored,
                      out_pts[lo:hi], unused, cost[lo:hi], alive[lo:hi], *tangents,
                      out_d[lo:hi], *((out_q_d[lo:hi], out_v_d[lo:hi]) if states else ())))
    generated.run_calls(kernel, calls)
    ok = np.ones(B, dtype=bool)
    np.logical_and.at(ok, member, alive > 0.0)
    points = out_pts[::chunks].copy()
    derivatives = out_d.reshape(B, chunks * directions, F, n_points, 2)[:, :K].copy()
    result = PointSensitivities(points, derivatives, ok)
    if states:
        result.free_q, result.free_qd = out_q[::chunks].copy(), out_v[::chunks].copy()
        result.d_free_q, result.d_free_qd = (
            a.reshape(B, chunks * directions, F, nf)[:, :K].copy() for a in (out_q_d, out_v_d))
    return _failed_to_nan(result)


def _tangent_arrays(seeds_V: np.ndarray, seeds_S: np.ndarray, nf: int, tri: int, rows: int
                    ) -> tuple[np.ndarray, ...]:
    """The tangent of each per-lane work array of the engine kernel
    (:func:`bemore.model.simulate._lane_arrays`, in the same order), with a direction axis
    first: the seeds of the fields ``seeds_V`` (K, n_fields, lanes) and of the start state
    ``seeds_S`` (K, 2·n_free, lanes) copied, the stage increments' tangents zero (the generic
    stage reads all of them), the rest left for the kernel."""
    K, lanes = seeds_V.shape[0], seeds_V.shape[-1]
    return (np.ascontiguousarray(seeds_V), np.ascontiguousarray(seeds_S),
            np.empty((K, 2 * nf, lanes)), np.empty((K, 2 * tri + nf, lanes)),
            np.zeros((K, 4, 2 * nf, lanes)), np.empty((K, 2 * nf, lanes)),
            np.empty((K, rows, lanes)))


def _failed_to_nan(result: PointSensitivities) -> PointSensitivities:
    """``result`` with NaN in every array of the members that failed."""
    bad = ~result.valid
    for name in ("points", "derivatives", "free_q", "free_qd", "d_free_q", "d_free_qd"):
        array = getattr(result, name)
        if array is not None:
            array[bad] = np.nan
    return result


DIRECTIONS_LAYOUT_KERNEL = (1, True)
"""The tangent kernel of the "directions" layout: (directions per lane, shared primal)."""


def build_identification_kernels(model) -> None:
    """Compile and cache (once per machine, :func:`tangent_kernel`) the tangent kernels an
    identification's exact Jacobian runs (:func:`point_sensitivities`' default layout on the
    engine's default cost points, storing those points only), without and with the free
    state's tangents (the latter: a trial with bar forces), so that a first run loads them
    (``python -m bemore.warmup``)."""
    for states in (False, True):
        directions_kernel(model, states, program_selection(model))


def directions_kernel(model, states: bool = False,
                      stored_points: tuple[int, ...] | None = None):
    """(kernel, program) of the "directions" layout (:func:`point_sensitivities`' default) on
    the engine's default cost points, storing ``stored_points`` (None: every point), with the
    free state's tangents when ``states``: the kernel an identification's exact Jacobian
    runs."""
    return tangent_kernel(model, program_selection(model), *DIRECTIONS_LAYOUT_KERNEL,
                          states=states, stored_points=stored_points)


def _by_directions(model, V, valid, q0, v0, dV, dq0, dqd0, motion, threads, max_abs,
                   states: bool = False, samples_per_step: int = 1,
                   stored_points: tuple[int, ...] | None = None,
                   out: np.ndarray | None = None) -> PointSensitivities:
    """:func:`point_sensitivities` in the "directions" layout: each kernel call runs one
    member's own simulation and a range of its directions as the lanes
    (:func:`direction_pieces` decides the ranges and which thread runs them); the derivatives
    written to ``out`` when given (its first K directions)."""
    from bemore.model import generated
    from bemore.model.simulate import _lane_arrays

    B, K, nf = dq0.shape
    run = _shared_run(model, motion, *DIRECTIONS_LAYOUT_KERNEL, states=states,
                      samples_per_step=samples_per_step, stored_points=stored_points)
    kernel, D, F, n_points, h, coefficients, tri, rows, selection, per_step = run
    points = np.empty((B, F, n_points, 2))
    if out is None:
        derivatives = np.empty((B, K, 1, F, n_points, 2))
    elif (not isinstance(out, np.ndarray) or out.dtype != np.float64
          or not out.flags.c_contiguous or not out.flags.writeable
          or out.ndim != 5 or out.shape[0] != B or out.shape[1] < K
          or out.shape[2:] != (F, n_points, 2)):
        raise ModelError(f"sensitivities: out must be a writeable C-contiguous float64 array of "
                         f"shape ({B}, ≥ {K}, {F}, {n_points}, 2), not {np.shape(out)}")
    else:
        derivatives = out[:, :, None]  # the kernel calls write directions lo..hi < K of it
    shape = (B, F, nf) if states else (1, 1, 1)
    out_q, out_v = np.empty(shape), np.empty(shape)
    shape_d = (B, K, 1, F, nf) if states else (1, 1, 1, 1, 1)
    out_q_d, out_v_d = np.empty(shape_d), np.empty(shape_d)
    alive = valid.astype(np.float64)
    cost = np.zeros(B)
    unused = np.empty((1, 1, 1))
    selected = len(selection)
    after = (np.zeros((1, selected, 2)), np.zeros((1, selected)), int(states), 1, 0, max_abs)
    seeds_S = np.concatenate([dq0, dqd0], axis=2)  # (B, K, 2 nf)

    def call(b: int, lo: int, hi: int) -> tuple:
        # Every call has the member's own arrays (one column: its values are computed for
        # lane 0 only, and the kernel updates them in place) and its directions' tangent
        # arrays (one column per direction). The call running directions 0.. writes the
        # member's points, state and cost; another piece of the same member computes the same
        # values into arrays of its own.
        work = _lane_arrays(V[b][:, None], np.concatenate([q0[b], v0[b]])[:, None], nf, tri,
                            rows)
        n = hi - lo
        tangents = _tangent_arrays(dV[b, lo:hi].T[None], seeds_S[b, lo:hi].T[None], nf, tri,
                                   rows)
        first = lo == 0
        member = slice(b, b + 1)
        stored = ((out_q[member], out_v[member]) if first else
                  (np.empty_like(out_q[member]), np.empty_like(out_v[member]))
                  ) if states else (unused, unused)
        primal = ((points[member], cost[member], alive[member]) if first else
                  (np.empty_like(points[member]), np.zeros(1), alive[member].copy()))
        return (*work, coefficients, D, h, 1, per_step, 0, n, *after, *stored, primal[0],
                unused, primal[1], primal[2], *tangents, derivatives[b, lo:hi],
                *((out_q_d[b, lo:hi], out_v_d[b, lo:hi]) if states else ()))

    plan = direction_pieces(B, K, threads or _engine_threads())
    generated.run_call_lists(kernel, [[call(*piece) for piece in pieces] for pieces in plan])
    result = PointSensitivities(points, derivatives[:, :K, 0], alive > 0.0)
    if states:
        result.free_q, result.free_qd = out_q, out_v
        result.d_free_q, result.d_free_qd = out_q_d[:, :, 0], out_v_d[:, :, 0]
    result = _failed_to_nan(result)  # NaN in the K directions only: the room is the caller's
    if out is not None:
        result.derivatives = out
    return result


# Relative cost of one call of the "directions" layout with n directions: the member's own
# scalar pass, one vector pass per 8 directions and one scalar pass per direction left over.
# Measured on the sample's tangent kernel (2 samples per step, one thread, AMD EPYC Zen 4), in
# ms: 8 directions 3.79, 9 → 5.43, 16 → 5.77, 17 → 7.63, 24 → 7.67.
PRIMAL_PASS, VECTOR_PASS, REMAINDER_PASS = 0.9, 1.0, 0.85


def piece_cost(directions: int) -> float:
    """Relative cost of one call of the "directions" layout running ``directions`` directions
    (a vector pass = 1).

    >>> piece_cost(8), piece_cost(9), piece_cost(17)
    (1.9, 2.75, 3.75)
    """
    from bemore.model.generated import LANE_ALIGN

    vectors, left = divmod(directions, LANE_ALIGN)
    return round(PRIMAL_PASS + VECTOR_PASS * vectors + REMAINDER_PASS * left, 9)


DIFFERENCED_AT_MOST = 2
"""The most directions :func:`differenced_directions` leaves to one-sided differences."""


def differenced_directions(directions: int) -> int:
    """How many of a Jacobian's last ``directions`` are cheaper as one-sided differences than
    as tangents, for a caller that takes a difference as one more member of a residual batch
    beside the tangents: the directions left over after the whole vectors, when there are whole
    vectors and at most :data:`DIFFERENCED_AT_MOST` left over. Each of those costs a scalar
    pass of the "directions" layout, ≈ as long as a whole vector pass (:data:`REMAINDER_PASS`),
    while the members' differences share the residual batch's vector lanes. Measured (2 samples
    per step, both cores, AMD EPYC Zen 4), a round of the polish's residuals and Jacobians of 2,
    3 and 5 members: 0.86, 0.86 and 0.92 × the time with every column from the tangents; of one
    member 1.02 × (its difference is a scalar pass of its own). The choice depends on the
    directions alone, not on the batch: a member's Jacobian is the same in any batch.

    >>> [differenced_directions(d) for d in (17, 16, 18, 19, 9, 2)]
    [1, 0, 2, 0, 1, 0]
    """
    from bemore.model.generated import LANE_ALIGN

    vectors, left = divmod(directions, LANE_ALIGN)
    return left if vectors and left <= DIFFERENCED_AT_MOST else 0


def _cuts(member: int, directions: int, parts: int) -> list[tuple[int, int, int]]:
    """Member ``member``'s directions in ``parts`` ranges cut on vector boundaries: its passes
    (whole vectors, then the remainder) shared near-equally, the later ranges taking the extra
    ones (the remainder, the cheapest pass, is the last).

    >>> _cuts(0, 17, 2), _cuts(0, 9, 2), _cuts(0, 24, 3)
    ([(0, 0, 8), (0, 8, 17)], [(0, 0, 8), (0, 8, 9)], [(0, 0, 8), (0, 8, 16), (0, 16, 24)])
    """
    from bemore.model.generated import LANE_ALIGN

    passes = -(-directions // LANE_ALIGN)
    counts = [passes // parts + (i >= parts - passes % parts) for i in range(parts)]
    bounds = [min(count * LANE_ALIGN, directions) for count in itertools.accumulate(counts)]
    return [(member, lo, hi) for lo, hi in itertools.pairwise([0, *bounds]) if hi > lo]


def _longest_first(pieces: list[tuple[int, int, int]], threads: int
                   ) -> tuple[list[list[tuple[int, int, int]]], float]:
    """``pieces`` dealt to ``threads`` lists, the costliest first, each to the least loaded
    list (the first on ties); returns the lists and the largest list's cost."""
    lists: list[list[tuple[int, int, int]]] = [[] for _ in range(threads)]
    loads = [0.0] * threads
    for piece in sorted(pieces, key=lambda p: -piece_cost(p[2] - p[1])):
        t = loads.index(min(loads))
        lists[t].append(piece)
        loads[t] += piece_cost(piece[2] - piece[1])
    return [calls for calls in lists if calls], max(loads)


def direction_pieces(members: int, directions: int, threads: int
                     ) -> list[list[tuple[int, int, int]]]:
    """How the "directions" layout runs ``members`` members of ``directions`` directions on
    ``threads`` threads: one list of (member, first direction, end) calls per thread, run in
    order. Whole members, unless cutting some into ranges (each call then computes the
    member's own simulation again) shortens the longest list by :func:`piece_cost`; ties go to
    less work in all. A member's numbers do not depend on the plan.

    >>> direction_pieces(1, 17, 2)
    [[(0, 8, 17)], [(0, 0, 8)]]
    >>> direction_pieces(2, 17, 2)
    [[(0, 0, 17)], [(1, 0, 17)]]
    >>> direction_pieces(3, 17, 2)
    [[(0, 0, 17), (2, 8, 17)], [(1, 0, 17), (2, 0, 8)]]
    >>> direction_pieces(3, 17, 1)
    [[(0, 0, 17), (1, 0, 17), (2, 0, 17)]]
    >>> direction_pieces(2, 0, 2)  # no directions: the members' own simulations
    [[(0, 0, 0)], [(1, 0, 0)]]
    """
    from bemore.model.generated import LANE_ALIGN

    passes = max(1, -(-directions // LANE_ALIGN))  # a member's vector passes (at least one)
    threads = max(1, min(threads, members * passes))
    whole = [(b, 0, directions) for b in range(members)]
    best_key, best = None, []
    for parts in range(1, min(threads, passes) + 1):
        # At most 4 members per thread cut: the same longest list as with any number cut for
        # every case of up to 40 members, 40 directions and 8 threads (checked; up to one
        # per thread was up to 7 % longer), and planning stays linear in the members.
        for split in [0] if parts == 1 else range(1, min(members, 4 * threads) + 1):
            pieces = whole[:members - split] + [
                piece for b in range(members - split, members)
                for piece in _cuts(b, directions, parts)]
            lists, longest = _longest_first(pieces, threads)
            key = (round(longest, 9), round(sum(piece_cost(hi - lo) for _, lo, hi in pieces), 9))
            if best_key is None or key < best_key:
                best_key, best = key, lists
    return best


def _engine_threads() -> int:
    from bemore.model.simulate import engine_threads

    return engine_threads()


# The per-member-motion kernel that stores the driven efforts (the synthesis's simulations)
# carries, beyond the shared kernel's arrays, the tangents of its driven table D (seeded from
# the motions' derivatives) and of its stored state and efforts.
MOTION_TANGENT_ARRAYS = {**TANGENT_ARRAYS, "D": 0, "out_q": 1, "out_v": 1, "out_eff": 1}
MOTION_KERNEL = "integrate_members_efforts"


def motion_tangent_kernel(model, directions: int):
    """(compiled tangent kernel, its :class:`~bemore.model.generated.Program`) of the
    per-member-motion kernel storing efforts, ``directions`` seed directions per lane; built
    once per machine (clang, cached on disk; numba without a compiler)."""
    from bemore.model import generated

    n_points = len(model.point_names)
    selection = program_selection(model)
    _, program = generated.kernel_for(model.tree, n_points, True, True, selection)
    key = (id(model.tree), n_points, selection, directions, MOTION_KERNEL)
    name = f"sensitivity_motion_{directions}"
    kernel = _compiled(model.tree, key, name, program.source,
                       lambda: tangent_source(program.source, MOTION_KERNEL, directions, name,
                                              arrays=MOTION_TANGENT_ARRAYS),
                       lambda: tangent_arguments(dict(generated._KINDS, D=4),
                                                 MOTION_TANGENT_ARRAYS))
    return kernel, program


@dataclass
class MotionSensitivities:
    """Free state (B, F, n_free) SI and driven efforts (B, F, n_driven) N or N·m of members
    with their own driven motions, and their derivatives (B, K, F, ·) per unit of each seed
    direction of the motions; ``valid`` (B,) False for members that failed (NaN)."""

    free_q: np.ndarray
    free_qd: np.ndarray
    efforts: np.ndarray
    d_free_q: np.ndarray
    d_free_qd: np.ndarray
    d_efforts: np.ndarray
    valid: np.ndarray


def motion_sensitivities(model, P, motion, dq, dqd, dqdd, free_q0, free_qd0,
                         substeps: int = 1, threads: int | None = None,
                         max_abs: float = MAX_ABS) -> MotionSensitivities:
    """Free state and driven efforts of members with their own driven motions, and their exact
    derivatives along K seed directions of the motions.

    ``P`` (B, n_parameters) SI; ``motion`` a per-member DrivenMotion (q, qd, qdd (B, F, n_driven));
    ``dq``/``dqd``/``dqdd`` (B, K, F, n_driven): the derivatives of the driven samples along each
    direction (rad, rad/s, rad/s² per unit of the direction; the design derivatives of the
    motion, e.g.); the start state (n_free,) or (B, n_free) does not move. ``substeps``
    integrator steps per sample, as in :func:`~bemore.model.simulate`. The states and efforts
    are the engine's (same kernel, same rounding); their derivatives are those of the discrete
    map, with the driven table's derivative exact (it is affine in the samples).
    """
    from bemore.model.generated import run_threads
    from bemore.model.simulate import _check_motion, _coefficients, _lane_arrays, engine_threads
    from bemore.model.table import driven_table

    if motion.members is None:
        raise ModelError("motion sensitivities: one driven motion per member")
    V, valid = model.fields(P)
    B, nf, nd = V.shape[0], model.n_free, model.n_driven
    _check_motion(model, motion, B)
    dq, dqd, dqdd = (np.asarray(a, dtype=np.float64) for a in (dq, dqd, dqdd))
    K, F = dq.shape[1], len(motion.t)
    for a in (dq, dqd, dqdd):
        if a.shape != (B, K, F, nd):
            raise ModelError(f"motion sensitivities: seed shape {a.shape}, expected "
                             f"({B}, K, {F}, {nd})")
    q0 = np.broadcast_to(np.asarray(free_q0, np.float64), (B, nf))
    v0 = np.broadcast_to(np.asarray(free_qd0, np.float64), (B, nf))
    V = runnable_fields(model, V, valid)
    kernel, program = motion_tangent_kernel(model, K)
    slots = program.member_slots
    # One table for the motions, their seeds and a zero motion: the table is affine in the
    # samples (angle sums carry constant offsets), so its derivative is the table of the seeds
    # less that of zero motion.
    zero = np.zeros((1, F, nd))
    tables = driven_table(
        model.tree, slots,
        *(np.concatenate([m, d.reshape(B * K, F, nd), zero])
          for m, d in ((motion.q, dq), (motion.qd, dqd), (motion.qdd, dqdd))),
        motion.dt, substeps)
    D = np.ascontiguousarray(tables[..., :B])
    dD = tables[..., B:B + B * K] - tables[..., B + B * K:]
    # (steps, rows, slots, B·K) → (K, steps, rows, slots, B)
    dD = np.ascontiguousarray(np.moveaxis(dD.reshape(*dD.shape[:3], B, K), 4, 0))
    tri, rows = work_sizes(model, len(model.point_names))
    h = motion.dt / substeps
    work = _lane_arrays(V.T, np.concatenate([q0.T, v0.T]), nf, tri, rows)
    out_q, out_v = np.empty((B, F, nf)), np.empty((B, F, nf))
    out_eff = np.empty((B, F, nd))
    d_q, d_v = np.empty((B, K, F, nf)), np.empty((B, K, F, nf))
    d_eff = np.empty((B, K, F, nd))
    unused = np.empty((1, 1, 1, 1))
    unused_d = np.empty((1, K, 1, 1, 1))
    cost = np.zeros(B)
    alive = valid.astype(np.float64)
    selected = len(program_selection(model))
    after = (np.zeros((1, selected, 2)), np.zeros((1, selected)), 1, 0, 0, max_abs,
             out_q, out_v, unused, out_eff, cost, alive)
    # The seeds are in the driven table's tangent (dD), none in the fields or the start.
    tangents = (*_tangent_arrays(np.zeros((K, *work[0].shape)), np.zeros((K, *work[1].shape)),
                                 nf, tri, rows), unused_d, dD, d_q, d_v, d_eff)
    run_threads(kernel, B, threads or engine_threads(),
                (*work, _coefficients(h), D, h, substeps, 1), (*after, *tangents))
    ok = alive > 0.0
    for a in (out_q, out_v, out_eff, d_q, d_v, d_eff):
        a[~ok] = np.nan
    return MotionSensitivities(out_q, out_v, out_eff, d_q, d_v, d_eff, ok)


def program_selection(model) -> tuple[int, ...]:
    """The engine's default cost points of ``model`` (indices into its points): the selection
    of the kernel module a simulation without a cost uses."""
    from bemore.model.simulate import cost_selection

    return cost_selection(model)
