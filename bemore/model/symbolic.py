"""The equations of motion of a model description, derived symbolically with sympy.

An oracle independent of the engine: it reads the :class:`~bemore.model.description.Description`
(not the compiled tree, not the emitter of ``codegen.py``) and derives, for the coordinates
``q`` (free then driven, SI), the terms of Lagrange's equations

    M(q) q̈ + c(q, q̇) + g(q) = Q(q, q̇) + [0; τ_d]

* ``M`` the mass matrix, ``M = Σ_b m_b J_bᵀ J_b + I_b j_bᵀ j_b`` (J_b: Jacobian of the body's
  centre of mass, j_b of its absolute angle) = ∂²T/∂q̇², T the kinetic energy;
* ``c`` the velocity-product (centrifugal and Coriolis) terms, ``Σ_b m_b J_bᵀ (J̇_b q̇)`` =
  d/dt(∂T/∂q̇) − ∂T/∂q at q̈ = 0 (a planar body's angular Jacobian is constant);
* ``g`` the gravity terms, ∂V/∂q with V = Σ_b m_b g y_b;
* ``Q`` the spring-damper forces on the free coordinates, −k (q − rest) − d q̇;
* ``τ_d`` the driven efforts: the generalised forces the driven coordinates need.

Every position is kept as a sum of *phasors* ``a·(cos θ, sin θ)`` (a: a length, linear in the
coordinates; θ: an absolute angle, linear in the revolute coordinates), so a dot product is
``Σ a b cos(θ_a − θ_b)``: the mass-matrix entries come out as sums of cosines of relative
angles, grouped per trigonometric factor, without a general simplification pass.
Symbols are named after the description: a parameter's symbol is its name (``trunk.mass``), a
coordinate's its name, its velocity ``<name>_d`` and acceleration ``<name>_dd`` (the CSV
convention of ``bemore simulate``); ``g`` is the gravity constant when the description gives a
number. Needs sympy (the ``model`` extra).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from bemore.errors import ModelError
from bemore.model.description import Description, Expr

try:
    import sympy as sp
except ImportError:  # pragma: no cover - exercised by the CLI's one-line message
    sp = None

SYMPY_MISSING = ("sympy is not installed: `bemore model equations` and `export-c` need the "
                 "'model' extra (pip install 'bemore[model]')")


def require_sympy() -> None:
    """Raise one ModelError line when sympy is missing."""
    if sp is None:
        raise ModelError(SYMPY_MISSING)


def _number(value: float):
    """A float as an exact sympy integer when it is one (so 1.0·x prints as x), else a Float
    (the same binary value, printed with 15 digits: 0.571, not 0.57099999999999995)."""
    if float(value).is_integer():
        return sp.Integer(int(value))
    return sp.Float(value, 15)


def _angle(value: float):
    """A fixed placement angle (rad): an exact multiple of π when it is one (180° → π)."""
    fraction = Fraction(value / math.pi).limit_denominator(24)
    if abs(float(fraction) * math.pi - value) <= 1e-12 * max(1.0, abs(value)):
        return sp.Rational(fraction.numerator, fraction.denominator) * sp.pi
    return sp.Float(value, 15)


# A planar vector: {angle θ: coefficient a} meaning Σ a·(cos θ, sin θ).
Phasors = dict


def _add(vector: Phasors, angle, coefficient) -> None:
    if coefficient == 0:
        return
    key = sp.expand(angle)
    vector[key] = vector.get(key, sp.Integer(0)) + coefficient


def _combine(*vectors: Phasors) -> Phasors:
    out: Phasors = {}
    for vector in vectors:
        for angle, coefficient in vector.items():
            _add(out, angle, coefficient)
    return out


class _Trig:
    """Accumulates Σ coefficient × trigonometric factor, one coefficient per factor."""

    def __init__(self, expand: bool = True) -> None:
        self.terms: dict = {}
        self.expand = expand  # False: keep each contribution's factors (rates stay grouped)

    def add(self, coefficient, factor) -> None:
        # cos(θ + π) evaluates to −cos(θ), cos(θ − π/2) to sin(θ): split the sign off.
        sign, base = factor.as_coeff_Mul()
        self.terms[base] = self.terms.get(base, sp.Integer(0)) + sign * coefficient

    def dot(self, a: Phasors, b: Phasors, scale=1) -> None:
        """Add scale × (a · b)."""
        for ta, ca in a.items():
            for tb, cb in b.items():
                self.add(scale * ca * cb, sp.cos(ta - tb))

    def expression(self):
        total = sp.Integer(0)
        for factor, coefficient in self.terms.items():
            coefficient = sp.factor_terms(sp.expand(coefficient) if self.expand else coefficient)
            if coefficient != 0:
                total += coefficient * factor
        return total


@dataclass
class SymbolicModel:
    """The symbolic equations of motion of one description (see the module docstring)."""

    description: Description
    coordinates: tuple[str, ...]  # free then driven
    n_free: int
    q: list  # coordinate symbols
    qd: list  # velocity symbols (<name>_d)
    qdd: list  # acceleration symbols (<name>_dd)
    parameters: dict  # parameter name → symbol
    constants: dict  # symbol → value (gravity when a number)
    mass_matrix: object  # sympy Matrix (n, n)
    velocity_terms: list  # c (n,)
    gravity_terms: list  # g (n,)
    spring_terms: list  # Q on the free coordinates (n_free,)
    points: dict  # point name → (x, y)
    units: dict = field(default_factory=dict)  # parameter name → unit as written

    @property
    def free(self) -> tuple[str, ...]:
        """Free coordinates."""
        return self.coordinates[: self.n_free]

    @property
    def driven(self) -> tuple[str, ...]:
        """Driven coordinates."""
        return self.coordinates[self.n_free:]

    def bias(self) -> list:
        """c + g (n,): the inverse dynamics at q̈ = 0, without spring-dampers."""
        return [c + g for c, g in zip(self.velocity_terms, self.gravity_terms, strict=True)]

    def inverse_dynamics(self) -> list:
        """τ = M q̈ + c + g (n,), in N (prismatic) or N·m (revolute), without spring-dampers."""
        M, n = self.mass_matrix, len(self.coordinates)
        return [sum((M[i, j] * self.qdd[j] for j in range(n)), sp.Integer(0)) + b
                for i, b in enumerate(self.bias())]

    def driven_efforts(self) -> list:
        """τ_d (n_driven,): the driven rows of M q̈ + c + g, the free q̈ being the hybrid
        dynamics' solution (symbols ``<name>_dd``); the free rows equal the spring forces."""
        return self.inverse_dynamics()[self.n_free:]


def _field(expr: Expr, symbols: dict):
    """A description field (offset + Σ c·p + Σ c·p·q) as a sympy expression."""
    out = _number(expr.offset) if expr.offset else sp.Integer(0)
    for name, c in expr.terms:
        out += _number(c) * symbols[name]
    for a, b, c in expr.products:
        out += _number(c) * symbols[a] * symbols[b]
    return out


def derive(description: Description) -> SymbolicModel:
    """The symbolic equations of motion of ``description`` (sympy; see the module docstring)."""
    require_sympy()
    names = description.free_coordinates + description.driven_coordinates
    q = [sp.Symbol(n, real=True) for n in names]
    qd = [sp.Symbol(f"{n}_d", real=True) for n in names]
    qdd = [sp.Symbol(f"{n}_dd", real=True) for n in names]
    index = {n: i for i, n in enumerate(names)}
    taken = set(names) | {f"{n}_d" for n in names} | {f"{n}_dd" for n in names}
    clash = sorted(taken & set(description.parameters))
    if clash:
        raise ModelError(f"{description.source}: {clash[0]!r} names both a parameter and a "
                         "coordinate (or its rate): the equations need distinct symbols")
    params = {n: sp.Symbol(n, real=True) for n in description.parameters}
    constants: dict = {}
    if description.gravity.is_constant and "g" not in params and "g" not in taken:
        gravity = sp.Symbol("g", positive=True)
        constants[gravity] = description.gravity.offset
    else:
        gravity = _field(description.gravity, params)

    # Frames: origin (phasors) and absolute angle, body by body (parents first).
    frame_of: dict[str, tuple[Phasors, object]] = {"world": ({}, sp.Integer(0))}
    for body in description.bodies:
        origin, angle = frame_of[body.parent]
        origin = dict(origin)
        for element in body.joint:
            at_x, at_y = _field(element.at_x, params), _field(element.at_y, params)
            origin = _combine(origin, {angle: at_x} if at_x != 0 else {},
                              {angle + sp.pi / 2: at_y} if at_y != 0 else {})
            angle = angle + (_angle(element.angle) if element.angle else 0)
            if element.type == "revolute":
                angle = angle + element.axis * q[index[element.coordinate]]
            elif element.type == "prismatic":
                direction = angle if element.axis == 0 else angle + sp.pi / 2
                origin = _combine(origin, {direction: q[index[element.coordinate]]})
        frame_of[body.name] = (origin, sp.expand(angle))

    def place(frame: str, x: Expr, y: Expr) -> Phasors:
        origin, angle = frame_of[frame]
        px, py = _field(x, params), _field(y, params)
        return _combine(origin, {angle: px} if px != 0 else {},
                        {angle + sp.pi / 2: py} if py != 0 else {})

    def jacobian(vector: Phasors, i: int) -> Phasors:
        out: Phasors = {}
        for angle, a in vector.items():
            _add(out, angle, sp.diff(a, q[i]))
            _add(out, angle + sp.pi / 2, a * sp.diff(angle, q[i]))
        return out

    def rate(expr):
        return sum((sp.diff(expr, q[i]) * qd[i] for i in range(len(q))), sp.Integer(0))

    n = len(names)
    M_acc = [[_Trig() for _ in range(n)] for _ in range(n)]
    c_acc = [_Trig(expand=False) for _ in range(n)]
    g_acc = [_Trig() for _ in range(n)]
    up: Phasors = {sp.pi / 2: sp.Integer(1)}
    for body in description.bodies:
        m = _field(body.mass, params)
        inertia = _field(body.inertia, params)
        centre = place(body.name, body.com_x, body.com_y)
        _, angle = frame_of[body.name]
        J = [jacobian(centre, i) for i in range(n)]
        spin = [sp.diff(angle, q[i]) for i in range(n)]
        # Velocity-product acceleration of the centre (q̈ = 0; a and θ are linear in q):
        # d²/dt² [a (cos θ, sin θ)] = 2 ȧ θ̇ (−sin θ, cos θ) − a θ̇² (cos θ, sin θ).
        product: Phasors = {}
        for theta, a in centre.items():
            theta_d = rate(theta)
            _add(product, theta + sp.pi / 2, 2 * rate(a) * theta_d)
            _add(product, theta, -a * theta_d ** 2)
        for i in range(n):
            if not J[i] and spin[i] == 0:
                continue
            c_acc[i].dot(J[i], product, m)
            g_acc[i].dot(J[i], up, m * gravity)
            for j in range(i + 1):
                M_acc[i][j].dot(J[i], J[j], m)
                if spin[i] != 0 and spin[j] != 0:
                    M_acc[i][j].add(inertia * spin[i] * spin[j], sp.Integer(1))
    M = sp.zeros(n, n)
    for i in range(n):
        for j in range(i + 1):
            M[i, j] = M[j, i] = M_acc[i][j].expression()
    springs = []
    by_coordinate = {s.coordinate: s for s in description.springs}
    for i, name in enumerate(description.free_coordinates):
        spring = by_coordinate.get(name)
        if spring is None:
            springs.append(sp.Integer(0))
            continue
        k, d = _field(spring.stiffness, params), _field(spring.damping, params)
        rest = _field(spring.rest, params)
        springs.append(-k * (q[i] - rest) - d * qd[i])
    points = {}
    for point in description.points:
        vector = place(point.body, point.x, point.y)
        x = sum((a * sp.cos(t) for t, a in vector.items()), sp.Integer(0))
        y = sum((a * sp.sin(t) for t, a in vector.items()), sp.Integer(0))
        points[point.name] = (x, y)
    return SymbolicModel(
        description=description, coordinates=names, n_free=len(description.free_coordinates),
        q=q, qd=qd, qdd=qdd, parameters=params, constants=constants, mass_matrix=M,
        velocity_terms=[e.expression() for e in c_acc],
        gravity_terms=[e.expression() for e in g_acc],
        spring_terms=springs, points=points, units=dict(description.parameter_units))


class NumericModel:
    """The symbolic model lambdified (sympy → Python ``math``), evaluated one state at a time.

    An oracle for the engine: parameters in ``parameter_names`` order (SI), coordinates free
    then driven. Slow (pure Python), meant for tests and checks, not for simulation.
    """

    def __init__(self, sym: SymbolicModel, parameter_names: tuple[str, ...]) -> None:
        require_sympy()
        self.sym = sym
        n = len(sym.coordinates)
        params = [sym.parameters[name] for name in parameter_names]
        args = [*params, *sym.q, *sym.qd]
        subs = dict(sym.constants)
        M = sym.mass_matrix.subs(subs)
        lower = [M[i, j] for i in range(n) for j in range(i + 1)]
        self._mass = sp.lambdify(args[: len(params) + n], lower, "math", cse=True)
        self._velocity = sp.lambdify(args, [e.subs(subs) for e in sym.velocity_terms], "math",
                                     cse=True)
        self._gravity = sp.lambdify(args[: len(params) + n],
                                    [e.subs(subs) for e in sym.gravity_terms], "math", cse=True)
        self._springs = sp.lambdify(args, [e.subs(subs) for e in sym.spring_terms], "math",
                                    cse=True)
        flat = [c.subs(subs) for xy in sym.points.values() for c in xy]
        self._points = sp.lambdify(args[: len(params) + n], flat, "math", cse=True)
        self.n = n

    def terms(self, p, q, v) -> tuple:
        """(M (n, n), c (n,), g (n,), Q_springs (n_free,)) at one state, numpy arrays."""
        import numpy as np

        n = self.n
        values = [float(x) for x in (*p, *q)]
        lower = self._mass(*values)
        M = np.zeros((n, n))
        M[np.tril_indices(n)] = lower
        M = M + np.tril(M, -1).T
        rates = [float(x) for x in v]
        return (M, np.array(self._velocity(*values, *rates)), np.array(self._gravity(*values)),
                np.array(self._springs(*values, *rates)))

    def hybrid(self, p, qf, vf, qd, vd, ad) -> tuple:
        """Free accelerations (n_free,) and driven efforts (n_driven,) at one state: solve
        M_ff q̈_f = Q − c_f − g_f − M_fd q̈_d, then τ_d = M_d· q̈ + c_d + g_d."""
        import numpy as np

        nf = self.sym.n_free
        M, c, g, springs = self.terms(p, [*qf, *qd], [*vf, *vd])
        ad = np.asarray(ad, dtype=float)
        rhs = springs - c[:nf] - g[:nf] - M[:nf, nf:] @ ad
        af = np.linalg.solve(M[:nf, :nf], rhs)
        effort = M[nf:, :nf] @ af + M[nf:, nf:] @ ad + c[nf:] + g[nf:]
        return af, effort

    def points(self, p, q) -> object:
        """Named points (n_points, 2), m."""
        import numpy as np

        return np.array(self._points(*[float(x) for x in (*p, *q)])).reshape(-1, 2)
