"""Fixtures of the ATmega2560 tests (defined in tests/avr/emulated.py)."""

from tests.avr.emulated import avr_build, board, client

__all__ = ["avr_build", "board", "client"]
