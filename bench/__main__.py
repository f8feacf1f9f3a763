"""Run every benchmark script: ``python -m bench [--smoke] [NAME_FILTER ...]``."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import bench
from bench.common import machine


def main(argv: list[str] | None = None) -> int:
    """Run the matching ``bench_*`` modules and print their measurements."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("filters", nargs="*", help="run only scripts whose name contains one")
    parser.add_argument("--smoke", action="store_true", help="seconds-long mode (no real figures)")
    arguments = parser.parse_args(argv)
    names = sorted(
        info.name for info in pkgutil.iter_modules(bench.__path__) if info.name.startswith("bench_")
    )
    if arguments.filters:
        names = [name for name in names if any(part in name for part in arguments.filters)]
    print(f"machine: {machine()}")
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        print(f"== {name}{' (smoke)' if arguments.smoke else ''}")
        for measurement in module.run(smoke=arguments.smoke):
            print("  " + measurement.line())
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
