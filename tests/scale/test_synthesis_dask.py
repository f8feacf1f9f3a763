"""``synthesize(..., evaluator=DaskEvaluator)``: the gesture found in-process, bitwise."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bemore.evaluate.cluster import DaskEvaluator
from bemore.settings import load_identification, load_synthesis
from bemore.synthesis.athlete import default_parameters
from bemore.synthesis.synthesize import SynthesisOptions, synthesize
from tests.scale.helpers import SYNTHESIS


def test_synthesis_on_dask_matches_in_process(dask_client, tmp_path: Path) -> None:
    config = tmp_path / "synthesis.toml"
    config.write_text(SYNTHESIS)
    synthesis = load_synthesis(config)
    athlete = default_parameters(load_identification())
    options = SynthesisOptions(starts=2, seed=0)
    local, _ = synthesize(athlete, synthesis, options, config_path=config)
    evaluator = DaskEvaluator(client=dask_client)
    remote, problem = synthesize(athlete, synthesis, options, config_path=config,
                                 evaluator=evaluator)
    assert remote.design == local.design
    assert remote.objective_value == local.objective_value
    assert remote.optimisation.nfev == local.optimisation.nfev
    assert remote.feasible and 2.9 <= remote.design.final_time_s <= 3.03
    assert evaluator.tasks_submitted > 0 and evaluator.scatters == 2  # coarse and fine problems
    profiles = problem.profiles(problem.vector(remote.design), 1000.0)
    assert np.isclose(profiles.t_s[-1], remote.design.final_time_s, atol=1e-3)
    evaluator.close()
