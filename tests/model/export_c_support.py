"""Build and call the C that `bemore model export-c` writes (host compilers, ctypes)."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np

from bemore.model.export_c import c_identifier, export_c

STRICT = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic")


def write_c(sym, out: Path) -> tuple[str, Path, Path]:
    """Write the model's C into ``out``: (prefix, header path, source path)."""
    prefix, header, source = export_c(sym)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{prefix}.h").write_text(header)
    (out / f"{prefix}.c").write_text(source)
    return prefix, out / f"{prefix}.h", out / f"{prefix}.c"


def build_shared(compiler: str, source: Path, library: Path) -> None:
    """Compile ``source`` under the strict flags into a shared library (-O2, no fast-math)."""
    subprocess.run([compiler, *STRICT, "-O2", "-fPIC", "-shared", "-o", str(library),
                    str(source), "-lm"], check=True, capture_output=True, text=True,
                   timeout=600)


class ExportedModel:
    """ctypes calls of an exported model's functions (numpy in, numpy out; SI units)."""

    def __init__(self, library: Path, prefix: str, model) -> None:
        self.lib = ctypes.CDLL(str(library))
        self.prefix = prefix
        self.model = model
        fields = [(c_identifier(name), ctypes.c_double) for name in model.parameter_names]
        self.Parameters = type("Parameters", (ctypes.Structure,), {"_fields_": fields})
        double_p = ctypes.POINTER(ctypes.c_double)
        for name in ("points", "mass_matrix", "inverse_dynamics", "driven_efforts",
                     "hybrid_dynamics"):
            getattr(self.lib, f"{prefix}_{name}").restype = (
                ctypes.c_int if name == "hybrid_dynamics" else None)
        self._dp = double_p

    def parameters(self, P_row: np.ndarray):
        """The C struct of one parameter row (model.parameter_names order)."""
        return self.Parameters(*[float(x) for x in P_row])

    def _call(self, name: str, p, *arrays: np.ndarray):
        args = [ctypes.byref(p)] + [np.ascontiguousarray(a, dtype=np.float64).ctypes.data_as(
            self._dp) for a in arrays]
        return getattr(self.lib, f"{self.prefix}_{name}")(*args)

    def default_parameters(self) -> np.ndarray:
        """The C's default parameters as a row."""
        p = self.Parameters()
        self.lib[f"{self.prefix}_default_parameters"](ctypes.byref(p))
        return np.array([getattr(p, field) for field, _ in p._fields_])

    def points(self, p, q) -> np.ndarray:
        out = np.zeros((len(self.model.point_names), 2))
        self._call("points", p, q, out)
        return out

    def mass_matrix(self, p, q) -> np.ndarray:
        n = len(self.model.coordinates)
        out = np.zeros((n, n))
        self._call("mass_matrix", p, q, out)
        return out

    def inverse_dynamics(self, p, q, v, a) -> np.ndarray:
        out = np.zeros(len(self.model.coordinates))
        self._call("inverse_dynamics", p, q, v, a, out)
        return out

    def driven_efforts(self, p, q, v, a) -> np.ndarray:
        out = np.zeros(self.model.n_driven)
        self._call("driven_efforts", p, q, v, a, out)
        return out

    def hybrid_dynamics(self, p, qf, vf, qd, vd, ad) -> tuple[int, np.ndarray, np.ndarray]:
        af, effort = np.zeros(self.model.n_free), np.zeros(self.model.n_driven)
        status = self._call("hybrid_dynamics", p, qf, vf, qd, vd, ad, af, effort)
        return status, af, effort
