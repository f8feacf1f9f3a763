"""Issue 5: the identification must not depend on the GWO seed. On the bundled sample searched
with the exact cost (one integrator step per sample), GWO seed 2's pack ends in the basin of a
second minimum (0.449 mm, trunk.mass +41.5 %); polished from its best point alone, that is the
answer. Polished from the run's 3 best distinct points (the default), the truth is recovered."""

from __future__ import annotations

import json

import pytest

from bemore.identify.problem import IdentificationProblem
from bemore.identify.run import TIE_RELATIVE, RunSettings, identify
from bemore.identify.space import ParameterSpace
from bemore.paths import data_dir
from bemore.settings import load_gymnast, load_identification
from bemore.trial import prepare_trial


@pytest.mark.slow
def test_seed_2_recovers_the_truth_from_a_distinct_start_despite_its_second_minimum() -> None:
    truth = json.loads((data_dir() / "sample_trial.truth.json").read_text())["parameters"]
    trial = prepare_trial(data_dir() / "sample_trial.c3d")
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    problem = IdentificationProblem.from_trial(trial, space, samples_per_step=1)
    settings = RunSettings(pack=200, iterations=50, seed=2, polish=True)
    assert settings.polish_starts == load_identification().optimiser.polish_starts == 5
    outcome = identify(problem, settings)
    found = dict(zip(space.names, outcome.values, strict=True))
    for name in ("trunk.mass", "bar.stiffness_x", "bar.stiffness_y"):
        assert found[name] == pytest.approx(truth[name], rel=0.10), name
    assert outcome.metrics["mean_distance_mm"] < 0.44  # measured 0.4337 (noise 1 mm)
    starts = outcome.polish_starts
    # Every start is polished and the lowest exact cost is kept, whichever start reached it
    # (the trunk parameters have a second minimum at +3 % of the cost, 0.449 mm).
    kept = [start for start in starts if start.won]
    assert len(kept) == 1 and len(starts) == settings.polish_starts
    # (Starts within TIE_RELATIVE of the lowest are one minimum and the earliest is kept.)
    assert all(start.polished_cost_m2 >= kept[0].polished_cost_m2 * (1.0 - TIE_RELATIVE)
               for start in starts), [start.polished_cost_m2 for start in starts]
    assert outcome.metrics["cost_m2"] == pytest.approx(outcome.polish_result.fun, rel=1e-9)


@pytest.mark.slow
def test_a_trunk_side_trial_whose_pack_ends_in_the_other_basin_recovers_the_trunk_mass(
        tmp_path) -> None:
    """A synthetic trunk-side trial (acromions on the trunk's side, neck 3 cm, noise seed 3)
    searched with GWO seed 3: the whole pack ends in a second minimum of the trunk parameters
    (trunk mass 21.2 kg against the truth's 14.0, the verdict "good", trunk.com 10 standard
    errors off yet reported identifiable). The 4th and 5th distinct starts (0.35 box widths
    apart) reach the lower minimum, and it is kept."""
    from bemore.trial.markerset import load_markerset
    from bemore.trial.synthetic import SyntheticSpec, write_synthetic_trial

    parameters = {"neck.offset": 0.03, "trunk.neck_to_hip": 0.458, "trunk.mass": 14.0,
                  "bar.stiffness_x": 21000.0, "shoulder.stiffness_pd": 26000.0}
    spec = SyntheticSpec(duration_s=1.6, parameters=parameters, noise_mm=1.0, seed=3,
                         acromion_side="trunk")
    path, _, truth = write_synthetic_trial(spec, tmp_path / "trunk_side.c3d")
    markerset = load_markerset()
    markerset = markerset.model_copy(update={"conventions": markerset.conventions.model_copy(
        update={"acromion_side": "trunk"})})
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    problem = IdentificationProblem.from_trial(prepare_trial(path, markerset), space,
                                               samples_per_step=2)
    outcome = identify(problem, RunSettings(seed=3))
    found = dict(zip(space.names, outcome.values, strict=True))
    costs = sorted({round(start.polished_cost_m2, 9) for start in outcome.polish_starts})
    assert len(costs) == 2, costs  # two minima among the starts: measured 0.004874, 0.005695
    assert outcome.polish_result.fun == pytest.approx(costs[0], rel=1e-6)
    assert found["trunk.mass"] == pytest.approx(truth.parameters["trunk.mass"], rel=0.05)
    trunk_com = outcome.identifiability.parameters[space.names.index("trunk.com")]
    assert abs(found["trunk.com"] - truth.parameters["trunk.com"]) < 3 * trunk_com.standard_error
