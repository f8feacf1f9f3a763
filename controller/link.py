"""Serial link to the bench: frames out through the protocol codec, a reader thread in.

The link knows nothing of sessions: it sends messages with a wrapping sequence number, decodes
whatever arrives (``controller.protocol``), hands telemetry to a callback with its host receive
time, and answers :meth:`Link.request` calls (HELLO → HELLO_REPLY, ARM/DISARM/... → ACK).
A closed port, an I/O error or a write that cannot complete marks the link *lost*; the reason is
kept in :attr:`Link.lost_reason`.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import serial

from controller.dump import DumpWriter
from controller.errors import BenchError
from controller.protocol import (
    FrameDecoder,
    Message,
    decode_message,
    encode_message,
    hello_versions,
)
from controller.scheduler import REALTIME_PRIORITY, other_cpus, pinned, realtime_priority

WRITE_TIMEOUT_S = 0.1  # a write blocked this long means the other side stopped reading
# A waiter whose deadline passed gives the reader this long (s) to handle what arrived before it
# (a host stall delays the reader too) before it judges the other side silent on the wall clock.
CATCH_UP_S = 0.5


@dataclass(frozen=True)
class Prepared:
    """A message encoded ahead of its send (see :meth:`Link.prepare`)."""

    name: str
    fields: dict[str, int]
    seq: int
    wire: bytes


class Link:
    """An open serial link with a background reader thread.

    ``on_telemetry(message, perf_s)`` is called for every TELEMETRY frame, ``perf_s`` being its
    receive time on ``time.perf_counter``: from the reader thread, or from the thread that calls
    :meth:`poll` while the link is in poll mode (:meth:`poll_mode`). ``read_up_to`` is the
    ``time.perf_counter`` time (s) up to which everything received has been handled: a wait
    judges the other side silent only up to there (:meth:`past_deadline`), not while a host
    stall left its frames unread. ``on_held_up(unread_s, what)``, if given, is told of each such
    stall a wait forgave (:class:`Deadline`): how long (s) the port went unread, and what the
    wait was for.
    """

    def __init__(self, port: str, on_telemetry: Callable[[Message, float], None],
                 baudrate: int = 1_000_000, dump: DumpWriter | None = None,
                 on_held_up: Callable[[float, str], None] | None = None):
        self.port = port
        self.dump = dump
        self._on_telemetry = on_telemetry
        self.on_held_up = on_held_up
        try:
            self._serial = serial.Serial(port, baudrate=baudrate, timeout=0.005,
                                         write_timeout=WRITE_TIMEOUT_S)
        except (serial.SerialException, OSError, ValueError) as error:
            raise BenchError(f"{port}: cannot open the bench's serial port ({error})") from None
        self.decoder = FrameDecoder()
        self.undecodable = 0
        self.lost_reason = ""
        self._lost = threading.Event()
        self._closing = threading.Event()
        self._replies: queue.Queue[Message] = queue.Queue()
        self._seq = 0
        self._write_lock = threading.Lock()
        self._fd = self._serial.fileno()
        self._read_lock = threading.Lock()  # one thread reads and decodes at a time
        self._polled = False
        self._parked = threading.Event()
        self._unpark = threading.Event()
        # perf_counter time (s) up to which every byte received has been handled: the reader
        # (or poll) found the port empty then, after handling what came before
        self.read_up_to = time.perf_counter()
        self.last_write_ns = 0  # perf_counter_ns of the last write (0: none since watch_gaps)
        self.longest_gap_ns = 0  # the longest time between two writes since watch_gaps
        self._reader = threading.Thread(target=self._read_loop, name="bench-link", daemon=True)
        self._reader.start()

    @property
    def lost(self) -> bool:
        """True once the link failed (port closed, I/O error, stalled write)."""
        return self._lost.is_set()

    def send(self, name: str, **fields: int) -> tuple[int, float]:
        """Send one message (wire-integer fields); returns (seq, perf_counter time of the write)."""
        seq, send_ns = self.send_prepared(self.prepare(name, **fields))
        return seq, send_ns * 1e-9

    def watch_gaps(self) -> None:
        """Measure the host's silences from the next write on: ``longest_gap_ns`` becomes the
        longest time (ns) between two consecutive writes of any message, ``last_write_ns`` the
        perf_counter_ns of the latest one (what feeds the firmware's watchdog)."""
        with self._write_lock:
            self.last_write_ns = 0
            self.longest_gap_ns = 0

    def prepare(self, name: str, **fields: int) -> Prepared:
        """Encode a message ahead of its send, with the sequence number it will most likely get.

        The streaming thread prepares the next setpoint before waiting for its deadline, so that
        only the write is left after it (encoding costs ~20 µs of Python).
        """
        return Prepared(name, fields, self._seq, encode_message(name, self._seq, **fields))

    def send_prepared(self, prepared: Prepared) -> tuple[int, int]:
        """Write a prepared message; returns (seq, perf_counter_ns time of the write).

        Re-encoded if another message took its sequence number in the meantime.
        """
        if self.lost:
            raise BenchError(f"{self.port}: link lost ({self.lost_reason})")
        with self._write_lock:
            seq = self._seq
            wire = prepared.wire if prepared.seq == seq else encode_message(
                prepared.name, seq, **prepared.fields)
            self._seq = (seq + 1) & 0xFF
            before_ns = time.perf_counter_ns()
            try:
                # one system call (pyserial adds a select() after every write: a second hand-over
                # of the interpreter lock); pyserial, with its write timeout, finishes a partial
                # write to a full buffer
                try:
                    written = os.write(self._fd, wire)
                except BlockingIOError:
                    written = 0
                if written < len(wire):
                    self._serial.write(wire[written:])
            # a port closed under our feet can also surface as TypeError (its fd became None)
            except (serial.SerialException, OSError, TypeError, ValueError) as error:
                self._mark_lost(f"write failed: {error}")
                raise BenchError(f"{self.port}: link lost ({self.lost_reason})") from None
            now_ns = time.perf_counter_ns()
            if self.last_write_ns:
                self.longest_gap_ns = max(self.longest_gap_ns, before_ns - self.last_write_ns)
            self.last_write_ns = before_ns
            if self.dump is not None:
                self.dump.record(0, before_ns, wire)  # stamped before: a reply never precedes it
            return seq, now_ns

    def catch_up(self, until: float) -> bool:
        """True once every byte received up to ``until`` (perf_counter s) has been handled, so
        that a silence up to then is the other side's and not a reader the host held up.

        In poll mode the caller is the reader: it polls first (at once, nothing blocks). Else
        it does not wait: a waiter asks again in its loop, and after :data:`CATCH_UP_S` judges
        on the wall clock anyway (:meth:`past_deadline`).
        """
        if self._polled:
            self.poll()
        return self.read_up_to >= until

    def past_deadline(self, deadline: float) -> bool:
        """Whether a wait that ends at ``deadline`` (perf_counter s) may give up now: the
        deadline passed and the reader handled everything received until then (a host stall
        that held the reader up does not count against the other side), or
        :data:`CATCH_UP_S` s more passed (a reader that never catches up: fail-safe), or the
        link is lost (nothing more will be read).

        Call it *before* looking for what was awaited: once True, whatever arrived by the
        deadline has already been handed over (replies queued, telemetry dispatched).
        """
        now = time.perf_counter()
        return now >= deadline and (self.lost or self.catch_up(deadline)
                                    or now >= deadline + CATCH_UP_S)

    def request(self, name: str, reply: str, timeout_s: float = 0.5, **fields: int) -> Message:
        """Send ``name`` and wait for its ``reply`` (ACK matched by sequence number) up to
        ``timeout_s`` s, not counting a host stall that held the reader up
        (:meth:`past_deadline`; the stall is reported, :class:`Deadline`)."""
        self.drop_replies()
        seq, _ = self.send(name, **fields)
        deadline = Deadline(self, timeout_s, f"the {reply} to {name}")
        try:
            while True:
                expired = deadline.passed()  # before the queue: see past_deadline
                try:
                    message = self._replies.get(timeout=0.0 if expired else min(
                        max(deadline.at - time.perf_counter(), 0.001), 0.05))
                except queue.Empty:
                    if expired or self.lost:
                        why = (f"link lost ({self.lost_reason})" if self.lost
                               else f"within {timeout_s} s")
                        raise BenchError(f"{self.port}: no {reply} to {name} {why}") from None
                    continue
                if message.name != reply:
                    continue
                if reply == "ACK" and message.fields["acked_seq"] != seq:
                    continue
                return message
        finally:
            deadline.end()

    def drop_replies(self) -> None:
        """Forget the replies received so far (answers to earlier, abandoned requests)."""
        while not self._replies.empty():
            self._replies.get_nowait()

    def next_reply(self, timeout_s: float) -> Message | None:
        """The next reply (ACK, HELLO_REPLY) received, waiting at most ``timeout_s`` s; None
        if none came (or the link is lost)."""
        if self.lost:
            return None
        try:
            return self._replies.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def close(self) -> None:
        """Stop the reader and close the port (idempotent)."""
        self._closing.set()
        self._reader.join(timeout=1.0)
        with contextlib.suppress(serial.SerialException, OSError):
            self._serial.close()

    def _mark_lost(self, reason: str) -> None:
        if not self._lost.is_set():
            self.lost_reason = reason
            self._lost.set()

    def _read_loop(self) -> None:
        # Real-time priority when allowed: a reader preempted while it holds the interpreter
        # lock would stall the (real-time) streaming thread for a whole OS time slice.
        with realtime_priority(priority=REALTIME_PRIORITY - 1), pinned(other_cpus()):
            self._read_until_closed()

    def _read_until_closed(self) -> None:
        while not self._closing.is_set():
            if self._polled:
                self._parked.set()  # the owner polls the port itself (see poll_mode)
                self._unpark.wait(0.05)
                continue
            try:
                now = time.perf_counter()  # before: what arrives after it may still be unread
                waiting = self._serial.in_waiting
                if not waiting:  # everything received before ``now`` was handled
                    self.read_up_to = now
                data = self._serial.read(max(1, waiting))
            except (serial.SerialException, OSError, TypeError) as error:
                if not self._closing.is_set():
                    self._mark_lost(f"read failed: {error}")
                return
            if data:
                with self._read_lock:
                    self._handle(time.perf_counter(), data)

    def poll_mode(self, polled: bool) -> None:
        """While ``polled``, the reader thread is parked and the owner reads with :meth:`poll`.

        The streaming thread polls in its own slack after each send: no other thread then wakes
        up to take the interpreter lock (to read, decode, log and monitor telemetry) just when
        a deadline is due. Entering waits until the reader thread is parked (≤ its 5 ms read
        timeout); leaving drains the port first, then lets the reader thread read again.
        """
        if polled and not self._polled:
            self._parked.clear()
            self._unpark.clear()
            self._polled = True
            if not self._parked.wait(timeout=1.0) and not self.lost:
                self._polled = False
                raise BenchError(f"{self.port}: the link's reader thread did not hand over")
        elif not polled and self._polled:
            self.poll()
            self._polled = False
            self._unpark.set()

    def poll(self) -> None:
        """Read whatever arrived (without blocking) and handle it: dump, decode, dispatch."""
        if self.lost:
            return
        with self._read_lock:
            while True:
                try:
                    now = time.perf_counter()
                    if not select.select([self._fd], [], [], 0)[0]:
                        self.read_up_to = now  # everything received before it was handled
                        return
                    data = os.read(self._fd, 4096)
                except BlockingIOError:
                    return
                except (OSError, TypeError, ValueError) as error:
                    self._mark_lost(f"read failed: {error}")
                    return
                if not data:  # readable yet empty: the device went away (as pyserial judges)
                    self._mark_lost("read failed: the device reports data but returned none")
                    return
                self._handle(time.perf_counter(), data)

    def _handle(self, now: float, data: bytes) -> None:
        if self.dump is not None:
            self.dump.record(1, int(now * 1e9), data)
        for frame in self.decoder.feed(data):
            try:
                message = decode_message(frame)
            except BenchError:
                # a firmware of another protocol version: its HELLO_REPLY still names it
                message = hello_versions(frame)
                if message is None:
                    self.undecodable += 1
                    continue
            if message.name == "TELEMETRY":
                self._on_telemetry(message, now)
            else:
                self._replies.put(message)


class Deadline:
    """The end of a wait for the other side, ``timeout_s`` s from now, that a host stall does
    not bring forward (:meth:`Link.past_deadline`), and that reports the stall it forgave.

    When the wait, past its end, found the reader behind (a host stall held it up with the
    other side's frames unread), :meth:`end` tells ``link.on_held_up`` how long (s) the port
    went unread, from the last time the reader had read everything to the end of the wait, and
    ``what`` the wait was for ("the HELLO_REPLY to HELLO"). Call :meth:`passed` where the wait
    would call ``past_deadline``, and :meth:`end` once the wait is over, whatever its outcome.
    """

    def __init__(self, link: Link, timeout_s: float, what: str):
        self.link = link
        self.what = what
        self.at = time.perf_counter() + timeout_s  # perf_counter s
        self.unread_since: float | None = None  # read_up_to when found behind past ``at``

    def passed(self) -> bool:
        """Whether the wait may give up now (:meth:`Link.past_deadline` of its end), noting a
        reader found behind past the end."""
        link = self.link
        unread_since = link.read_up_to  # before: the reader may catch up meanwhile
        passed = link.past_deadline(self.at)
        if (self.unread_since is None and not link.lost and time.perf_counter() >= self.at
                and link.read_up_to < self.at):  # also when it gives up on the wall clock
            self.unread_since = unread_since
        return passed

    def end(self) -> None:
        """The wait is over: report the stall it forgave, if any, to ``link.on_held_up``."""
        if self.unread_since is not None and self.link.on_held_up is not None:
            self.link.on_held_up(time.perf_counter() - self.unread_since, self.what)
            self.unread_since = None
