"""The analysis takes the Jacobian and residuals at the kept point from the polish, which took
them there, instead of an engine call of its own — also with the chain-noise weighting, whose
polish works on W r and W J: it keeps the unweighted ones (run._Unweighted)."""

from __future__ import annotations

import numpy as np
import pytest

import bemore.identify.chain_noise as chain_noise
import bemore.identify.run as run
from bemore.identify.problem import IdentificationProblem
from bemore.identify.space import ParameterSpace
from bemore.settings import ForceTerm, load_gymnast, load_identification


@pytest.fixture(scope="module")
def weighted_run(tmp_path_factory):
    """A short identification of a synthetic trial with bar forces and the chain-noise
    weighting, with the problem's Jacobian calls counted per phase and the analysis' inputs
    captured."""
    from bemore.trial import prepare_trial
    from bemore.trial.synthetic import SyntheticSpec, write_synthetic_trial

    spec = SyntheticSpec(duration_s=1.6, bar_forces=True, noise_mm=1.0, seed=1)
    path, _, _ = write_synthetic_trial(spec, tmp_path_factory.mktemp("reuse") / "t.c3d")
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    problem = IdentificationProblem.from_trial(prepare_trial(path), space, samples_per_step=2,
                                               forces=ForceTerm(chain_noise=True))
    phase, calls, captured = ["search"], [], {}
    jacobian, both = problem.jacobian, problem.residuals_and_jacobian

    def counted_jacobian(X, *args, **options):
        calls.append((phase[0], len(np.atleast_2d(X)), options.get("project_channels", True)))
        return jacobian(X, *args, **options)

    def counted_both(X, Y, *args, **options):
        calls.append((phase[0], len(np.atleast_2d(Y)), True))
        return both(X, Y, *args, **options)

    problem.jacobian, problem.residuals_and_jacobian = counted_jacobian, counted_both
    analysis, weighting = run._analysis, chain_noise.chain_noise_weighting

    def capturing_analysis(*args, **options):
        captured["analysis"] = args
        return analysis(*args, **options)

    def capturing_weighting(*args, **options):
        captured["weighting"] = weighting(*args, **options)
        return captured["weighting"]

    mp = pytest.MonkeyPatch()
    mp.setattr(run, "_analysis", capturing_analysis)
    mp.setattr(chain_noise, "chain_noise_weighting", capturing_weighting)
    try:
        outcome = run.identify(problem, run.RunSettings(pack=30, iterations=8, seed=2,
                                                        polish_starts=2),
                               on_phase=lambda name: phase.__setitem__(0, name))
    finally:
        mp.undo()
    problem.jacobian, problem.residuals_and_jacobian = jacobian, both
    return problem, outcome, calls, captured


def test_the_weighted_analysis_makes_no_jacobian_call(weighted_run) -> None:
    problem, outcome, calls, captured = weighted_run
    assert captured["weighting"] is not None and outcome.chain_noise is not None
    assert any(call[0] == "polish" for call in calls)
    # The one engine call the analysis still makes: the force channels' errors and their
    # standard errors at x, from the force rows before the channels' projection (which the
    # polish's Jacobian, projected, cannot give back).
    assert [call for call in calls if call[0] == "analysis"] == [("analysis", 1, False)]
    assert outcome.analysis_evaluations == 1
    args = captured["analysis"]
    x, jacobian, residuals = args[2], args[4], args[5]
    assert jacobian is not None and residuals is not None
    # They are the unweighted ones at the kept point: the problem's own, taken alone there.
    r_alone, J_alone = (a[0] for a in problem.jacobian(x[None, :]))
    assert np.array_equal(jacobian, J_alone)
    assert np.abs(residuals - r_alone).max() <= 1e-12 * np.abs(r_alone).max()


def test_the_weighted_analysis_is_the_one_with_the_jacobian_taken_again(weighted_run) -> None:
    """The same analysis: the residuals the polish took in its batch differ from those taken
    alone by rounding (≤ 1e-12 of their largest, the spring equilibria solved with other
    points), which the standard errors' model part, a difference of two sandwiches, magnifies:
    ≤ 3e-9 relative here (a short search), 3e-11 on a full identification's athlete.json."""
    problem, outcome, _, captured = weighted_run
    settings, x, simulated, _, _, metrics = captured["analysis"][1:7]
    again_metrics = dict(metrics)
    again, evaluations, _, markers_only = run._analysis(
        problem, settings, x, simulated, None, None, again_metrics, captured["weighting"])
    assert evaluations == 2  # the Jacobian, then the channels' errors
    assert again_metrics["force_channel_errors"] is not outcome.metrics["force_channel_errors"]
    assert outcome.metrics["force_channel_errors"]["standard_errors"] == pytest.approx(
        again_metrics["force_channel_errors"]["standard_errors"], rel=1e-8)
    for kept, taken in ((outcome.identifiability, again),
                        (outcome.identifiability_markers_only, markers_only)):
        for a, b in zip(kept.parameters, taken.parameters, strict=True):
            assert a.identifiable == b.identifiable
            assert a.standard_error == pytest.approx(b.standard_error, rel=1e-8)
            assert a.sensitivity_mm == pytest.approx(b.sensitivity_mm, rel=1e-12)
