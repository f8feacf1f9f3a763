"""scipy's LAPACK loaded alone (bemore.optimize.lapack): the same numbers as scipy.linalg's
functions bit for bit, without importing scipy.linalg."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.linalg

from bemore.optimize.lapack import flapack, solve_upper_triangular, thin_svd


@pytest.mark.parametrize("seed", range(6))
def test_thin_svd_is_scipys_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # Tall, square and wide; columns over 8 decades, like an identification Jacobian's.
    for shape in ((300, 9), (17, 17), (5, 12)):
        A = rng.standard_normal(shape) * np.logspace(0, -8, shape[1])
        for a in (A, np.asfortranarray(A)):
            ours = thin_svd(a)
            theirs = scipy.linalg.svd(a, full_matrices=False, check_finite=False)
            for x, y in zip(ours, theirs, strict=True):
                assert np.array_equal(x, y)
            assert np.array_equal(a, A)  # the input is not overwritten


@pytest.mark.parametrize("seed", range(6))
def test_solve_upper_triangular_is_scipys_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((40, 7))
    _, R = np.linalg.qr(A)  # as the Levenberg–Marquardt step forms it
    b = rng.standard_normal(7)
    for r in (R, np.ascontiguousarray(R), np.asfortranarray(R), R + np.tril(np.ones((7, 7)), -1)):
        ours = solve_upper_triangular(r, b)
        assert np.array_equal(ours, scipy.linalg.solve_triangular(r, b, check_finite=False))
        assert np.allclose(np.triu(r) @ ours, b, rtol=1e-10, atol=1e-12)


def test_a_zero_on_the_diagonal_raises_linalg_error() -> None:
    R = np.triu(np.ones((3, 3)))
    R[1, 1] = 0.0
    with pytest.raises(np.linalg.LinAlgError):
        solve_upper_triangular(R, np.ones(3))


def test_the_qr_is_scipys_lapack_routine() -> None:
    assert flapack().dgeqrf is scipy.linalg.lapack.dgeqrf  # scipy.linalg imported: its copy


def test_loading_it_does_not_import_scipy_linalg() -> None:
    # The extension alone is registered under its name (as its own import would); the package
    # scipy.linalg, scipy.optimize and scipy's array-API layer are not imported, and a later
    # import of scipy.linalg uses the same extension.
    code = ("import sys\nfrom bemore.optimize.lapack import flapack, thin_svd\n"
            "import numpy as np\nthin_svd(np.eye(3))\nflapack().dgeqrf(np.ones((4, 2)))\n"
            "print(sorted(m for m in sys.modules if m.startswith(('scipy.linalg', "
            "'scipy.optimize', 'scipy._lib._array_api'))))\n"
            "import scipy.linalg\nprint(scipy.linalg.lapack.dgeqrf is flapack().dgeqrf)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["['scipy.linalg._flapack']", "True"]
