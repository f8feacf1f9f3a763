"""The ATmega2560 build: `make -C firmware avr` builds the ELF and HEX and states flash and RAM."""

from __future__ import annotations

import re
import subprocess

from tests.avr.emulated import ELF, HEX


def section_sizes(elf) -> dict[str, int]:
    """Section sizes of an ELF, bytes, read with avr-size (independent of the make rule)."""
    out = subprocess.run(["avr-size", "-A", str(elf)], capture_output=True, text=True,
                         check=True).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(".") and parts[1].isdigit():
            sizes[parts[0]] = int(parts[1])
    return sizes


def hex_data_bytes(path) -> int:
    """Data bytes in an Intel HEX file (data records only)."""
    total = 0
    for line in path.read_text().splitlines():
        if line.startswith(":") and line[7:9] == "00":
            total += int(line[1:3], 16)
    return total


def test_make_avr_states_flash_and_ram_of_the_elf(avr_build):
    match = re.search(r"flash (\d+) of 262144 bytes \([\d.]+%\), RAM (\d+) of 8192 bytes",
                      avr_build)
    assert match, avr_build
    flash, ram = int(match.group(1)), int(match.group(2))
    sizes = section_sizes(ELF)
    assert flash == sizes[".text"] + sizes[".data"]
    assert ram == sizes[".data"] + sizes[".bss"] + sizes.get(".noinit", 0)
    # The HEX holds exactly what goes to flash: code plus the initial values of .data.
    assert hex_data_bytes(HEX) == flash
    # It fits the chip with room to spare (and is a real program, not an empty shell).
    assert 4000 < flash < 64 * 1024
    assert 2048 + 256 < ram < 4096  # the 2 KB receive ring and 256 B transmit ring are in there


def test_the_elf_is_an_avr6_program_with_the_board_interrupts(avr_build):
    header = subprocess.run(["avr-readelf", "-h", str(ELF)], capture_output=True, text=True,
                            check=True).stdout
    assert "Atmel AVR" in header
    symbols = subprocess.run(["avr-nm", str(ELF)], capture_output=True, text=True,
                             check=True).stdout
    # UART receive and data-register-empty, timer 1 compare A, INT2 (e-stop), INT4 (encoder)
    for vector in ("__vector_25", "__vector_26", "__vector_17", "__vector_3", "__vector_5"):
        assert re.search(rf" T {vector}$", symbols, re.M), vector
