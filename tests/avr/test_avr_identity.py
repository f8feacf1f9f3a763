"""The ATmega2560 firmware reports its protocol's identity; one built from another definition
is refused by the host at HELLO."""

from __future__ import annotations

import subprocess

from click.testing import CliRunner

from bemore.cli import cli
from controller.protocol import load_spec
from controller.setpoints import write_setpoints
from tests.avr.emulated import AVRSIM
from tests.controller.gestures import make_gesture
from tests.firmware.changed_definition import changed_firmware


def test_the_board_reports_the_identity_of_its_definition(client):
    reply = client.handshake()
    assert reply.fields["protocol_hash"] == load_spec().protocol_hash


def test_a_board_built_from_a_changed_definition_is_refused_at_hello(avr_build, tmp_path):
    firmware, digest = changed_firmware(tmp_path)
    build = subprocess.run(["make", "--no-print-directory", "-C", str(firmware), "avr"],
                           capture_output=True, text=True, timeout=300, check=False)
    assert build.returncode == 0, build.stderr[-3000:]
    setpoints = tmp_path / "setpoints.csv"
    write_setpoints(setpoints, make_gesture())
    process = subprocess.Popen([str(AVRSIM), str(firmware / "build" / "avr" / "bemore-avr.elf")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        port = process.stdout.readline().decode().strip()
        assert port.startswith("/dev/"), process.stderr.read().decode()
        result = CliRunner().invoke(cli, ["drive", str(setpoints), "--port", port, "--log",
                                          str(tmp_path / "session.jsonl"), "--no-view"])
    finally:
        process.stdin.close()
        process.wait(timeout=10)
    assert result.exit_code == 3, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert f"protocol definition {digest:08x}" in lines[0]
    assert f"this host reads definition {load_spec().protocol_hash:08x}" in lines[0]
