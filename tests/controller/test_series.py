"""The bench side's series arithmetic without numpy: interpolation and percentiles defined as
numpy's, checked on values worked out by hand and against numpy itself (present on the
scientific side, where this test runs)."""

from __future__ import annotations

import random
from array import array

import numpy as np
import pytest

from controller.modes import ModeSettings, build_plan
from controller.scheduler import period_error_histogram
from controller.series import floats, interp, ints, percentile
from tests.controller.gestures import make_gesture


def test_percentiles_worked_out_by_hand():
    # sorted v = 1, 2, 3, 4: h = (n − 1)·q/100, then linear between v⌊h⌋ and v⌊h⌋+1
    assert percentile([4, 1, 3, 2], 50) == 2.5  # h = 1.5: 2 + 0.5·(3 − 2)
    assert percentile([4, 1, 3, 2], 90) == pytest.approx(3.7, abs=1e-15)  # h = 2.7
    assert percentile([4, 1, 3, 2], 25) == 1.75  # h = 0.75
    assert percentile([4, 1, 3, 2], 0) == 1.0 and percentile([4, 1, 3, 2], 100) == 4.0
    assert percentile([10.0, 0.0, 5.0], 25) == 2.5  # h = 0.5 between 0 and 5
    assert percentile([7.0], 99.9) == 7.0
    # 0, 1, …, 999: h = 999·0.999 = 998.001, the value itself
    assert percentile(range(1000), 99.9) == pytest.approx(998.001, abs=1e-9)
    assert percentile(range(1000), 99) == pytest.approx(989.01, abs=1e-9)
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


@pytest.mark.parametrize("q", [0, 1, 25, 50, 90, 99, 99.9, 100])
def test_percentiles_equal_numpys_default_to_the_last_bit(q):
    draw = random.Random(7)
    for size in (1, 2, 3, 10, 1001, 9999):
        values = [draw.expovariate(10.0) for _ in range(size)]
        assert percentile(values, q) == float(np.percentile(values, q))


def test_interpolation_worked_out_by_hand():
    xp, fp = [0.0, 1.0, 2.0], [0.0, 10.0, 40.0]
    assert interp([-1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0], xp, fp).tolist() == [
        0.0, 0.0, 5.0, 10.0, 25.0, 40.0, 40.0]


def test_interpolation_equals_numpys_to_the_last_bit():
    draw = random.Random(3)
    xp = sorted(draw.uniform(0.0, 5.0) for _ in range(200))
    fp = [draw.gauss(0.0, 3.0) for _ in xp]
    x = [draw.uniform(-1.0, 6.0) for _ in range(5000)] + xp
    assert interp(x, xp, fp).tolist() == np.interp(x, xp, fp).tolist()


def test_histogram_bins_are_half_open_as_numpys():
    errors = [0.0, 0.049, 0.05, 0.1, 0.3, 1.0, 4.99, 5.0, 80.0]
    assert period_error_histogram(errors) == {
        "<0.05": 2, "0.05-0.1": 1, "0.1-0.2": 1, "0.2-0.5": 1, "0.5-1": 0, "1-2": 1,
        "2-5": 1, ">5": 2}
    edges = (0.0, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, np.inf)
    assert list(period_error_histogram(errors).values()) == np.histogram(
        errors, bins=edges)[0].tolist()


def test_columns_are_plain_arrays_that_numpy_takes_without_a_copy():
    plan = build_plan(make_gesture(), ModeSettings(reps=2, rest_s=0.5))
    assert plan.position_urad.typecode == "q" and plan.gesture_t_s.typecode == "d"
    as_numpy = np.asarray(plan.position_urad)
    assert as_numpy.dtype == np.int64 and as_numpy.size == len(plan)
    plan.position_urad[0] = 123
    assert as_numpy[0] == 123  # a view of the same memory
    assert ints([1, 2]) == array("q", [1, 2]) and floats(np.arange(2.0)).tolist() == [0.0, 1.0]
