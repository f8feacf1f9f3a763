"""The host refuses, at HELLO, a firmware built from another protocol definition."""

from __future__ import annotations

import os
import select
import subprocess
import threading
import tty

from click.testing import CliRunner

from bemore.cli import cli
from controller.protocol import FrameDecoder, encode_frame, load_spec
from controller.simbench import load_sim_config, plant_flags
from tests.firmware.changed_definition import changed_firmware


def test_the_firmware_reports_the_identity_of_its_definition(tmp_path, setpoint_file):
    # the checkout's own simulated bench: same definition, HELLO passes and the drive completes
    log = tmp_path / "session.jsonl"
    result = CliRunner().invoke(cli, ["drive", str(setpoint_file), "--log", str(log),
                                      "--no-view"])
    assert result.exit_code == 0, result.output
    hello = next(line for line in log.read_text().splitlines() if "protocol_hash" in line)
    assert f'"protocol_hash": {load_spec().protocol_hash}' in hello


def test_a_firmware_built_from_a_changed_definition_is_refused_at_hello(tmp_path,
                                                                        setpoint_file):
    firmware, digest = changed_firmware(tmp_path)
    build = subprocess.run(["make", "--no-print-directory", "-C", str(firmware),
                            "build/simbench"], capture_output=True, text=True, timeout=300,
                           check=False)
    assert build.returncode == 0, build.stderr[-3000:]
    ours = load_spec().protocol_hash
    assert digest != ours
    process = subprocess.Popen([str(firmware / "build" / "simbench"),
                                *plant_flags(load_sim_config())],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        port = process.stdout.readline().decode().strip()
        assert port.startswith("/dev/"), process.stderr.read().decode()
        log = tmp_path / "session.jsonl"
        result = CliRunner().invoke(cli, ["drive", str(setpoint_file), "--port", port,
                                          "--log", str(log), "--no-view"])
    finally:
        process.stdin.close()
        process.wait(timeout=10)
    assert result.exit_code == 3, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert f"protocol definition {digest:08x}" in lines[0]
    assert f"this host reads definition {ours:08x}" in lines[0]


def _old_firmware(master: int, stop: threading.Event) -> None:
    """A firmware of protocol 3 on a pty: it answers HELLO with protocol 3's HELLO_REPLY layout
    (37 bytes: no protocol_hash), then ACK VERSION_MISMATCH, as every firmware does."""
    decoder = FrameDecoder()
    spec = load_spec()
    while not stop.is_set():
        if not select.select([master], [], [], 0.05)[0]:
            continue
        for frame in decoder.feed(os.read(master, 4096)):
            if frame.msg_id == spec.messages["HELLO"].id:
                reply = bytes([3, 3, 0, 0]) + bytes(33)
                os.write(master, encode_frame(0, spec.messages["HELLO_REPLY"].id, reply))
                ack = bytes([frame.seq, frame.msg_id, spec.results["VERSION_MISMATCH"]])
                os.write(master, encode_frame(1, spec.messages["ACK"].id, ack))


def test_a_firmware_of_another_protocol_version_is_named_at_hello(tmp_path, setpoint_file):
    master, slave = os.openpty()
    tty.setraw(slave)
    port = os.ttyname(slave)
    stop = threading.Event()
    thread = threading.Thread(target=_old_firmware, args=(master, stop), daemon=True)
    thread.start()
    try:
        result = CliRunner().invoke(cli, ["drive", str(setpoint_file), "--port", port, "--log",
                                          str(tmp_path / "s.jsonl"), "--no-view"])
    finally:
        stop.set()
        thread.join(timeout=5)
        os.close(master)
        os.close(slave)
    assert result.exit_code == 3, result.output
    assert result.output.strip().splitlines() == [
        f"bemore: error: {port}: firmware 3.0.0 speaks protocol 3, this host speaks "
        f"{load_spec().protocol_version}: update one of them"]
