"""A firmware tree built from a changed protocol definition (importable as
``tests.firmware.changed_definition``): the copy's definition differs from the checkout's by one
comment line, so versions, layouts and limits agree and only the protocol's identity differs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def changed_firmware(tmp_path: Path) -> tuple[Path, int]:
    """Copy firmware/ and controller/protocol.toml under ``tmp_path``, add a comment to the copied
    definition and regenerate the copy's header; return (copied firmware folder, its hash)."""
    sys.path.insert(0, str(ROOT / "firmware" / "tools"))
    try:
        from gen_protocol import protocol_hash
    finally:
        sys.path.pop(0)
    firmware = tmp_path / "firmware"
    shutil.copytree(ROOT / "firmware", firmware, ignore=shutil.ignore_patterns("build"))
    spec = tmp_path / "controller" / "protocol.toml"
    spec.parent.mkdir()
    spec.write_bytes((ROOT / "controller" / "protocol.toml").read_bytes()
                     + b"# a comment: the definition's bytes, hence its identity, change\n")
    result = subprocess.run([sys.executable, str(firmware / "tools" / "gen_protocol.py")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    digest = protocol_hash(spec.read_bytes())
    assert f"BM_PROTOCOL_HASH UINT32_C(0x{digest:08X})" in (
        firmware / "src" / "protocol_gen.h").read_text()
    return firmware, digest
