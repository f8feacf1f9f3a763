"""The three LAPACK calls of the polish's solvers, from scipy's own LAPACK, without importing
``scipy.linalg``.

``import scipy.linalg`` costs 0.14–0.26 s of a warm ``bemore identify`` on the 2-core Xeon
(most of it scipy's array-API layer, ``scipy._lib._array_api``, which the three calls never
use; docs/speed.md). The solvers (:mod:`bemore.optimize.lm`, :mod:`bemore.optimize.trf`) need
only LAPACK's ``dgeqrf`` (Householder QR), ``dtrtrs`` (triangular solve) and ``dgesdd`` (SVD):
:func:`flapack` loads scipy's compiled wrapper of its LAPACK, ``scipy/linalg/_flapack``, alone
(≈ 4 ms, as :mod:`bemore.optimize.slsqp` loads SLSQP's), and :func:`solve_upper_triangular` and
:func:`thin_svd` call it with the arguments ``scipy.linalg.solve_triangular`` and
``scipy.linalg.svd`` pass it (scipy 1.17: the same routine, the same workspace, the same
memory order), so the numbers are scipy's bit for bit (tests/optimize/test_lapack.py compares
them). Loading it also loads scipy's OpenBLAS, which the identification's one-thread pin
(``threadpool_limits``) then covers. Where the extension cannot be loaded alone, scipy.linalg's
copy is used (the same functions, the import's cost).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import threading
from typing import Any

import numpy as np

_module: Any = None
_loading = threading.Lock()  # the lock-step polish's threads may ask at once


def flapack() -> Any:
    """scipy's ``scipy.linalg._flapack`` extension (its LAPACK wrappers: ``dgeqrf``, ``dtrtrs``,
    ``dgesdd``, …), loaded alone the first time (see the module docstring)."""
    global _module
    with _loading:
        if _module is None:
            _module = _load()
    return _module


def _load() -> Any:
    name = "scipy.linalg._flapack"
    if name in sys.modules:  # scipy.linalg already imported: its own copy
        return sys.modules[name]
    import scipy  # the package alone (≈ 20 ms): where its files are

    folder = os.path.join(os.path.dirname(scipy.__file__), "linalg")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "_flapack" + suffix)
        if os.path.isfile(path):
            try:
                loader = importlib.machinery.ExtensionFileLoader(name, path)
                spec = importlib.util.spec_from_file_location(name, path, loader=loader)
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                return module
            except (ImportError, OSError):
                break
    import scipy.linalg._flapack as module

    return module


def solve_upper_triangular(R: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x (n,) solving ``R x = b`` for an upper triangular R (n, n) (its lower part is not
    read): ``scipy.linalg.solve_triangular(R, b, check_finite=False)``, the same LAPACK call
    (``dtrtrs``; a C-ordered R is passed transposed, as the lower triangle of Rᵀ). A zero on
    R's diagonal raises numpy's LinAlgError, as scipy's does."""
    a, b = np.asarray(R), np.asarray(b)
    if a.flags.f_contiguous:
        x, info = flapack().dtrtrs(a, b, overwrite_b=False, lower=False, trans=0,
                                   unitdiag=False)
    else:
        x, info = flapack().dtrtrs(a.T, b, overwrite_b=False, lower=True, trans=True,
                                   unitdiag=False)
    if info > 0:
        raise np.linalg.LinAlgError(f"singular matrix: resolution failed at diagonal {info - 1}")
    if info < 0:
        raise ValueError(f"illegal value in {-info}-th argument of internal trtrs")
    return x


def thin_svd(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """U (m, k), s (k,), Vᵀ (k, n) of A (m, n), k = min(m, n):
    ``scipy.linalg.svd(A, full_matrices=False, check_finite=False)``, the same LAPACK call
    (``dgesdd`` with the workspace ``dgesdd_lwork`` asks for). numpy's LinAlgError when the
    SVD does not converge, ValueError for a NaN entry, as scipy's."""
    a = np.asarray(A)
    m, n = a.shape
    lapack = flapack()
    work, info = lapack.dgesdd_lwork(m, n, compute_uv=True, full_matrices=False)
    if info != 0:
        raise ValueError(f"Internal work array size computation failed: {info}")
    u, s, vt, info = lapack.dgesdd(a, compute_uv=True, lwork=int(work.real),
                                   full_matrices=False, overwrite_a=False)
    if info > 0:
        raise np.linalg.LinAlgError("SVD did not converge")
    if info < 0:
        raise ValueError("A has a NaN entry" if info == -4
                         else f"illegal value in {-info}th argument of internal gesdd")
    return u, s, vt
