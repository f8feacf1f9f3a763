"""The identification path never imports numba when the engine's kernels come from the C
backend: a tiny identification through the library (trial preparation, global run, polish,
analysis, athlete.json) in a fresh process, which then must not have numba loaded."""

from __future__ import annotations

import json
import subprocess
import sys

from bemore.model.generated import backend
from bemore.paths import REPOSITORY_DIR

SCRIPT = """
import json, sys, traceback
from pathlib import Path


class FirstNumbaImport:
    # Remembers who imported numba first, to name the culprit if the test fails.
    stack = ""

    def find_spec(self, name, path=None, target=None):
        if name == "numba" and not self.stack:
            FirstNumbaImport.stack = "".join(
                line for line in traceback.format_stack() if "importlib._bootstrap" not in line)


sys.meta_path.insert(0, FirstNumbaImport())

from bemore.identify.outputs import write_results
from bemore.identify.problem import IdentificationProblem
from bemore.identify.run import RunSettings, identify
from bemore.identify.space import ParameterSpace
from bemore.model.generated import backend
from bemore.paths import configs_dir, data_dir
from bemore.settings import load_gymnast, load_identification
from bemore.trial import prepare_trial

folder = Path(sys.argv[1])
text = (configs_dir() / "trial.toml").read_text()
(folder / "trial.toml").write_text(text.replace("\\nend_s = 0.0\\n", "\\nend_s = 0.6\\n"))
trial = prepare_trial(data_dir() / "sample_trial.c3d", settings=folder / "trial.toml")
identification = load_identification()
space = ParameterSpace.from_config(identification, load_gymnast())
problem = IdentificationProblem.from_trial(trial, space, samples_per_step=2)
settings = RunSettings(pack=4, iterations=2, seed=1, polish=True, polish_iterations=2,
                       polish_starts=1, workers=1)
outcome = identify(problem, settings)
record = write_results(folder / "out", outcome, problem, settings, trial.summary(), {})
print(json.dumps({"numba": "numba" in sys.modules, "first_import": FirstNumbaImport.stack,
                  "backend": backend(), "cost_m2": record["cost_m2"]}))
"""


def test_identification_does_not_import_numba(tmp_path) -> None:
    """clang is a declared system package: without it this fails (the engine would fall back
    to numba), as tests/model/test_native.py does."""
    assert backend() != "numba", "no C compiler: run `make sysdeps` (clang)"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True,
                          text=True, cwd=REPOSITORY_DIR, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["backend"] != "numba"
    # A real run: a finite cost (m²) over 0.6 s of the sample's seven joint centres.
    assert 0.0 < result["cost_m2"] < 10.0
    assert not result["numba"], "numba was imported by:\n" + result["first_import"]
    assert (tmp_path / "out" / "athlete.json").stat().st_size > 0
