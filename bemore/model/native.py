"""The C backend of the generated kernels: the same generated source, compiled by clang.

:mod:`bemore.model.generated` writes each kernel as straight-line Python for numba. numba
compiles such a function in ≈ 20 s (its type inference and lowering take ≈ 65 % of that, one
operation at a time); clang compiles the same code, translated to C, in ≈ 1.5 s and its loop
vectoriser gives the same speed. So when a C compiler is found the kernels are translated
(:func:`translate`), compiled once per machine into a shared library cached beside numba's
(:func:`load`), and called through ctypes, which releases the GIL: the lane groups still run
in parallel threads. Without a compiler, numba compiles the Python source as before.

The translation covers exactly the subset the generator writes: assignments of float or
integer expressions, ``for v in range(...)``, ``if``/``else``, conditional expressions,
subscripts of C-contiguous float64 arrays, ``abs``, ``np.floor``, ``np.uint64``, ``np.nan``
and ``X.shape[k]``. Anything else is an error at translation, never a silent difference.
Floating-point semantics: no fast-math (NaN tests and IEEE division stay); multiply-adds
are fused only within one expression (``-ffp-contract=on``), the products the generator
writes on a line of their own being moved into the one expression that reads them
(:meth:`_Function._fuse_products`). Contracting across statements (``fast``, what numba's
``fastmath={'contract'}`` allows) made the vectorised loop body and its scalar remainder
round differently, so a lane's numbers depended on how the batch was split among threads
(tests/model/test_variants.py caught it); no contraction at all was ≈ 10 % slower.
"""

from __future__ import annotations

import ast
import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bemore.errors import ConfigError, ModelError

# -mprefer-vector-width=512: on AVX-512 machines clang's default for -march=native is 256-bit
# vectors (4 lanes); the lane loops run 8 lanes per instruction with it (on a machine without
# AVX-512 it changes nothing). The arithmetic of a lane is the same at either width.
# -mstackrealign: the kernels spill hundreds of vector registers per lane loop (see
# docs/speed.md); without it the stack is 16-byte aligned, so every 64-byte spill and reload
# straddles two cache lines (clang writes them vmovupd at offsets ≡ 16 mod 64). Realigned to 64
# bytes they take one line each: ≈ 12 % less CPU per batch, the same arithmetic.
FLAGS = ("-O2", "-march=native", "-mprefer-vector-width=512", "-mstackrealign", "-fPIC",
         "-shared", "-fno-math-errno", "-ffp-contract=on", "-Wl,-z,defs")
COMPILE_TIMEOUT_S = 300.0  # a kernel takes 1.5-3 s; a hung compiler must not hang a run
# Lane loops (``for b in range(lo, hi)``) are independent across lanes by construction (each
# lane reads and writes its own column): telling the vectoriser so replaces numba's runtime
# alias checks.
_LANE_PRAGMA = "#pragma clang loop vectorize(assume_safety)"

_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.BitAnd: "&",
           ast.BitOr: "|"}
_COMPARE = {ast.Lt: "<", ast.Gt: ">", ast.LtE: "<=", ast.GtE: ">=", ast.Eq: "==",
            ast.NotEq: "!="}
_PRELUDE = """#include <math.h>
#include <stdint.h>

static inline int64_t bm_floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t bm_mod(int64_t a, int64_t b) {
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
"""


class _Function:
    """Translation state of one generated function: types, array ranks, declaration scopes."""

    def __init__(self, fn: ast.FunctionDef, arguments: dict[str, str | int]):
        self.fn = fn
        self.args = [a.arg for a in fn.args.args]
        if set(self.args) != set(arguments):
            raise ModelError(f"generated kernel {fn.name}: arguments {self.args} are not "
                             f"{list(arguments)}")
        self.scalars = {n: k for n, k in arguments.items() if isinstance(k, str)}
        self.ranks = {n: k for n, k in arguments.items() if not isinstance(k, str)}
        self._check_ranks()
        self.types: dict[str, str] = dict(self.scalars)
        self.scopes = self._declaration_scopes()
        self.uses: dict[str, int] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.uses[node.id] = self.uses.get(node.id, 0) + 1
        self.inlined: dict[str, ast.expr] = {}  # single-use products, written at their use

    def _check_ranks(self) -> None:
        """Every subscript of an array argument has the argument's declared rank."""
        for node in ast.walk(self.fn):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                name = node.value.id
                rank = len(node.slice.elts) if isinstance(node.slice, ast.Tuple) else 1
                if self.ranks.get(name) != rank:
                    raise ModelError(f"generated kernel: {ast.unparse(node)} does not match "
                                     f"{name}'s rank {self.ranks.get(name)}")

    def _declaration_scopes(self) -> dict[str, tuple]:
        """Where each local is declared: the innermost loop holding all its uses.

        A name used only inside one lane loop is declared in that loop's body, so the
        vectoriser sees it as private to a lane; a loop variable belongs to the loop's
        enclosing scope.
        """
        paths: dict[str, tuple] = {}

        def visit(node: ast.AST, path: tuple) -> None:
            if isinstance(node, ast.For):
                note(node.target.id, path)
                visit(node.iter, path)
                for child in node.body:
                    visit(child, (*path, id(node)))
                return
            if isinstance(node, ast.Name):
                note(node.id, path)
            for child in ast.iter_child_nodes(node):
                visit(child, path)

        def note(name: str, path: tuple) -> None:
            if name in self.args or name == "np" or name in ("range", "abs"):
                return
            known = paths.get(name)
            if known is None:
                paths[name] = path
                return
            common = 0
            while common < min(len(known), len(path)) and known[common] == path[common]:
                common += 1
            paths[name] = known[:common]

        for statement in self.fn.body:
            visit(statement, ())
        return paths

    # -- expressions -------------------------------------------------------------------------
    def kind(self, e: ast.expr) -> str:
        """"int" or "float": the C type of expression ``e`` (Python's rules for the subset)."""
        if isinstance(e, ast.Constant):
            return "float" if isinstance(e.value, float) else "int"
        if isinstance(e, ast.Name):
            if e.id in self.inlined:
                return self.kind(self.inlined[e.id])
            if e.id not in self.types:
                raise ModelError(f"generated kernel: {e.id} read before it is assigned")
            return self.types[e.id]
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, ast.Div):
                return "float"
            sides = {self.kind(e.left), self.kind(e.right)}
            return "int" if sides == {"int"} else "float"
        if isinstance(e, ast.UnaryOp):
            return "int" if isinstance(e.op, ast.Not) else self.kind(e.operand)
        if isinstance(e, ast.IfExp):
            sides = {self.kind(e.body), self.kind(e.orelse)}
            return "int" if sides == {"int"} else "float"
        if isinstance(e, ast.Compare | ast.BoolOp):
            return "int"
        if isinstance(e, ast.Call):
            name = ast.unparse(e.func)
            if name == "np.uint64":
                return "int"
            return self.kind(e.args[0]) if name == "abs" else "float"
        if isinstance(e, ast.Subscript):
            return "int" if self._is_shape(e) else "float"
        if isinstance(e, ast.Attribute) and ast.unparse(e) == "np.nan":
            return "float"
        raise ModelError(f"generated kernel: cannot translate {ast.unparse(e)!r}")

    @staticmethod
    def _is_shape(e: ast.Subscript) -> bool:
        return isinstance(e.value, ast.Attribute) and e.value.attr == "shape"

    def expr(self, e: ast.expr) -> str:
        """C text of expression ``e``."""
        if isinstance(e, ast.Constant):
            return _literal(e.value)
        if isinstance(e, ast.Name):
            if e.id in self.inlined:  # a product: parenthesised by _binary
                return self.expr(self.inlined[e.id])
            if e.id not in self.types and e.id not in self.ranks:
                raise ModelError(f"generated kernel: {e.id} read before it is assigned")
            return e.id
        if isinstance(e, ast.Attribute) and ast.unparse(e) == "np.nan":
            return "NAN"
        if isinstance(e, ast.BinOp):
            return self._binary(e)
        if isinstance(e, ast.UnaryOp):
            op = {ast.USub: "-", ast.UAdd: "+", ast.Not: "!"}[type(e.op)]
            return f"({op}{self.expr(e.operand)})"
        if isinstance(e, ast.IfExp):
            return f"({self.expr(e.test)} ? {self.expr(e.body)} : {self.expr(e.orelse)})"
        if isinstance(e, ast.Compare):
            if len(e.ops) != 1:
                raise ModelError(f"generated kernel: chained comparison {ast.unparse(e)!r}")
            op = _COMPARE[type(e.ops[0])]
            return f"({self.expr(e.left)} {op} {self.expr(e.comparators[0])})"
        if isinstance(e, ast.BoolOp):
            op = " && " if isinstance(e.op, ast.And) else " || "
            return "(" + op.join(self.expr(v) for v in e.values) + ")"
        if isinstance(e, ast.Call):
            return self._call(e)
        if isinstance(e, ast.Subscript):
            return self._subscript(e)
        raise ModelError(f"generated kernel: cannot translate {ast.unparse(e)!r}")

    def _binary(self, e: ast.BinOp) -> str:
        left, right = self.expr(e.left), self.expr(e.right)
        ints = self.kind(e.left) == "int" and self.kind(e.right) == "int"
        if isinstance(e.op, ast.Pow):
            power = e.right.value if isinstance(e.right, ast.Constant) else None
            if not (isinstance(power, int) and 1 <= power <= 8):
                raise ModelError(f"generated kernel: power {ast.unparse(e)!r}")
            return "(" + " * ".join([f"({left})"] * power) + ")"
        if isinstance(e.op, ast.FloorDiv | ast.Mod):
            if not ints:
                raise ModelError(f"generated kernel: float {ast.unparse(e)!r}")
            helper = "bm_floordiv" if isinstance(e.op, ast.FloorDiv) else "bm_mod"
            return f"{helper}({left}, {right})"
        if isinstance(e.op, ast.Div) and ints:
            return f"((double)({left}) / (double)({right}))"
        if type(e.op) not in _BINARY:
            raise ModelError(f"generated kernel: operator in {ast.unparse(e)!r}")
        return f"({left} {_BINARY[type(e.op)]} {right})"

    def _call(self, e: ast.Call) -> str:
        name = ast.unparse(e.func)
        if len(e.args) != 1 or e.keywords:
            raise ModelError(f"generated kernel: call {ast.unparse(e)!r}")
        arg = self.expr(e.args[0])
        if name == "abs":
            return f"{'llabs' if self.kind(e.args[0]) == 'int' else 'fabs'}({arg})"
        if name == "np.floor":
            return f"floor({arg})"
        if name == "np.uint64":
            return f"((int64_t)({arg}))"
        raise ModelError(f"generated kernel: call {ast.unparse(e)!r}")

    def _subscript(self, e: ast.Subscript) -> str:
        if self._is_shape(e):
            name, k = e.value.value.id, e.slice
            if not (isinstance(k, ast.Constant) and 0 <= k.value < self.ranks.get(name, 0)):
                raise ModelError(f"generated kernel: {ast.unparse(e)!r}")
            return f"{e.value.value.id}_n{e.slice.value}"
        name = e.value.id
        indices = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        rank = self.ranks[name]
        terms = []
        for k, index in enumerate(indices):
            stride = "*".join(f"{name}_n{m}" for m in range(k + 1, rank))
            terms.append(f"({self.expr(index)})" + (f" * {stride}" if stride else ""))
        return f"{name}[{' + '.join(terms)}]"

    # -- statements --------------------------------------------------------------------------
    def _fuse_products(self, body: list[ast.stmt]) -> list[ast.stmt]:
        """``body`` without the assignments of products read once, later in ``body``: those
        are written inside the expression that reads them.

        The generator writes one operation per line, so ``t = a * b`` and ``u = t + c`` are
        two C statements, and clang contracts a multiply-add into one FMA only within an
        expression (-ffp-contract=on; "fast" contracts across statements, but then the
        vectorised loop and its scalar remainder differ in the last bit). Moving the product
        is safe: generated blocks assign each name once, and a product of names and
        constants reads no memory.
        """
        reads, stores, plain = [], [], []
        for s in body:
            is_plain = isinstance(s, ast.Assign | ast.AugAssign)
            read_from = s.value if is_plain else s
            reads.append({n.id for n in ast.walk(read_from) if isinstance(n, ast.Name)})
            stores.append({n.id for n in ast.walk(s)
                           if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)})
            plain.append(is_plain)
        kept = []
        for i, s in enumerate(body):
            if (isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
                    and isinstance(s.value, ast.BinOp) and isinstance(s.value.op, ast.Mult)
                    and all(isinstance(x, ast.Name | ast.Constant)
                            for x in (s.value.left, s.value.right))
                    and self.uses.get(s.targets[0].id) == 1):
                name = s.targets[0].id
                operands = {x.id for x in (s.value.left, s.value.right)
                            if isinstance(x, ast.Name)}
                for j in range(i + 1, len(body)):
                    if name in reads[j]:
                        # Read by a plain assignment: written there. Inside a loop or a
                        # branch it stays a statement.
                        if plain[j]:
                            self.inlined[name] = s.value
                        break
                    if operands & stores[j]:
                        break
                if name in self.inlined:
                    continue
            kept.append(s)
        return kept

    def block(self, body: list[ast.stmt], path: tuple, depth: int) -> list[str]:
        """C lines of ``body`` (inside the loops ``path``), declarations first."""
        lines = []
        for statement in self._fuse_products(body):
            lines += self.statement(statement, path, depth)
        pad = "    " * depth
        local = sorted(n for n, p in self.scopes.items() if p == path)
        declarations = [f"{pad}{_C_TYPE[self.types[n]]} {n};" for n in local
                        if n in self.types]
        return declarations + lines

    def statement(self, s: ast.stmt, path: tuple, depth: int) -> list[str]:
        pad = "    " * depth
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise ModelError(f"generated kernel: {ast.unparse(s)!r}")
            target = s.targets[0]
            if isinstance(target, ast.Name):
                kind = self.kind(s.value)
                if self.types.setdefault(target.id, kind) != kind:
                    raise ModelError(f"generated kernel: {target.id} changes type")
            return [f"{pad}{self.expr(target)} = {self.expr(s.value)};"]
        if isinstance(s, ast.AugAssign) and type(s.op) in (ast.Add, ast.Sub, ast.Mult):
            op = _BINARY[type(s.op)]
            return [f"{pad}{self.expr(s.target)} {op}= {self.expr(s.value)};"]
        if isinstance(s, ast.For):
            return self._loop(s, path, depth)
        if isinstance(s, ast.If):
            out = [f"{pad}if ({self.expr(s.test)}) {{"]
            out += [line for x in s.body for line in self.statement(x, path, depth + 1)]
            if s.orelse:
                out.append(f"{pad}}} else {{")
                out += [line for x in s.orelse for line in self.statement(x, path, depth + 1)]
            return [*out, f"{pad}}}"]
        raise ModelError(f"generated kernel: cannot translate {ast.unparse(s)!r}")

    def _loop(self, s: ast.For, path: tuple, depth: int) -> list[str]:
        pad = "    " * depth
        call = s.iter
        if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "range"
                and 1 <= len(call.args) <= 2 and isinstance(s.target, ast.Name)):
            raise ModelError(f"generated kernel: loop {ast.unparse(s.iter)!r}")
        start, stop = (["0"] + [self.expr(a) for a in call.args])[-2:]
        var = s.target.id
        self.types[var] = "int"
        lanes = ast.unparse(call) == "range(lo, hi)"
        out = [pad + _LANE_PRAGMA] if lanes else []
        out.append(f"{pad}for ({var} = {start}; {var} < {stop}; {var}++) {{")
        out += self.block(s.body, (*path, id(s)), depth + 1)
        return [*out, f"{pad}}}"]

    def translate(self, name: str) -> str:
        body = self.block(self.fn.body, (), 1)
        params, signature = [], []
        for arg in self.args:
            if arg in self.scalars:
                params.append(f"{_C_TYPE[self.scalars[arg]]} {arg}")
                signature.append(f"{arg}:{self.scalars[arg]}")
            else:
                params.append(f"double *restrict {arg}")
                params += [f"int64_t {arg}_n{k}" for k in range(self.ranks[arg])]
                signature.append(f"{arg}:{self.ranks[arg]}")
        # The signature travels inside the library, so a cached library is loaded without
        # translating the source again.
        return (f'const char {name}_signature[] = "{",".join(signature)}";\n\n'
                f"void {name}({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n")


_C_TYPE = {"int": "int64_t", "float": "double"}


def _literal(value) -> str:
    """C literal of a Python constant (floats round-trip exactly through repr)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not np.isfinite(value):
            raise ModelError(f"generated kernel: constant {value!r}")
        text = repr(value)
        return text if any(c in text for c in ".e") else text + ".0"
    raise ModelError(f"generated kernel: constant {value!r}")


def translate(source: str, name: str, arguments: dict[str, str | int]) -> str:
    """C source of function ``name`` of the generated Python ``source``.

    ``arguments`` gives each argument's kind: "int" or "float" for a scalar, else the rank of
    a C-contiguous float64 array (passed as a pointer followed by its dimensions).
    """
    module = ast.parse(source)
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return _PRELUDE + "\n" + _Function(node, arguments).translate(name)
    raise ModelError(f"generated kernel: no function {name}")


def compiler() -> str | None:
    """Path of the kernels' C compiler, or None for numba.

    ``BEMORE_CC`` chooses ("none" or "numba": numba; a name or path: that compiler, which must
    exist); unset, clang if it is on the PATH. clang, because it vectorises the lane loops as
    numba's LLVM does (gcc 12 left them scalar: ×3.5 slower, measured).
    """
    chosen = os.environ.get("BEMORE_CC", "").strip()
    if chosen.lower() in ("none", "numba"):
        return None
    if not chosen:
        return shutil.which("clang")
    found = shutil.which(chosen)
    if found is None:
        raise ConfigError(f"BEMORE_CC={chosen}: no such compiler (or 'none' for numba)")
    return found


def cache_folder() -> Path:
    """Where the engine's generated sources and compiled kernels live (``BEMORE_KERNEL_CACHE``
    or ~/.cache/bemore/kernels; the temporary folder if that cannot be created)."""
    folder = Path(os.environ.get("BEMORE_KERNEL_CACHE", Path.home() / ".cache/bemore/kernels"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # e.g. a read-only home: fall back to the temporary folder
        import tempfile

        folder = Path(tempfile.gettempdir()) / "bemore-kernels"
        folder.mkdir(parents=True, exist_ok=True)
    return folder


_building: dict[Path, threading.Lock] = {}
_building_lock = threading.Lock()


def _library_lock(library: Path) -> threading.Lock:
    """The lock of one library's build in this process: a thread that finds another building
    it waits for that build instead of translating and compiling it again."""
    with _building_lock:
        return _building.setdefault(library, threading.Lock())


def cached(key: str, name: str, c_source: Callable[[], str], cc: str) -> Callable:
    """Function ``name`` of the library cached under ``key`` (the text it is translated from),
    built from ``c_source()`` by ``cc`` if missing — or damaged: rebuilt once. Threads asking
    for the same library build it once (:func:`_library_lock`; processes may build it twice,
    :func:`build` is atomic)."""
    library = library_path(cache_folder(), key, cc)
    if not library.exists():
        with _library_lock(library):
            if not library.exists():
                build(c_source(), cc, library)
    try:
        return load(library, name)
    except (OSError, ValueError):  # a damaged cache file (a full disk, a killed copy)
        with _library_lock(library):
            try:
                return load(library, name)  # rebuilt by another thread meanwhile
            except (OSError, ValueError):
                library.unlink(missing_ok=True)
                build(c_source(), cc, library)
        return load(library, name)


def _machine_key() -> str:
    """What makes machine code built with -march=native valid here: the CPU and its features
    (Linux: /proc/cpuinfo's model name and flags; elsewhere ``platform.processor()``, which on
    Linux runs ``uname -p``, a process start per command for nothing /proc/cpuinfo lacks)."""
    text = platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith(("model name", "flags")):
                    text += line
                elif not line.strip():
                    break
    except OSError:
        text += platform.processor()
    return text


def library_path(folder: Path, source: str, cc: str) -> Path:
    """Cache path of the library built by ``cc`` on this machine from ``source`` (the text the
    C code is translated from)."""
    stat = os.stat(cc)
    digest = hashlib.sha1(
        f"{FLAGS} {os.path.realpath(cc)} {stat.st_size} {stat.st_mtime_ns} {_machine_key()}\n"
        f"{source}".encode())
    digest.update(Path(__file__).read_bytes())  # the translator itself
    digest = digest.hexdigest()[:16]
    return folder / f"native_{digest}.so"


def _remove_stale(folder: Path) -> None:
    """Remove the temporary files of builds that cannot still be running (older than the
    compile timeout): what a killed process left in the cache folder."""
    import time

    for stale in folder.glob("native_*-tmp*"):
        try:
            if time.time() - stale.stat().st_mtime > COMPILE_TIMEOUT_S:
                stale.unlink()
        except OSError:  # gone meanwhile, or not ours to remove
            pass


def build(c_source: str, cc: str, path: Path) -> None:
    """Compile ``c_source`` into the shared library ``path`` (atomically: concurrent processes,
    or threads of one, may build the same library)."""
    _remove_stale(path.parent)
    own = f"{path.stem}-tmp{os.getpid()}-{threading.get_ident()}"
    source_file = path.with_name(f"{own}.c")
    source_file.write_text(c_source)
    output = path.with_name(f"{own}.so")
    try:
        try:
            done = subprocess.run([cc, *FLAGS, "-o", str(output), str(source_file), "-lm"],
                                  capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ModelError(f"{cc} could not compile the engine kernel: {error}") from None
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["no message"]
            first = next((line for line in lines if "error" in line), lines[0])
            raise ModelError(f"{cc} could not compile the engine kernel: {first}")
        os.replace(output, path)
    finally:
        source_file.unlink(missing_ok=True)
        output.unlink(missing_ok=True)


def load(library: Path, name: str) -> Callable:
    """Function ``name`` of ``library`` as a Python callable taking the numba kernel's
    arguments, in the same order (each array checked C-contiguous float64 of its rank and
    passed as a pointer followed by its dimensions)."""
    handle = ctypes.CDLL(str(library))
    signature = ctypes.c_char.in_dll(handle, f"{name}_signature")
    arguments = []
    for item in ctypes.string_at(ctypes.addressof(signature)).decode().split(","):
        arg, kind = item.split(":")
        arguments.append((arg, kind if kind in ("int", "float") else int(kind)))
    function = getattr(handle, name)
    types: list = []
    for _, kind in arguments:
        if kind == "int":
            types.append(ctypes.c_int64)
        elif kind == "float":
            types.append(ctypes.c_double)
        else:
            types += [ctypes.c_void_p] + [ctypes.c_int64] * kind
    function.argtypes = types
    function.restype = None

    def kernel(*values):
        flat: list = []
        for (arg, kind), value in zip(arguments, values, strict=True):
            if isinstance(kind, str):
                flat.append(value)
                continue
            if not (isinstance(value, np.ndarray) and value.dtype == np.float64
                    and value.flags.c_contiguous and value.ndim == kind):
                raise ModelError(f"engine kernel: {arg} must be a C-contiguous float64 array "
                                 f"of rank {kind}")
            flat.append(value.ctypes.data)
            flat += value.shape
        function(*flat)

    kernel.__name__ = name
    return kernel
