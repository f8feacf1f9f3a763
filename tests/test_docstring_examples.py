"""Every docstring example (``>>>``) of the bemore package, of the bench side (controller/) and
of the benchmarks (bench/) runs and prints what it shows; none is skipped."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _modules_with_examples() -> list[str]:
    found = []
    paths = [path for folder in ("bemore", "controller", "bench")
             for path in sorted((ROOT / folder).rglob("*.py"))]
    for path in paths:
        if ">>>" in path.read_text(encoding="utf-8") and path.name != "__main__.py":
            module = path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
            found.append(module.removesuffix(".__init__"))
    return found


MODULES = _modules_with_examples()


def test_examples_are_found() -> None:
    assert "bemore.evaluate" in MODULES and "bemore.model.simulate" in MODULES
    assert {"bemore.optimize.constrained", "bemore.optimize.result", "controller.protocol",
            "controller.setpoints", "bench.bench_engine"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    source = Path(module.__file__).read_text(encoding="utf-8")
    assert "doctest: +SKIP" not in source, f"{name}: a skipped example shows nothing that runs"
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0, f"{name}: {result.failed} example(s) failed (output above)"
