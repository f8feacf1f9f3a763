"""The layout rules of the README hold: one-way data flow, documented interfaces, clean lint."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# controller/ (the bench side) installs alone: it imports nothing from bemore. bemore/ reaches
# the bench only through controller.cli (the commands it registers, and the shared foundation it
# re-exports: errors, configuration layer, bench and athlete-profile schemas, file kinds, the
# setpoint format and its writer), and its console
# script through controller.console (the Ctrl-C guard around importing controller.cli itself).
BEMORE_MAY_IMPORT = {"controller", "controller.cli", "controller.console"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _violations(package: str, foreign: str, allowed: set[str]) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in _imports(path):
            if (name == foreign or name.startswith(foreign + ".")) and name not in allowed:
                found.append(f"{path.relative_to(ROOT)} imports {name}")
    return found


def test_controller_imports_nothing_from_bemore() -> None:
    assert _violations("controller", "bemore", set()) == []


# What controller/ may import besides the standard library and itself: the module of each
# dependency controller/pyproject.toml declares (distribution → module). No numpy: the PC at
# the bench installs without it. matplotlib (the `plot` extra) only inside controller.replay.plot.
BENCH_DEPENDENCIES = {"pyserial": "serial", "click": "click", "rich": "rich",
                      "pydantic": "pydantic", "tomli": "tomli"}


def _controller_imports() -> dict[str, set[str]]:
    """Top-level module of every import in controller/ (module or function level) → files."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "controller").rglob("*.py")):
        for name in _imports(path):
            found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def test_controller_imports_no_numpy() -> None:
    assert _controller_imports().get("numpy", set()) == set()


def test_controller_imports_only_the_standard_library_and_its_declared_dependencies() -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    declared = tomllib.loads((ROOT / "controller" / "pyproject.toml").read_text())
    names = {re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower()
             for requirement in declared["project"]["dependencies"]}
    assert names == set(BENCH_DEPENDENCIES)  # declared = listed here
    allowed = set(sys.stdlib_module_names) | {"controller", *BENCH_DEPENDENCIES.values()}
    foreign = {module: files for module, files in _controller_imports().items()
               if module not in allowed}
    # the extras: matplotlib (`plot`) in replay.plot; aiohttp and qrcode (`web`) in the live
    # page's module, imported inside its functions (controller.webview imports without them)
    assert foreign == {"matplotlib": {"controller/replay.py"},
                       "aiohttp": {"controller/webview.py"}, "qrcode": {"controller/webview.py"}}
    replay = ast.parse((ROOT / "controller" / "replay.py").read_text())
    plot = next(node for node in replay.body
                if isinstance(node, ast.FunctionDef) and node.name == "plot")
    everywhere = [node for node in ast.walk(replay) if _imports_matplotlib(node)]
    inside_plot = [node for node in ast.walk(plot) if _imports_matplotlib(node)]
    assert everywhere and everywhere == inside_plot


def _imports_matplotlib(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "matplotlib" for alias in node.names)
    return (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None
            and node.module.split(".")[0] == "matplotlib")


def test_bemore_reaches_the_bench_only_through_its_commands() -> None:
    assert _violations("bemore", "controller", BEMORE_MAY_IMPORT) == []


# The foundation every layer may use: it imports nothing of bemore outside itself.
FOUNDATION = {"bemore", "bemore.errors", "bemore.config", "bemore.paths", "bemore.settings"}


def _bemore_imports(path: Path) -> set[str]:
    return {name for name in _imports(path) if name == "bemore" or name.startswith("bemore.")}


def test_the_foundation_imports_only_the_foundation() -> None:
    found = [f"{module} imports {name}" for module in sorted(FOUNDATION - {"bemore"})
             for name in _bemore_imports(ROOT / (module.replace(".", "/") + ".py"))
             if name not in FOUNDATION]
    assert found == []


def test_the_model_imports_nothing_above_it() -> None:
    # bemore/model is the engine the trial, identification and synthesis layers stand on.
    found = [f"{path.relative_to(ROOT)} imports {name}"
             for path in sorted((ROOT / "bemore" / "model").rglob("*.py"))
             for name in _bemore_imports(path)
             if name not in FOUNDATION and not name.startswith("bemore.model")]
    assert found == []


def test_the_trial_and_identification_import_nothing_downstream() -> None:
    # Data flows one way: trial → model → optimisation → identification → synthesis → bench.
    # (The records database is a store every command's CLI layer may write to.)
    downstream = ("bemore.synthesis", "bemore.batch", "bemore.cli")
    found = [f"{path.relative_to(ROOT)} imports {name}"
             for layer in ("trial", "optimize", "identify")
             for path in sorted((ROOT / "bemore" / layer).rglob("*.py"))
             for name in _bemore_imports(path)
             if name.startswith(downstream)]
    assert found == []


def test_no_module_outside_tests_imports_pinocchio() -> None:
    # Pinocchio (PyPI `pin`, module `pinocchio`) is a test oracle, declared in the test extra.
    found = [f"{path.relative_to(ROOT)} imports {name}"
             for folder in ("bemore", "controller", "bench", "firmware")
             for path in sorted((ROOT / folder).rglob("*.py"))
             for name in _imports(path)
             if name.split(".")[0] in ("pinocchio", "pin")]
    assert found == []


def test_ruff_is_clean() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.fail("ruff is missing: it is in the test extra (pip install -e '.[test]')")
    result = subprocess.run(
        [ruff, "check", "bemore", "controller", "bench", "tests"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:]


def _called(path: Path) -> set[str]:
    """Names called in the module at ``path`` (``f(…)`` and ``x.f(…)``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return {node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name | ast.Attribute)}


def test_the_clis_and_batch_run_the_same_library_functions() -> None:
    """`bemore identify`, `bemore synthesize` and `bemore batch` assemble settings, build the
    problem and write the outputs through the same functions, never their own copies."""
    batch = _called(ROOT / "bemore/batch/item.py")
    identify_cli = _called(ROOT / "bemore/identify/cli.py")
    synthesize_cli = _called(ROOT / "bemore/synthesis/cli.py")
    for calls in (batch, identify_cli):
        assert "run_identification" in calls
        assert not calls & {"RunSettings", "from_trial", "from_config", "prepare_trial",
                            "write_results", "athlete_record"}
    for calls in (batch, synthesize_cli):
        assert {"run_synthesis", "synthesis_options", "write_gesture_setpoints"} <= calls
        assert not calls & {"SynthesisOptions", "write_setpoints", "write_profiles"}
