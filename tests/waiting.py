"""Waiting on what a test expects to happen, not for a guessed delay: a loaded machine (or the
AVR emulation at a third of real time) may take many times longer than a quiet one."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(read: Callable[[], T], accept: Callable[[T], bool], what: str,
               timeout_s: float = 10.0, interval_s: float = 0.01) -> T:
    """``read()`` again every ``interval_s`` s until ``accept`` holds for its value, which is
    returned; after ``timeout_s`` s, an AssertionError saying ``what`` did not happen, with
    the last value read. A generous timeout costs nothing when things go right: the wait ends
    as soon as the condition holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if accept(value):
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s (last: {value!r})")
        time.sleep(interval_s)
