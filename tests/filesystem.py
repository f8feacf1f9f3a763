"""Files and folders the tests make refuse writing, even to root (the tests may run as root,
whom permission bits do not stop)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def immutable(path: Path) -> Iterator[bool]:
    """``path`` made immutable (``chattr +i``: not even root may write, remove or add to it)
    for the ``with`` block, and made ordinary again after it; yields whether it is (False
    where there is no chattr or the file system has no such flag, as tmpfs: the caller then
    refuses the writing some other way)."""
    chattr = shutil.which("chattr")
    made = chattr is not None and subprocess.run([chattr, "+i", str(path)],
                                                 capture_output=True).returncode == 0
    try:
        yield made
    finally:
        if made:
            subprocess.run([chattr, "-i", str(path)], check=True)
