"""The generated batch kernel: program assembly, the driven-value table, loading, threads.

:func:`generate_program` turns a compiled tree into the Python source of two numba functions
that integrate a batch with ROS34PW2 (``kernels.py`` is the readable reference):
``integrate_shared`` (one driven motion for every lane: the driven values of a stage are read
once per step, outside the lane loops) and ``integrate_members`` (one driven motion per lane:
the same values are read inside the lane loops). Both read the driven state from one table
``D`` whose columns (*slots*) are only the driven quantities the code uses: cos/sin of the
distinct driven angle sums and the driven q, q̇, q̈ that appear (see :func:`driven_table`).
Frame times can also store the driven efforts (hybrid dynamics, then inverse dynamics).
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bemore.model import kernels
from bemore.model.codegen import (
    Emitter,
    Sym,
    _emit_cholesky,
    _emit_dynamics,
    _emit_geometry,
    _emit_points,
    _emit_solve,
    _Lane,
    emit_efforts,
)
from bemore.model.tree import REVOLUTE, Tree

# Bump when the generated code or the LLVM options change, so cached machine code is rebuilt.
KERNEL_FORMAT = 4
_DRIVEN_NAME = re.compile(r"^(cd|sd|qd|vd|ad)([f0-3])_(\d+)$")
_ARGS = ("Vt, S, S0, MX, U0, U1, U2, D, h, n_sub, spp, lane_lo, lane_hi, meas, wts, store_state, "
         "store_points, do_cost, store_efforts, max_abs, out_q, out_v, out_pts, out_eff, cost, "
         "alive")


def angle_representatives(tree: Tree) -> list[int]:
    """Per frame, the frame whose driven angle sum it shares (itself if it adds an angle)."""
    rep: list[int] = []
    for k in range(len(tree.frame_parent)):
        p = tree.frame_parent[k]
        adds = tree.frame_angle[k] != 0.0 or (tree.frame_kind[k] == REVOLUTE
                                               and tree.frame_driven[k] >= 0)
        rep.append(rep[p] if p >= 0 and not adds else k)
    return rep


def angle_terms(tree: Tree) -> tuple[np.ndarray, np.ndarray]:
    """Driven angle sum of every frame as const (nF,) rad + coef (nF, n_driven) @ q_driven."""
    nF = len(tree.frame_parent)
    const = np.zeros(nF)
    coef = np.zeros((nF, tree.n_driven))
    for k in range(nF):
        p = tree.frame_parent[k]
        if p >= 0:
            const[k], coef[k] = const[p], coef[p]
        const[k] += tree.frame_angle[k]
        if tree.frame_kind[k] == REVOLUTE and tree.frame_driven[k] >= 0:
            coef[k, tree.frame_driven[k]] += tree.frame_axis[k]
    return const, coef


def driven_syms(tree: Tree, tag: str) -> dict:
    """Names of the driven values at one stage (``tag``: f = frame time, 0-3 = stage)."""
    rep = angle_representatives(tree)
    return {"cd": [f"cd{tag}_{rep[k]}" for k in range(len(rep))],
            "sd": [f"sd{tag}_{rep[k]}" for k in range(len(rep))],
            "q": [f"qd{tag}_{j}" for j in range(tree.n_driven)],
            "v": [f"vd{tag}_{j}" for j in range(tree.n_driven)],
            "a": [f"ad{tag}_{j}" for j in range(tree.n_driven)]}


def _names(lines: list[str]) -> set[str]:
    text = " ".join(lines)
    for char in "()*,-+/=[]":
        text = text.replace(char, " ")
    return set(text.split())


def _stored(value: Sym, array: str, row: int, stores: list[str]) -> Sym:
    """Store ``value`` to ``array[row, b]`` for a later lane loop; return how to read it there."""
    if isinstance(value, float):
        return value
    stores.append(f"{array}[{row}, b] = {value}")
    return f"{array}_{row}"


@dataclass(frozen=True)
class Program:
    """Source of the two kernels and the slots of their driven table ``D``.

    ``slots[i]`` (shared kernel) is (kind, index): kind ``cd``/``sd`` = cos/sin of the driven
    angle sum of frame ``index`` (see :func:`angle_terms`), ``qd``/``vd``/``ad`` = driven
    coordinate ``index``'s value (m or rad), rate, acceleration. ``member_slots`` (per-member
    kernel) has ``an`` (the angle sum itself, rad) instead of ``cd``/``sd``.
    """

    source: str
    slots: tuple[tuple[str, int], ...]
    member_slots: tuple[tuple[str, int], ...]


def _stage_code(tree: Tree) -> list[tuple[list[str], set[int]]]:
    """The four ROS34PW2 stages as straight-line lane code (lines, fields used)."""
    nf = tree.n_free
    q = [f"q{i}" for i in range(nf)]
    v = [f"v{i}" for i in range(nf)]
    Uq: list[list[Sym]] = []
    Uv: list[list[Sym]] = []
    M0: dict = {}
    L_W: dict = {}
    stages = []
    for s in range(4):
        em = Emitter(f"s{s}_")
        lane = _Lane(tree, em)
        stores: list[str] = []
        Kf = [lane.field(tree.spring_fields[i, 0]) if tree.spring_fields[i, 0] >= 0 else 0.0
              for i in range(nf)]
        Cf = [lane.field(tree.spring_fields[i, 1]) if tree.spring_fields[i, 1] >= 0 else 0.0
              for i in range(nf)]
        Yq = [em.sum([q[i]] + [em.mul(float(kernels.A_T[s, j]), Uq[j][i]) for j in range(s)])
              for i in range(nf)]
        Yv = [em.sum([v[i]] + [em.mul(float(kernels.A_T[s, j]), Uv[j][i]) for j in range(s)])
              for i in range(nf)]
        M, rhs = _emit_dynamics(lane, Yq, Yv, driven_syms(tree, str(s)))
        if s == 0:
            W = dict(M)
            for i in range(nf):
                W[(i, i)] = em.add(W[(i, i)], em.add(em.mul("hg", Cf[i]), em.mul("hg2", Kf[i])))
            L = _emit_cholesky(em, W, nf)
            M0acc = rhs  # M0 · acc = rhs exactly at the step start
            M0_here, L_here = M, L
            for row, key in enumerate(sorted(M, key=str)):
                M0[key] = _stored(M[key], "MX", row, stores)
            offset = len(M)
            for row, key in enumerate(sorted(L, key=str)):
                L_W[key] = _stored(L[key], "MX", offset + row, stores)
        else:
            M0_here, L_here = M0, L_W
            L = _emit_cholesky(em, M, nf)
            acc = _emit_solve(em, L, rhs, nf)
            M0acc = [em.dot([(M0[(max(i, j), min(i, j))], acc[j]) for j in range(nf)])
                     for i in range(nf)]
        rq = [em.sum([Yv[i]] + [em.mul(f"ch{s}{j}", Uq[j][i]) for j in range(s)])
              for i in range(nf)]
        cv = [em.sum([em.mul(f"ch{s}{j}", Uv[j][i]) for j in range(s)]) for i in range(nf)]
        M0cv = [em.dot([(M0_here[(max(i, j), min(i, j))], cv[j]) for j in range(nf)])
                for i in range(nf)]
        b = [em.sub(em.mul("hg", em.add(M0acc[i], M0cv[i])), em.mul("hg2", em.mul(Kf[i], rq[i])))
             for i in range(nf)]
        uv = _emit_solve(em, L_here, b, nf)
        uq = [em.mul("hg", em.add(rq[i], uv[i])) for i in range(nf)]
        if s < 3:
            Uq.append([_stored(uq[i], f"U{s}", i, stores) for i in range(nf)])
            Uv.append([_stored(uv[i], f"U{s}", nf + i, stores) for i in range(nf)])
        else:
            new_q = [em.sum([q[i]] + [em.mul(float(kernels.M_T[j]), Uq[j][i]) for j in range(3)]
                            + [em.mul(float(kernels.M_T[3]), uq[i])]) for i in range(nf)]
            new_v = [em.sum([v[i]] + [em.mul(float(kernels.M_T[j]), Uv[j][i]) for j in range(3)]
                            + [em.mul(float(kernels.M_T[3]), uv[i])]) for i in range(nf)]
            ok = " & ".join(f"(abs({Emitter.fmt(x)}) < max_abs)" for x in new_q + new_v)
            stores += [f"S[{i}, b] = {Emitter.fmt(x)}" for i, x in enumerate(new_q)]
            stores += [f"S[{nf + i}, b] = {Emitter.fmt(x)}" for i, x in enumerate(new_v)]
            stores += [f"alive[b] = alive[b] * (1.0 if ({ok}) else 0.0)"]
        stages.append((em.lines + stores, lane.used_fields, em.shared_names()))
    return stages


def _record_code(tree: Tree, n_points: int) -> tuple[tuple, tuple]:
    """Lane code at a frame time: points and cost; driven efforts."""
    nf = tree.n_free
    q = [f"q{i}" for i in range(nf)]
    v = [f"v{i}" for i in range(nf)]
    pem = Emitter("p")
    plane = _Lane(tree, pem)
    points = _emit_points(plane, _emit_geometry(plane, q, driven_syms(tree, "f")),
                          list(range(n_points)))
    body = [*pem.lines, "if store_points:"]
    body += [f"    out_pts[b, f, {i}, 0] = {Emitter.fmt(x)}\n"
             f"    out_pts[b, f, {i}, 1] = {Emitter.fmt(y)}" for i, (x, y) in enumerate(points)]
    # One name per value (dx0, dy0, err0 …): a name assigned twice costs numba's SSA pass.
    body += ["if do_cost:"]
    body += [f"    dx{i} = {Emitter.fmt(x)} - meas[f, {i}, 0]\n"
             f"    dy{i} = {Emitter.fmt(y)} - meas[f, {i}, 1]\n"
             f"    err{i} = {f'err{i - 1} + ' if i else ''}"
             f"wts[f, {i}] * (dx{i} * dx{i} + dy{i} * dy{i})" for i, (x, y) in enumerate(points)]
    body += [f"    cost[b] += {f'err{len(points) - 1}' if points else '0.0'}"]
    body = [line for chunk in body for line in chunk.split("\n")]
    eem = Emitter("e")
    elane = _Lane(tree, eem)
    efforts = emit_efforts(elane, q, v, driven_syms(tree, "f"))
    ebody = list(eem.lines) + [f"out_eff[b, f, {j}] = {Emitter.fmt(x)}"
                               for j, x in enumerate(efforts)]
    return (body, plane.used_fields, pem.shared_names()), (ebody, elane.used_fields,
                                                           eem.shared_names())


class _Assembler:
    """Writes one kernel function (shared or per-member driven values)."""

    def __init__(self, nf: int, slot_of: dict[tuple[str, int], int], per_member: bool) -> None:
        self.nf = nf
        self.slot_of = slot_of
        self.per_member = per_member
        self.blocks = 0  # blocks written so far: each gets its own names

    def driven_loads(self, names: set[str], lane: bool) -> list[str]:
        lines = []
        angles_done: set[tuple[str, int]] = set()
        for name in sorted(names):
            match = _DRIVEN_NAME.match(name)
            if match is None:
                continue
            tag, kind, k = match[2], match[1], int(match[3])
            stage = "rf" if tag == "f" else tag  # rf: the table row of the frame time
            if lane and kind in ("cd", "sd"):
                # Per member: the table holds the angle; its sine and cosine are computed in
                # the lane loop (vectorised polynomial) rather than by numpy per table entry.
                if (tag, k) in angles_done:
                    continue
                angles_done.add((tag, k))
                em = Emitter(f"z{tag}_{k}_")
                angle = em.new(f"D[n, {stage}, {self.slot_of[('an', k)]}, b]")
                sin, cos = em.sincos(angle)
                lines += [*em.lines, f"cd{tag}_{k} = {cos}", f"sd{tag}_{k} = {sin}"]
                continue
            index = f"n, {stage}, {self.slot_of[(kind, k)]}"
            lines.append(f"{name} = D[{index}, b]" if lane else f"{name} = D[{index}]")
        return lines

    def block(self, lines: list[str], fields: set[int], shared: set[str],
              between: bool = False) -> list[str]:
        """Code running ``lines`` for every lane: in the shared kernel, the driven values it
        reads and its shared values first (once), then the lane loop; ``between``: the free
        state is the cubic Hermite interpolant between the step start S0 and end S (weights
        c00… set by the caller)."""
        names = _names(lines)
        out: list[str] = []
        if not self.per_member:
            out = self.driven_loads(names, lane=False)
            out += [line for line in lines if line.split(" = ", 1)[0] in shared]
            lines = [line for line in lines if line.split(" = ", 1)[0] not in shared]
        nf = self.nf
        body = [f"V{i} = Vt[{i}, b]" for i in sorted(fields)]
        for i in range(nf):
            for sym, w in ((f"q{i}", "c"), (f"v{i}", "d")):
                if sym not in names:
                    continue
                if between:
                    body.append(f"{sym} = {w}00 * S0[{i}, b] + {w}10 * S0[{nf + i}, b] + "
                                f"{w}01 * S[{i}, b] + {w}11 * S[{nf + i}, b]")
                else:
                    body.append(f"{sym} = S[{i if w == 'c' else nf + i}, b]")
        for name in sorted(names):
            array, _, row = name.partition("_")
            if array in ("MX", "U0", "U1", "U2") and row.isdigit():
                body.append(f"{name} = {array}[{row}, b]")
        if self.per_member:
            body += self.driven_loads(names, lane=True)
        self.blocks += 1
        return _single_assignment([*out, "for b in range(lo, hi):"]
                                  + ["    " + line for line in body + lines], f"_{self.blocks}")


_TARGET = re.compile(r"^\s*(?:for )?([A-Za-z_]\w*)(?: = | in )")
_WORD = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


def _single_assignment(lines: list[str], suffix: str) -> list[str]:
    """``lines`` with every name they assign (loop variable included) renamed ``name+suffix``.

    Blocks reuse names (q0, V4, b …): numba rebuilds SSA form for every name assigned at more
    than one place, in time that grows with the function's size for each such name — with a few
    thousand of them it was most of an 80 s compilation. A block reads only its own names and
    the kernel's arguments and loop state, so renaming inside it changes nothing else.
    """
    assigned = {match[1] for match in map(_TARGET.match, lines) if match}
    if not assigned:
        return lines
    rename = {name: name + suffix for name in assigned}
    return [_WORD.sub(lambda m: rename.get(m[0], m[0]), line) for line in lines]


def _indent(lines: list[str], depth: int) -> list[str]:
    return ["    " * depth + line for line in lines]


def _function(name: str, asm: _Assembler, stages, record, efforts) -> list[str]:
    nf = asm.nf
    out = ["@njit(cache=True, nogil=True, error_model='numpy', fastmath={'contract'})",
           f"def {name}({_ARGS}):",
           "    n_steps = D.shape[0] - 1",
           f"    hg = h * {kernels.GAMMA!r}",
           "    hg2 = hg * hg"]
    for s in range(4):
        for j in range(s):
            out.append(f"    ch{s}{j} = {float(kernels.C_T[s, j])!r} / h")
    out += ["    lo = np.uint64(lane_lo)", "    hi = np.uint64(lane_hi)",
            "    for n in range(n_steps + 1):",
            "        if n % n_sub == 0:",
            "            f = (n // n_sub) * spp",
            "            rf = 0"]
    out += _indent(_record(asm, record, efforts, False), 3)
    out += ["        if n == n_steps:", "            break",
            "        if spp > 1:",
            "            for b in range(lo, hi):"]
    out += [f"                S0[{i}, b] = S[{i}, b]" for i in range(2 * nf)]
    for stage in stages:
        out += _indent(asm.block(*stage), 2)
    # Frames inside a multi-sample step: cubic Hermite of (q, q̇) between the step's ends
    # (q̇ from its derivative), driven values exact (table rows 4…).
    out += ["        for j in range(1, spp):",
            "            f = n * spp + j",
            "            rf = 3 + j",
            "            x = j / spp",
            "            c00 = 2.0 * x**3 - 3.0 * x**2 + 1.0",
            "            c10 = (x**3 - 2.0 * x**2 + x) * h",
            "            c01 = 3.0 * x**2 - 2.0 * x**3",
            "            c11 = (x**3 - x**2) * h",
            "            d00 = (6.0 * x**2 - 6.0 * x) / h",
            "            d10 = 3.0 * x**2 - 4.0 * x + 1.0",
            "            d01 = (6.0 * x - 6.0 * x**2) / h",
            "            d11 = 3.0 * x**2 - 2.0 * x"]
    out += _indent(_record(asm, record, efforts, True), 3)
    return out


def _record(asm: _Assembler, record, efforts, between: bool) -> list[str]:
    """Store the state, points, cost, efforts of frame f (driven values from table row rf)."""
    nf = asm.nf
    out: list[str] = []
    store = [f"out_q[b, f, {i}] = q{i}" for i in range(nf)]
    store += [f"out_v[b, f, {i}] = v{i}" for i in range(nf)]
    # Stored member-major (B, F, n) as the caller returns them: no transposed copy afterwards.
    out += ["if store_state:", *_indent(asm.block(store, set(), set(), between), 1)]
    out += ["if store_points or do_cost:", *_indent(asm.block(*record, between), 1)]
    out += ["if store_efforts:", *_indent(asm.block(*efforts, between), 1)]
    return out


def generate_program(tree: Tree, n_points: int) -> Program:
    """Source of ``integrate_shared`` and ``integrate_members`` for ``tree`` (see module doc).

    One ROS34PW2 step is four lane loops (one per stage, each small enough for LLVM to
    vectorise); what a later stage needs (M₀, the factor of W, the stage increments) goes
    through per-lane arrays MX, U0, U1, U2.
    """
    stages = _stage_code(tree)
    record, efforts = _record_code(tree, n_points)
    used = _names([line for lines, _, _ in stages for line in lines] + record[0] + efforts[0])
    keys = {(m[1], int(m[3])) for m in map(_DRIVEN_NAME.match, used) if m}
    slots = tuple(sorted(keys))
    member_slots = tuple(sorted({("an", k) if kind in ("cd", "sd") else (kind, k)
                                 for kind, k in keys}))
    out = [f"# generated by bemore.model.generated (kernel format {KERNEL_FORMAT})",
           "import numpy as np", "from numba import njit", ""]
    for name, table in (("integrate_shared", slots), ("integrate_members", member_slots)):
        slot_of = {key: i for i, key in enumerate(table)}
        asm = _Assembler(tree.n_free, slot_of, table is member_slots)
        out += [*_function(name, asm, stages, record, efforts), ""]
    return Program("\n".join(out) + "\n", slots, member_slots)


_by_tree: dict[tuple[int, int], tuple[Tree, Program, object]] = {}


def kernel_for(tree: Tree, n_points: int, per_member: bool = False):
    """(compiled kernel, its :class:`Program`) for ``tree`` (source cached on disk by hash)."""
    known = _by_tree.get((id(tree), n_points))
    if known is None or known[0] is not tree:
        program = _cached_program(tree, n_points)
        known = (tree, program, _load_module(program.source))
        _by_tree[(id(tree), n_points)] = known
    module = known[2]
    return (module.integrate_members if per_member else module.integrate_shared), known[1]


def _tree_key(tree: Tree, n_points: int) -> str:
    """Digest of everything the generated source depends on: the tree's arrays, the number of
    points, and the generator's own code."""
    digest = hashlib.sha1(f"{KERNEL_FORMAT} {n_points}".encode())
    for value in (tree.frame_parent, tree.frame_kind, tree.frame_axis, tree.frame_free,
                  tree.frame_driven, tree.frame_at, tree.frame_angle, tree.body_frame,
                  tree.body_fields, tree.spring_fields, tree.point_frame, tree.point_fields,
                  np.array([tree.gravity_field, tree.n_free, tree.n_driven]),
                  tree.field_offset, tree.field_matrix):
        digest.update(np.ascontiguousarray(value).tobytes())
    for module in (sys.modules[__name__], sys.modules[Emitter.__module__]):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:16]


def _cached_program(tree: Tree, n_points: int) -> Program:
    """:func:`generate_program`, memoised on disk (generation takes ~0.1 s of start-up)."""
    path = _cache_folder() / f"program_{_tree_key(tree, n_points)}.json"
    try:
        data = json.loads(path.read_text())
        return Program(data["source"], tuple(map(tuple, data["slots"])),
                       tuple(map(tuple, data["member_slots"])))
    except (OSError, ValueError, KeyError):
        pass
    program = generate_program(tree, n_points)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    try:
        tmp.write_text(json.dumps({"source": program.source, "slots": program.slots,
                                   "member_slots": program.member_slots}))
        tmp.replace(path)
    except OSError:  # a read-only cache only costs the generation time
        pass
    return program


def _cache_folder() -> Path:
    """Where generated sources live (``BEMORE_KERNEL_CACHE`` or ~/.cache/bemore/kernels)."""
    folder = Path(os.environ.get("BEMORE_KERNEL_CACHE", Path.home() / ".cache/bemore/kernels"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # e.g. a read-only home: fall back to the temporary folder
        import tempfile

        folder = Path(tempfile.gettempdir()) / "bemore-kernels"
        folder.mkdir(parents=True, exist_ok=True)
    return folder


def _allow_vectorisation() -> None:
    """Let LLVM emit enough runtime alias checks to vectorise the lane loops.

    Each stage loop reads and writes several per-lane arrays; LLVM's default limit of 8 runtime
    memory checks makes it give up ("too many memory checks needed"). Raising it only changes
    how hard the loop vectoriser tries.
    """
    import llvmlite.binding as llvm

    llvm.set_option("", "--runtime-memory-check-threshold=100000")
    llvm.set_option("", "--memory-check-merge-threshold=100000")
    llvm.set_option("", "--vectorize-memory-check-threshold=100000")
    llvm.set_option("", "--pragma-vectorize-memory-check-threshold=100000")


_modules: dict[str, object] = {}


def _load_module(source: str):
    """Import (and so compile or load from numba's cache) the module of ``source``."""
    _allow_vectorisation()
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    if digest in _modules:
        return _modules[digest]
    path = _cache_folder() / f"tree_{digest}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(source)
        tmp.replace(path)
    name = f"bemore_kernel_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    _modules[digest] = module
    return module


_pool: ThreadPoolExecutor | None = None
LANE_ALIGN = 4  # lanes per vector register (AVX2 doubles): groups start on a multiple


def lane_groups(n_lanes: int, threads: int) -> list[tuple[int, int]]:
    """Split lanes 0..n_lanes into at most ``threads`` contiguous groups of near-equal size,
    boundaries on multiples of LANE_ALIGN when the batch is big enough."""
    threads = max(1, min(threads, n_lanes))
    bounds = [0]
    for g in range(1, threads):
        cut = (g * n_lanes) // threads
        if n_lanes >= 2 * LANE_ALIGN * threads:
            cut = round(cut / LANE_ALIGN) * LANE_ALIGN
        bounds.append(cut)
    bounds.append(n_lanes)
    return [(lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo]


def run_threads(kernel, n_lanes: int, threads: int, args_before: tuple, args_after: tuple) -> None:
    """Run ``kernel(*args_before, lo, hi, *args_after)`` on disjoint lane groups, one per thread
    (the kernel releases the GIL; the pool lives as long as the process)."""
    global _pool
    groups = lane_groups(n_lanes, threads)
    if len(groups) == 1:
        kernel(*args_before, 0, n_lanes, *args_after)
        return
    if _pool is None or _pool._max_workers < len(groups) - 1:
        _pool = ThreadPoolExecutor(max(len(groups) - 1, os.cpu_count() or 1))
    futures = [_pool.submit(kernel, *args_before, lo, hi, *args_after) for lo, hi in groups[1:]]
    kernel(*args_before, *groups[0], *args_after)  # this thread takes the first group
    for future in futures:
        future.result()
