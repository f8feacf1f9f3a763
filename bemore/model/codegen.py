"""Straight-line code emission for the generated kernels: the tree unrolled symbolically.

An :class:`Emitter` writes single-assignment lines with constants folded (0, 1, fixed lengths,
frames with no driven rotation); the ``_emit_*`` functions write the planar recursion (frame
geometry, RNEA, spring-dampers, mass matrix from Jacobian columns, Cholesky) for one lane with
no library call (polynomial sine/cosine), so that LLVM vectorises across population members.
``generated.py`` assembles these pieces into the batch kernels; ``kernels.py`` stays the
readable reference and the tests check that both agree.
"""

from __future__ import annotations

import re

import numpy as np

from bemore.model.tree import PRISMATIC, REVOLUTE, Tree

Sym = float | str


_LANE_INPUT = re.compile(r"^(V\d+|q\d+|v\d+|MX_\d+|U\d_\d+)$")
_NOT_NAMES = {"np", "floor", "sqrt", "float64"}


class Emitter:
    """SSA emitter with constant folding of 0, 1 and numeric constants, common subexpression
    elimination (the same expression text gives the same name), and the split of values into
    *lane* values (they depend on a member's fields V…, free state q…/v… or per-lane arrays
    MX_…, U…) and *shared* ones (driven values and constants only: the same for every lane of
    a shared motion, computed once per stage outside the lane loop)."""

    def __init__(self, prefix: str) -> None:
        self.lines: list[str] = []
        self.prefix = prefix
        self.count = 0
        self.known: dict[str, str] = {}
        self.lane: set[str] = set()

    def new(self, text: str, name: str | None = None) -> str:
        """The name of a line computing ``text`` (the existing one if ``text`` was computed
        before); a new line is named ``name`` if given, else by the prefix and a counter."""
        if text in self.known:
            return self.known[text]
        name = f"{self.prefix}{self.count}" if name is None else name
        self.count += 1
        self.lines.append(f"{name} = {text}")
        self.known[text] = name
        if any(word in self.lane or _LANE_INPUT.match(word)
               for word in re.findall(r"[A-Za-z_]\w*", text) if word not in _NOT_NAMES):
            self.lane.add(name)
        return name

    def shared_names(self) -> set[str]:
        """Names of the shared values emitted so far."""
        return {line.split(" = ", 1)[0] for line in self.lines} - self.lane

    def sub(self, a: Sym, b: Sym) -> Sym:
        if isinstance(a, float) and isinstance(b, float):
            return a - b
        if b == 0.0:
            return a
        if a == 0.0:
            return self.neg(b)
        if a == b:
            return 0.0
        return self.new(f"{self.fmt(a)} - {self.fmt(b)}")

    @staticmethod
    def fmt(a: Sym) -> str:
        return f"({a!r})" if isinstance(a, float) else a

    def mul(self, a: Sym, b: Sym) -> Sym:
        if isinstance(a, float) and isinstance(b, float):
            return a * b
        if a == 0.0 or b == 0.0:
            return 0.0
        if a == 1.0:
            return b
        if b == 1.0:
            return a
        if a == -1.0:
            return self.neg(b)
        if b == -1.0:
            return self.neg(a)
        return self.new(f"{self.fmt(a)} * {self.fmt(b)}")

    def add(self, a: Sym, b: Sym) -> Sym:
        if isinstance(a, float) and isinstance(b, float):
            return a + b
        if a == 0.0:
            return b
        if b == 0.0:
            return a
        return self.new(f"{self.fmt(a)} + {self.fmt(b)}")

    def neg(self, a: Sym) -> Sym:
        if isinstance(a, float):
            return -a
        return self.new(f"-{a}")

    def sum(self, terms: list[Sym]) -> Sym:
        """Pairwise (balanced) sum: a dependency chain of log2(n) additions, not n."""
        terms = [t for t in terms if t != 0.0]
        if not terms:
            return 0.0
        while len(terms) > 1:
            paired = [self.add(a, b) for a, b in zip(terms[::2], terms[1::2], strict=False)]
            terms = paired + ([terms[-1]] if len(terms) % 2 else [])
        return terms[0]

    def dot(self, pairs: list[tuple[Sym, Sym]]) -> Sym:
        return self.sum([self.mul(a, b) for a, b in pairs])

    def sincos(self, x: Sym) -> tuple[Sym, Sym]:
        """sin, cos by range reduction to [−π, π], Taylor on [−π/4, π/4], two doublings.

        The reduced angle, the half angle's sine and cosine and the results are named as
        :func:`sincos_lines` reads them (``…RED n``, ``…HS n``, ``…HC n``, ``…SIN n``,
        ``…COS n``): the tangent kernels differentiate the pair as d sin = cos·dr and
        d cos = −sin·dr rather than through the polynomial."""
        if isinstance(x, float):
            return float(np.sin(x)), float(np.cos(x))
        n = self.count
        k = self.new(f"np.floor({x} * {1.0 / (2.0 * np.pi)!r} + 0.5)")
        r = self.new(f"({x} - {k} * 6.283185307179586) - {k} * 2.4492935982947064e-16",
                     f"{self.prefix}RED{n}")
        r4 = self.new(f"0.25 * {r}")
        z = self.new(f"{r4} * {r4}")
        sin_c = [1.0 / np.prod(np.arange(1, 2 * i + 2, dtype=float)) * (-1) ** i
                 for i in range(9)]
        cos_c = [1.0 / np.prod(np.arange(1, 2 * i + 1, dtype=float)) * (-1) ** i
                 for i in range(10)]
        # Each polynomial as two halves joined by z⁵ (two short chains, not one long one).
        z5 = self.new(f"({z} * {z}) * ({z} * {z}) * {z}")
        s = self.new(f"({_horner(sin_c[:5], z)}) + {z5} * ({_horner(sin_c[5:], z)})")
        c1 = self.new(f"({_horner(cos_c[:5], z)}) + {z5} * ({_horner(cos_c[5:], z)})")
        s1 = self.new(f"{r4} * {s}")
        for kinds in (("HS", "HC"), ("SIN", "COS")):
            s1, c1 = (self.new(f"2.0 * {s1} * {c1}", f"{self.prefix}{kinds[0]}{n}"),
                      self.new(f"{c1} * {c1} - {s1} * {s1}", f"{self.prefix}{kinds[1]}{n}"))
        return s1, c1


_SINCOS_NAME = re.compile(r"^(?P<head>\w*?)(?P<kind>SIN|COS)(?P<n>\d+)(?P<tail>_\w+)?$")


def sincos_lines(name: str) -> tuple[str, str, str, str] | None:
    """For the name of a sine or cosine :meth:`Emitter.sincos` wrote (after any renaming that
    appends a suffix): ("sin" or "cos", the reduced angle's name, the half angle's sine's and
    cosine's names); None for any other name. sin r = 2·hs·hc and cos r = hc² − hs².

    >>> sincos_lines("sg_SIN60_2")
    ('sin', 'sg_RED60_2', 'sg_HS60_2', 'sg_HC60_2')
    >>> sincos_lines("sg_60_2") is None
    True
    """
    match = _SINCOS_NAME.match(name)
    if match is None:
        return None
    head, n, tail = match["head"], match["n"], match["tail"] or ""
    return (match["kind"].lower(), f"{head}RED{n}{tail}", f"{head}HS{n}{tail}",
            f"{head}HC{n}{tail}")


def _horner(coefficients: list[float], z: str) -> str:
    # float(): numpy 2 writes a numpy scalar as "np.float64(…)", a call numba must type.
    text = repr(float(coefficients[-1]))
    for c in reversed(coefficients[:-1]):
        text = f"{float(c)!r} + {z} * ({text})"
    return text


class _Lane:
    """What one lane's code reads: field values (constants folded), free and driven state."""

    def __init__(self, tree: Tree, em: Emitter) -> None:
        self.tree = tree
        self.em = em
        self.used_fields: set[int] = set()

    def field(self, index: int) -> Sym:
        if self.tree.is_constant_field(index):
            return float(self.tree.field_offset[index])
        self.used_fields.add(index)
        return f"V{index}"


def _driven_angle_constant(tree: Tree) -> list[float | None]:
    """Per frame: the driven angle sum if it is a constant (no driven revolute above), else None."""
    out: list[float | None] = []
    for k in range(len(tree.frame_parent)):
        p = tree.frame_parent[k]
        base = 0.0 if p < 0 else out[p]
        if base is None or (tree.frame_kind[k] == REVOLUTE and tree.frame_driven[k] >= 0):
            out.append(None)
        else:
            out.append(base + float(tree.frame_angle[k]))
    return out


def _basis_frame(tree: Tree) -> int:
    """The first free revolute frame (topological order), or -1: its rotation is the basis."""
    for k in range(len(tree.frame_parent)):
        if tree.frame_kind[k] == REVOLUTE and tree.frame_free[k] >= 0:
            return k
    return -1


def _subtree(tree: Tree, root: int) -> set[int]:
    inside: set[int] = set()
    for k in range(len(tree.frame_parent)):
        if k == root or tree.frame_parent[k] in inside:
            inside.add(k)
    return inside


def _emit_geometry(lane: _Lane, qf: list[Sym], drv: dict, basis: bool = False) -> dict:
    """Orientations, hang vectors, prismatic axes and origins of every frame.

    World coordinates; or, with ``basis``, coordinates in the basis turned by the rotation β of
    the first free revolute frame kβ, with origins relative to kβ's origin (key "beta": cos β,
    sin β). Generalised forces and the mass matrix are the same in any basis, and below kβ
    every orientation and fixed hang vector then depends only on driven values: shared by the
    lanes of a shared motion.
    """
    tree, em = lane.tree, lane.em
    constant = _driven_angle_constant(tree)
    kb = _basis_frame(tree) if basis else -1
    root_c, root_s = 1.0, 0.0
    g: dict = {"cA": [], "sA": [], "cP": [], "sP": [], "d": [], "e": [], "O": []}
    if kb >= 0:
        sb, cb = em.sincos(em.mul(float(tree.frame_axis[kb]), qf[tree.frame_free[kb]]))
        root_c, root_s = cb, em.neg(sb)
        g["beta"] = (cb, sb)
    for k in range(len(tree.frame_parent)):
        p = tree.frame_parent[k]
        pc, ps = (root_c, root_s) if p < 0 else (g["cA"][p], g["sA"][p])
        cp, sp = (root_c, root_s) if p < 0 else (g["cP"][p], g["sP"][p])
        kind, axis = tree.frame_kind[k], int(tree.frame_axis[k])
        if k == kb:
            cp, sp = 1.0, 0.0  # the basis turns with this frame (no free rotation above it)
        elif kind == REVOLUTE and tree.frame_free[k] >= 0:
            s, c = em.sincos(em.mul(float(axis), qf[tree.frame_free[k]]))
            cp, sp = em.sub(em.mul(cp, c), em.mul(sp, s)), em.add(em.mul(sp, c), em.mul(cp, s))
        if constant[k] is None:
            cd, sd = drv["cd"][k], drv["sd"][k]
        else:
            cd, sd = float(np.cos(constant[k])), float(np.sin(constant[k]))
        ca = em.sub(em.mul(cp, cd), em.mul(sp, sd))
        sa = em.add(em.mul(sp, cd), em.mul(cp, sd))
        ax, ay = lane.field(tree.frame_at[k, 0]), lane.field(tree.frame_at[k, 1])
        dx = em.sub(em.mul(pc, ax), em.mul(ps, ay))
        dy = em.add(em.mul(ps, ax), em.mul(pc, ay))
        e = (0.0, 0.0)
        if kind == PRISMATIC:
            e = (ca, sa) if axis == 0 else (em.neg(sa), ca)
            qk = qf[tree.frame_free[k]] if tree.frame_free[k] >= 0 else drv["q"][
                tree.frame_driven[k]]
            dx, dy = em.add(dx, em.mul(qk, e[0])), em.add(dy, em.mul(qk, e[1]))
        if k == kb:
            origin: tuple[Sym, Sym] = (0.0, 0.0)
            g["Okb"] = (dx, dy) if p < 0 else (em.add(g["O"][p][0], dx),
                                               em.add(g["O"][p][1], dy))
        else:
            origin = (dx, dy) if p < 0 else (em.add(g["O"][p][0], dx), em.add(g["O"][p][1], dy))
        for key, value in (("cA", ca), ("sA", sa), ("cP", cp), ("sP", sp), ("d", (dx, dy)),
                           ("e", e), ("O", origin)):
            g[key].append(value)
    if kb >= 0:
        # Frames outside kβ's subtree: origins relative to kβ's origin too.
        inside = _subtree(tree, kb)
        okx, oky = g["Okb"]
        for k in range(len(tree.frame_parent)):
            if k not in inside:
                g["O"][k] = (em.sub(g["O"][k][0], okx), em.sub(g["O"][k][1], oky))
    return g


def _emit_points(lane: _Lane, g: dict, indices: list[int]) -> list[tuple[Sym, Sym]]:
    tree, em = lane.tree, lane.em
    out = []
    for i in indices:
        k = tree.point_frame[i]
        px, py = lane.field(tree.point_fields[i, 0]), lane.field(tree.point_fields[i, 1])
        ca, sa = g["cA"][k], g["sA"][k]
        out.append((em.add(g["O"][k][0], em.sub(em.mul(ca, px), em.mul(sa, py))),
                    em.add(g["O"][k][1], em.add(em.mul(sa, px), em.mul(ca, py)))))
    return out


def _emit_rnea(lane: _Lane, g: dict, vf: list[Sym], drv: dict, af: list[Sym] | None,
               driven_forces: bool = True):
    """RNEA with gravity: generalised forces of the free and driven coordinates.

    Free accelerations ``af`` (None: zero). Returns (free forces by free index, driven forces
    by driven index — empty without ``driven_forces`` —, bodies as (frame, mass, inertia,
    CoM position in the geometry's coordinates)).

    With ``driven_forces`` the backward pass carries every frame's force and moment up the tree.
    Without it only the free coordinates' forces are made, from sums over their subtrees
    (:func:`_free_forces`): the moments are then taken about one origin, so no moment is
    carried from frame to frame (≈ 60 flop fewer per evaluation on the gymnast).
    """
    tree, em = lane.tree, lane.em
    n = len(tree.frame_parent)
    w: list[Sym] = []
    eps: list[Sym] = []
    acc: list[tuple[Sym, Sym]] = []
    grav = lane.field(tree.gravity_field)
    root_acc: tuple[Sym, Sym] = (0.0, 0.0)
    if "beta" in g:
        # Gravity as an upward acceleration of the base, in the turned basis: −R(−β)(0, −g).
        cb, sb = g["beta"]
        root_acc = (em.mul(grav, sb), em.mul(grav, cb))
    for k in range(n):
        p = tree.frame_parent[k]
        wp, ep = (0.0, 0.0) if p < 0 else (w[p], eps[p])
        apx, apy = root_acc if p < 0 else acc[p]
        dx, dy = g["d"][k]
        wp2 = em.mul(wp, wp)
        ax = em.sub(em.sub(apx, em.mul(ep, dy)), em.mul(wp2, dx))
        ay = em.sub(em.add(apy, em.mul(ep, dx)), em.mul(wp2, dy))
        wk, ek = wp, ep
        kind, axis = tree.frame_kind[k], float(tree.frame_axis[k])
        free, driven = tree.frame_free[k], tree.frame_driven[k]
        qdot = vf[free] if free >= 0 else (drv["v"][driven] if driven >= 0 else 0.0)
        qdd = drv["a"][driven] if driven >= 0 else 0.0
        if free >= 0 and af is not None:
            qdd = af[free]
        if kind == REVOLUTE:
            wk = em.add(wp, em.mul(axis, qdot))
            ek = em.add(ep, em.mul(axis, qdd))
        elif kind == PRISMATIC:
            ex, ey = g["e"][k]
            cor = em.mul(em.mul(2.0, wp), qdot)
            ax = em.add(em.sub(ax, em.mul(cor, ey)), em.mul(qdd, ex))
            ay = em.add(em.add(ay, em.mul(cor, ex)), em.mul(qdd, ey))
        w.append(wk)
        eps.append(ek)
        acc.append((ax, ay))
    F: list[list[Sym]] = [[0.0, 0.0, 0.0] for _ in range(n)]
    if "beta" in g:
        grav = 0.0  # already in the base acceleration
    bodies = []
    forces: list[tuple[Sym, Sym, Sym]] = []  # per body: force (x, y) and I·ε
    for b in range(len(tree.body_frame)):
        k = tree.body_frame[b]
        m, cx, cy, inertia = (lane.field(f) for f in tree.body_fields[b])
        ca, sa = g["cA"][k], g["sA"][k]
        rx = em.sub(em.mul(ca, cx), em.mul(sa, cy))
        ry = em.add(em.mul(sa, cx), em.mul(ca, cy))
        w2 = em.mul(w[k], w[k])
        acx = em.sub(em.sub(acc[k][0], em.mul(eps[k], ry)), em.mul(w2, rx))
        acy = em.sub(em.add(acc[k][1], em.mul(eps[k], rx)), em.mul(w2, ry))
        fx, fy = em.mul(m, acx), em.mul(m, em.add(acy, grav))
        F[k][0] = em.add(F[k][0], fx)
        F[k][1] = em.add(F[k][1], fy)
        spin = em.mul(inertia, eps[k])
        F[k][2] = em.add(F[k][2], em.add(spin, em.sub(em.mul(rx, fy), em.mul(ry, fx))))
        bodies.append((k, m, inertia, (em.add(g["O"][k][0], rx), em.add(g["O"][k][1], ry))))
        forces.append((fx, fy, spin))
    if not driven_forces:
        return _free_forces(lane, g, bodies, forces), {}, bodies
    tau_free: dict[int, Sym] = {}
    tau_driven: dict[int, Sym] = {}
    for k in range(n - 1, -1, -1):
        if tree.frame_free[k] >= 0 or tree.frame_driven[k] >= 0:
            if tree.frame_kind[k] == REVOLUTE:
                tau = em.mul(float(tree.frame_axis[k]), F[k][2])
            else:
                tau = em.dot([(g["e"][k][0], F[k][0]), (g["e"][k][1], F[k][1])])
            if tree.frame_free[k] >= 0:
                tau_free[tree.frame_free[k]] = tau
            else:
                tau_driven[tree.frame_driven[k]] = tau
        p = tree.frame_parent[k]
        if p >= 0:
            dx, dy = g["d"][k]
            F[p][0] = em.add(F[p][0], F[k][0])
            F[p][1] = em.add(F[p][1], F[k][1])
            F[p][2] = em.add(F[p][2], em.add(F[k][2], em.sub(em.mul(dx, F[k][1]),
                                                             em.mul(dy, F[k][0]))))
    return tau_free, tau_driven, bodies


def _nearest_free_frames(tree: Tree) -> list[int]:
    """Per frame, the nearest frame at or above it that has a free coordinate (-1: none): the
    only frames whose subtree sums the free coordinates' forces need (:func:`_free_forces`)."""
    nearest: list[int] = []
    for k in range(len(tree.frame_parent)):
        p = tree.frame_parent[k]
        nearest.append(k if tree.frame_free[k] >= 0 else (nearest[p] if p >= 0 else -1))
    return nearest


def _free_forces(lane: _Lane, g: dict, bodies: list, forces: list) -> dict[int, Sym]:
    """Generalised forces of the free coordinates from the bodies' forces (RNEA's backward
    pass restricted to them): for each free frame j, the force F_j and the moment N_j about
    the coordinates' origin of the bodies of its subtree (summed at the free frames only, each
    body into its nearest free frame at or above it, each free frame into the next one up);
    then τ_j = e_j · F_j for a prismatic j, a_j (N_j − O_j × F_j) for a revolute one (O_j its
    origin: zero for the turned basis' own frame). Bodies above every free frame do not count.
    """
    tree, em = lane.tree, lane.em
    n = len(tree.frame_parent)
    nearest = _nearest_free_frames(tree)
    under_free_hinge = [False] * n  # a free revolute frame at or above: its bodies' moments count
    for k in range(n):
        p = tree.frame_parent[k]
        under_free_hinge[k] = (tree.frame_kind[k] == REVOLUTE and tree.frame_free[k] >= 0) or (
            p >= 0 and under_free_hinge[p])
    total: list[list[Sym]] = [[0.0, 0.0, 0.0] for _ in range(n)]
    for (k, _m, _inertia, (cx, cy)), (fx, fy, spin) in zip(bodies, forces, strict=True):
        j = nearest[k]
        if j < 0:
            continue
        t = total[j]
        t[0], t[1] = em.add(t[0], fx), em.add(t[1], fy)
        if under_free_hinge[k]:
            t[2] = em.add(t[2], em.add(spin, em.sub(em.mul(cx, fy), em.mul(cy, fx))))
    tau: dict[int, Sym] = {}
    for k in range(n - 1, -1, -1):
        i = tree.frame_free[k]
        if i < 0:
            continue
        fx, fy, nz = total[k]
        if tree.frame_kind[k] == REVOLUTE:
            ox, oy = g["O"][k]
            tau[i] = em.mul(float(tree.frame_axis[k]),
                            em.sub(nz, em.sub(em.mul(ox, fy), em.mul(oy, fx))))
        else:
            tau[i] = em.dot([(g["e"][k][0], fx), (g["e"][k][1], fy)])
        p = tree.frame_parent[k]
        up = nearest[p] if p >= 0 else -1
        if up >= 0:
            total[up] = [em.add(a, b) for a, b in zip(total[up], total[k], strict=True)]
    return tau


def _emit_springs(lane: _Lane, qf: list[Sym], vf: list[Sym]) -> list[Sym]:
    """Spring-damper generalised force of every free coordinate (0.0 where none)."""
    tree, em = lane.tree, lane.em
    out: list[Sym] = []
    for i in range(tree.n_free):
        stiff, damp, rest = tree.spring_fields[i]
        spring: Sym = 0.0
        if stiff >= 0:
            spring = em.neg(em.add(em.mul(lane.field(stiff), em.sub(qf[i], lane.field(rest))),
                                   em.mul(lane.field(damp), vf[i])))
        out.append(spring)
    return out


def _emit_mass(lane: _Lane, g: dict, bodies: list) -> dict:
    """Free-free mass matrix (lower triangle) by composite rigid bodies (CRBA).

    For each free coordinate j, the composite of the bodies below its frame (mass m, first
    moment h and rotational inertia J about the frame origin O_j) gives the force F_j and moment
    N_j (about O_j) that a unit q̈_j needs; M_ij = S_i · (F_j, N_j) for i on the path above j
    (0 otherwise): e_i · F_j for a prismatic i, a_i (N_j + (O_j − O_i) × F_j) for a revolute.
    """
    tree, em = lane.tree, lane.em
    n, nf = len(tree.frame_parent), tree.n_free
    # Σ m, Σ m·c, Σ (I + m|c|²) of the bodies hanging from each frame, then of its subtree.
    comp: list[list[Sym]] = [[0.0, 0.0, 0.0, 0.0] for _ in range(n)]
    for k, m, inertia, (cx, cy) in bodies:
        mcx, mcy = em.mul(m, cx), em.mul(m, cy)
        c = comp[k]
        c[0], c[1], c[2] = em.add(c[0], m), em.add(c[1], mcx), em.add(c[2], mcy)
        c[3] = em.add(c[3], em.add(inertia, em.add(em.mul(mcx, cx), em.mul(mcy, cy))))
    for k in range(n - 1, 0, -1):
        p = tree.frame_parent[k]
        if p >= 0:
            comp[p] = [em.add(a, b) for a, b in zip(comp[p], comp[k], strict=True)]
    free_frames = [int(np.where(tree.frame_free == i)[0][0]) for i in range(nf)]
    ancestors = []
    for k in range(n):
        chain, p = {k}, tree.frame_parent[k]
        while p >= 0:
            chain.add(p)
            p = tree.frame_parent[p]
        ancestors.append(chain)
    M: dict[tuple[int, int], Sym] = {}
    for j, kj in enumerate(free_frames):
        m, sx, sy, j0 = comp[kj]
        ox, oy = g["O"][kj]
        hx, hy = em.sub(sx, em.mul(m, ox)), em.sub(sy, em.mul(m, oy))
        if tree.frame_kind[kj] == REVOLUTE:
            a = float(tree.frame_axis[kj])
            fx, fy = em.mul(-a, hy), em.mul(a, hx)
            # J about O_j = Σ(I + m|c|²) − 2 O·S + m|O|²
            jo = em.add(em.sub(j0, em.mul(2.0, em.dot([(ox, sx), (oy, sy)]))),
                        em.mul(m, em.dot([(ox, ox), (oy, oy)])))
            nz = em.mul(a, jo)
        else:
            ex, ey = g["e"][kj]
            fx, fy = em.mul(m, ex), em.mul(m, ey)
            nz = em.sub(em.mul(hx, ey), em.mul(hy, ex))
        for i, ki in enumerate(free_frames):
            if ki not in ancestors[kj]:
                continue
            if tree.frame_kind[ki] == REVOLUTE:
                ux, uy = em.sub(ox, g["O"][ki][0]), em.sub(oy, g["O"][ki][1])
                value = em.mul(float(tree.frame_axis[ki]),
                               em.add(nz, em.sub(em.mul(ux, fy), em.mul(uy, fx))))
            elif (tree.frame_kind[kj] == PRISMATIC and g["cA"][ki] == g["cA"][kj]
                  and g["sA"][ki] == g["sA"][kj]):
                # Two sliders in one orientation: e_i·e_j is exactly 1 (same axis) or 0.
                value = m if tree.frame_axis[ki] == tree.frame_axis[kj] else 0.0
            else:
                value = em.dot([(g["e"][ki][0], fx), (g["e"][ki][1], fy)])
            M[(max(i, j), min(i, j))] = value
    return {(i, j): M.get((i, j), 0.0) for i in range(nf) for j in range(i + 1)}


def _emit_dynamics(lane: _Lane, qf: list[Sym], vf: list[Sym], drv: dict):
    """Free-free mass matrix (lower triangle) and rhs = springs − RNEA(q̈_f = 0)."""
    em = lane.em
    g = _emit_geometry(lane, qf, drv, basis=True)
    tau, _, bodies = _emit_rnea(lane, g, vf, drv, None, driven_forces=False)
    rhs = [em.sub(s, tau[i]) for i, s in enumerate(_emit_springs(lane, qf, vf))]
    return _emit_mass(lane, g, bodies), rhs


def emit_efforts(lane: _Lane, qf: list[Sym], vf: list[Sym], drv: dict) -> list[Sym]:
    """Driven efforts: the free accelerations of the hybrid dynamics, then RNEA with them."""
    em, nf = lane.em, lane.tree.n_free
    g = _emit_geometry(lane, qf, drv, basis=True)
    tau, _, bodies = _emit_rnea(lane, g, vf, drv, None, driven_forces=False)
    rhs = [em.sub(s, tau[i]) for i, s in enumerate(_emit_springs(lane, qf, vf))]
    L = _emit_cholesky(em, _emit_mass(lane, g, bodies), nf)
    acc = _emit_solve(em, L, rhs, nf)
    _, driven, _ = _emit_rnea(lane, g, vf, drv, acc)
    return [driven[j] for j in range(lane.tree.n_driven)]


def _emit_cholesky(em: Emitter, A: dict, n: int) -> dict:
    """LDLᵀ factor of a symmetric matrix (lower triangle A[(i, j)], i ≥ j): unit lower L[(i, j)]
    and L[("inv", i)] = 1/D_i — no square roots, one division per pivot (the stage's critical
    path); a non-positive pivot gives NaN (the member is then reported as failed)."""
    L: dict = {}
    LD: dict = {}  # L_ik·D_k
    for j in range(n):
        d = A[(j, j)]
        for k in range(j):
            d = em.sub(d, em.mul(L[(j, k)], LD[(j, k)]))
        L[("inv", j)] = em.new(f"(1.0 / {em.fmt(d)}) if {em.fmt(d)} > 0.0 else np.nan")
        for i in range(j + 1, n):
            s = A[(i, j)]
            for k in range(j):
                s = em.sub(s, em.mul(L[(i, k)], LD[(j, k)]))
            LD[(i, j)] = s
            L[(i, j)] = em.mul(s, L[("inv", j)])
    return L


def _emit_solve(em: Emitter, L: dict, b: list[Sym], n: int) -> list[Sym]:
    """Solve L D Lᵀ x = b with the factor of :func:`_emit_cholesky`."""
    y: list[Sym] = []
    for i in range(n):
        s = b[i]
        for k in range(i):
            s = em.sub(s, em.mul(L[(i, k)], y[k]))
        y.append(s)
    x: list[Sym] = [0.0] * n
    for i in range(n - 1, -1, -1):
        s = em.mul(y[i], L[("inv", i)])
        for k in range(i + 1, n):
            s = em.sub(s, em.mul(L[(k, i)], x[k]))
        x[i] = s
    return x
