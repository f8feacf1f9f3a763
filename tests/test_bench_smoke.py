"""Every benchmark script runs in its seconds-long smoke mode (so none of them rots)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import bench

SCRIPTS = sorted(
    info.name for info in pkgutil.iter_modules(bench.__path__) if info.name.startswith("bench_")
)


@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_smoke(name: str) -> None:
    measurements = importlib.import_module(f"bench.{name}").run(smoke=True)
    assert measurements, f"{name} reported nothing"
    for measurement in measurements:
        assert measurement.bemore > 0
