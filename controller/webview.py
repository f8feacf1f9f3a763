"""The coach's live page: a small web server beside a session (``bemore drive --web``), or over a
past session's log (``bemore replay LOG --web``).

The server (aiohttp, the ``web`` extra) runs its own event loop in its own thread, at the lowest
real-time priority and off the streaming CPU, like the terminal view (``controller.liveview``).
It never touches the stream loop: a feed thread (same priority and CPUs) reads the session's
:class:`Status` (plain attribute reads, no lock) :data:`FEED_HZ` times a second, encodes one
JSON sample and hands it to each page's own bounded queue; a page that is slow, or gone, only
loses samples. While the session streams, the feed wakes just after a send deadline
(:data:`AFTER_SEND_NS`), so that its turn with the interpreter lock, and the server's sends to
the pages that follow it, fall in the stream's slack before the next deadline. The page
can only stop a session (STOP: the controlled stop, E-STOP: the e-stop, both through
:meth:`Session.request_stop`, the path Ctrl-C and the terminal keys take), never arm or start
one.

Access: every request — the page, its WebSocket, the buttons — needs the per-session token
(``?token=`` on the page and the socket, the ``X-Bemore-Token`` header on a button's POST);
without it the answer is HTTP 403 and the socket is refused. The server listens on localhost
unless another interface is named explicitly (:func:`parse_address`).

Everything the page needs is served from ``controller/web/`` (plain JavaScript and canvas, no
library, no CDN): the bench PC may be offline.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import math
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from controller.errors import ConfigError
from controller.modes import POSITION_SCALE, TIME_SCALE, TORQUE_SCALE
from controller.scheduler import other_cpus, pinned, realtime_priority

WEB_DIR = Path(__file__).resolve().parent / "web"
FEED_HZ = 40  # samples pushed to each page per second (the page redraws on its own frames)
AFTER_SEND_NS = 100_000  # the feed wakes this long after a send deadline (see the docstring)
PAGE_QUEUE = 80  # samples waiting for one page (2 s): a slower page skips the oldest
HEARTBEAT_S = 2.0  # WebSocket ping period: a page that vanished without closing is gone after it
FINISH_WAIT_S = 3.0  # after a session, how long the pages get to receive its summary
TOKEN_HEADER = "X-Bemore-Token"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def parse_address(text: str, public: bool = False) -> tuple[str, int]:
    """``[HOST:]PORT`` → (host, port); host defaults to 127.0.0.1 (this machine only).

    A host other than the loopback (e.g. ``0.0.0.0`` for a tablet on the bench's network) is
    refused (ConfigError) unless ``public`` (``--web-public``): the page can stop the bench.
    """
    host, _, port_text = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"--web {text!r}: expected [HOST:]PORT, e.g. 8080 or "
                          "0.0.0.0:8080") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"--web {text!r}: port {port} is not in 0..65535")
    if not public and not _is_loopback(host):
        raise ConfigError(f"--web {text!r}: {host} is reachable from other machines; add "
                          "--web-public to serve the page there (it needs the token)")
    return host, port


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _require_aiohttp():
    try:
        from aiohttp import web
    except ImportError:
        raise ConfigError("--web needs the web extra: pip install 'bemore[web]' (the bench "
                          "side alone: pip install './controller[web]')") from None
    return web


def page_html() -> str:
    """The page: controller/web/live.html with its stylesheet and script inlined (one request,
    which carries the token)."""
    html = (WEB_DIR / "live.html").read_text(encoding="utf-8")
    css = (WEB_DIR / "live.css").read_text(encoding="utf-8")
    script = (WEB_DIR / "live.js").read_text(encoding="utf-8")
    return html.replace("/*STYLE*/", css).replace("/*SCRIPT*/", script)


def terminal_qr(text: str) -> str:
    """``text`` as a QR code drawn with block characters (the ``qrcode`` package), for the tablet
    to scan from the terminal; "" when qrcode is not installed."""
    try:
        import qrcode
    except ImportError:
        return ""
    import io

    code = qrcode.QRCode(border=2, error_correction=qrcode.constants.ERROR_CORRECT_L)
    code.add_data(text)
    code.make(fit=True)
    out = io.StringIO()
    code.print_ascii(out=out, invert=True)
    return out.getvalue()


def _degrees(value: float) -> float | None:
    return None if math.isnan(value) else round(math.degrees(value), 3)


def _rounded(value: float, digits: int = 2) -> float | None:
    return None if math.isnan(value) else round(value, digits)


# ---------------------------------------------------------------------- what the page shows
def plan_payload(plan, settings, bench, athlete, header: dict | None = None) -> dict:
    """The ``hello`` message of a live session: the gesture's target curve (the plan every
    10 ms: stream time s, angle deg, the bench's and the athlete's torque N·m), the limits and
    the session's settings."""
    rate = float(plan.rate_hz)
    step = max(1, round(rate / 100))
    count = len(plan)
    indices = list(range(0, count, step))
    if indices[-1] != count - 1:
        indices.append(count - 1)
    share = settings.athlete_share
    need = plan.need_nm
    last_rep = max((i for i in range(count) if int(plan.rep[i]) > 0), default=count - 1)
    return {
        "type": "hello",
        "live": True,
        "meta": _meta(header or {}, settings.mode, settings.load_pct, settings.speed,
                      settings.reps),
        "plan": {
            "t": [round(float(plan.time_ms[i]) * TIME_SCALE, 4) for i in indices],
            "angle": [round(math.degrees(float(plan.position_urad[i]) * POSITION_SCALE), 3)
                      for i in indices],
            "bench_nm": [round(float(plan.torque_mNm[i]) * TORQUE_SCALE, 2) for i in indices],
            "athlete_nm": ([round(float(need[i]) * share, 2) for i in indices]
                           if need is not None else None),
            "rep": [int(plan.rep[i]) for i in indices],
            "end_ramp_t": round(float(plan.time_ms[last_rep]) * TIME_SCALE, 4),
        },
        "limits": _limits(bench.limits.max_torque_nm, athlete.shoulder_torque_limit_Nm,
                          share, athlete.shoulder_flexion_range_deg),
    }


def _meta(header: dict, mode: str, load_pct: float, speed: float, reps: int) -> dict:
    return {"gesture": str(header.get("gesture", "")), "athlete": str(header.get("athlete", "")),
            "mode": mode, "load_pct": load_pct, "speed": speed, "reps": reps}


def _limits(bench_nm: float, athlete_nm: float, athlete_share: float,
            range_deg: tuple[float, float] | list[float]) -> dict:
    return {"bench_nm": float(bench_nm), "athlete_nm": float(athlete_nm),
            "athlete_share": float(athlete_share), "range_deg": [float(v) for v in range_deg]}


def status_sample(session, end_ramp_t: float = math.inf) -> list:
    """One live sample of ``session``'s status: [stream time s, commanded deg, measured deg,
    commanded torque N·m, measured torque N·m, repetition, state, fault, host misses, late
    sends]. The state is the bench's (telemetry), RAMPING while armed during a stop or the
    plan's own final ramp."""
    status = session.status
    state, fault, t_s = status.state, status.fault, status.t_s
    if state == "ARMED" and (session.stop_requested or t_s > end_ramp_t):
        state = "RAMPING"
    return [round(t_s, 4), _degrees(status.commanded_rad), _degrees(status.measured_rad),
            _rounded(status.commanded_torque_nm), _rounded(status.measured_torque_nm),
            status.rep, state, fault, status.misses, status.late_sends]


def session_payload(log) -> dict:
    """The ``session`` message of a finished (or replayed) session, from its log alone
    (:func:`controller.log.read_log`): the setpoints as the target curve, every telemetry frame
    from ARM on as a sample (the same columns as :func:`status_sample`), and the replay
    summary (:func:`controller.replay.summarise`)."""
    from controller.protocol import load_spec
    from controller.replay import summarise

    spec = load_spec()
    header = log.header
    settings = header.get("settings", {})
    shares = header.get("shares", {})
    athlete_share = float(shares.get("athlete", 0.0))
    bench_share = float(shares.get("bench", 1.0))
    sp, tm = log.setpoints, log.telemetry
    sp_time = [int(v) for v in sp["time_ms"]]
    sp_position = [float(v) for v in sp["position_urad"]]
    sp_torque = [float(v) for v in sp["torque_mNm"]]
    sp_rep = [int(v) for v in sp["rep"]]
    planned = [i for i, rep in enumerate(sp_rep) if rep >= 0]
    step = max(1, round(float(settings.get("rate_hz", 1000.0)) / 100))
    chosen = planned[::step] + ([planned[-1]] if planned and (len(planned) - 1) % step else [])
    by_time = {t: i for i, t in enumerate(sp_time)}
    athlete_nm = ([round(sp_torque[i] * TORQUE_SCALE * athlete_share / bench_share, 2)
                   for i in chosen] if bench_share else None)
    last_rep = max((i for i in planned if sp_rep[i] > 0), default=planned[-1] if planned else 0)
    plan = {
        "t": [round(sp_time[i] * TIME_SCALE, 4) for i in chosen],
        "angle": [round(math.degrees(sp_position[i] * POSITION_SCALE), 3) for i in chosen],
        "bench_nm": [round(sp_torque[i] * TORQUE_SCALE, 2) for i in chosen],
        "athlete_nm": athlete_nm,
        "rep": [sp_rep[i] for i in chosen],
        "end_ramp_t": round(sp_time[last_rep] * TIME_SCALE, 4) if sp_time else 0.0,
    }
    armed = spec.states["ARMED"]
    stop = next((e for e in log.events if e.get("kind") == "stop"), None)
    stop_at = float(stop["host_time"]) if stop and stop.get("reason") != "completed" else math.inf
    rows, started, t_last, rep, last_host = [], False, 0.0, 0, -math.inf
    sent_host = [float(v) for v in sp["host_time"]]
    columns = [tm[key] for key in ("host_time", "setpoint_time_ms", "position_urad", "torque_mNm",
                                   "state", "fault")]
    for host_time, time_ms, position, torque, state_code, fault_code in zip(*columns,
                                                                           strict=True):
        state_code = int(state_code)
        started = started or state_code == armed
        if not started:
            continue
        index = by_time.get(int(time_ms)) if state_code == armed else None
        commanded = commanded_nm = None
        if index is not None and sent_host[index] <= host_time:
            t_last = sp_time[index] * TIME_SCALE
            commanded = round(math.degrees(sp_position[index] * POSITION_SCALE), 3)
            commanded_nm = round(sp_torque[index] * TORQUE_SCALE, 2)
            rep = max(sp_rep[index], 0)
        last_host = float(host_time)
        state = spec.name_of("states", state_code)
        if state == "ARMED" and (host_time >= stop_at or t_last > plan["end_ramp_t"]):
            state = "RAMPING"
        rows.append([round(t_last, 4), commanded,
                     round(math.degrees(float(position) * POSITION_SCALE), 3), commanded_nm,
                     round(float(torque) * TORQUE_SCALE, 2), rep, state,
                     spec.name_of("faults", int(fault_code)), None, None])
    # A DISARM confirmed by its ACK needs no telemetry frame after it: the session's last
    # state is then the confirmation's (no angle or torque is known at that instant).
    disarmed = [e for e in log.events if e.get("kind") == "disarmed"
                and float(e.get("host_time", -math.inf)) >= last_host]
    if rows and disarmed and rows[-1][6] not in ("DISARMED", "FAULT"):
        rows.append([rows[-1][0], None, None, None, None, rep, "DISARMED", rows[-1][7], None,
                     None])
    summary = summarise(log)
    profile = header.get("athlete_profile", {})
    return {
        "type": "session",
        "live": False,
        "meta": _meta(header, settings.get("mode", "?"), settings.get("load_pct", 0.0),
                      settings.get("speed", 1.0), settings.get("reps", 1)),
        "plan": plan,
        "limits": _limits(header.get("bench", {}).get("limits", {}).get("max_torque_nm", 0.0),
                          profile.get("shoulder_torque_limit_Nm", 0.0), athlete_share,
                          profile.get("shoulder_flexion_range_deg", [0.0, 0.0])),
        "rows": rows,
        "summary": {"lines": summary.lines(), "end": summary.end},
    }


# ---------------------------------------------------------------------- the server
class WebServer:
    """The page's server, in its own thread and event loop (see the module docstring).

    ``start()`` binds and serves (ConfigError when the address cannot be bound); ``attach``
    shows a live session; ``show(payload)`` a finished one; ``close()`` stops it.
    ``stop_if_page_lost_s``: once a page has been connected, a live session with no page
    connected for that long is stopped (controlled stop); None (default) never.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                 stop_if_page_lost_s: float | None = None, feed_hz: float = FEED_HZ):
        self.host, self.port = host, port
        self.token = token or secrets.token_urlsafe(16)
        self.stop_if_page_lost_s = stop_if_page_lost_s
        self.feed_period_s = 1.0 / feed_hz
        self._web = _require_aiohttp()
        self._html = page_html()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._queues: set[asyncio.Queue] = set()
        self._session = None
        self._hello: dict | None = None
        self._final: dict | None = None
        self._end_ramp_t = math.inf
        self._ever_connected = False
        self._lost_since: float | None = None
        self._acked: set[int] = set()
        self._stopped: asyncio.Event | None = None  # created on the server's loop (_serve)
        self._closing = threading.Event()  # ends the feed thread
        self.attached = False  # a live session was shown (its log then exists)
        self.page_stops: list[dict] = []  # each STOP pressed on a page: kind, perf_counter s

    # -------------------------------------------------------------- lifecycle (caller's thread)
    def start(self) -> str:
        """Bind (``host``, ``port``; 0 picks a free port) and serve; returns the page's URL."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        try:
            sock = socket.create_server((self.host, self.port), family=family, backlog=16)
        except OSError as error:
            raise ConfigError(f"--web {self.host}:{self.port}: cannot listen there "
                              f"({error.strerror or error})") from None
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._run, args=(sock,), name="web-page",
                                        daemon=True)
        self._thread.start()
        self._ready.wait(10.0)
        if self._error is not None:
            raise ConfigError(f"--web: the page's server did not start ({self._error})")
        return self.url

    @property
    def url(self) -> str:
        """The page's address, token included (a reachable address when bound to all)."""
        host = self.host
        if host in ("0.0.0.0", "::", ""):
            host = _lan_address()
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/?token={self.token}"

    @property
    def pages(self) -> int:
        """Pages connected now."""
        return len(self._queues)

    def close(self) -> None:
        """Stop serving (the pages show that the server went away)."""
        self._closing.set()
        if self._stopped is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(timeout=5.0)

    @contextlib.contextmanager
    def attach(self, session, hello: dict) -> Iterator[None]:
        """Show ``session`` live while in the block (``hello``: :func:`plan_payload`)."""
        self._end_ramp_t = hello["plan"]["end_ramp_t"]
        self.attached = True
        self._call(self._set_live, session, hello)
        try:
            yield
        finally:
            self._session = None

    def show(self, payload: dict, wait_s: float = 0.0) -> None:
        """Show a finished session (:func:`session_payload`) to every page, now and later;
        wait up to ``wait_s`` for the pages connected now to confirm they received it."""
        waiting = self.pages
        self._call(self._set_final, payload)
        deadline = time.monotonic() + wait_s
        while waiting and len(self._acked) < waiting and time.monotonic() < deadline:
            time.sleep(0.02)

    def _call(self, function: Callable, *args: Any) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(function, *args)

    # -------------------------------------------------------------- the server's thread
    def _run(self, sock: socket.socket) -> None:
        with realtime_priority(priority=1), pinned(other_cpus()):
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve(sock))
            except BaseException as error:  # reported by start() if it happens there
                self._error = error
                self._ready.set()
            finally:
                loop.close()

    async def _serve(self, sock: socket.socket) -> None:
        web = self._web
        self._stopped = asyncio.Event()
        app = web.Application()
        app.router.add_get("/", self._page)
        app.router.add_get("/ws", self._socket)
        app.router.add_post("/api/stop", self._stop)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        site = web.SockSite(runner, sock)
        await site.start()
        feed = threading.Thread(target=self._feed, name="web-page-feed", daemon=True)
        feed.start()
        self._ready.set()
        try:
            await self._stopped.wait()
        finally:
            self._closing.set()
            for queue in list(self._queues):
                _offer(queue, None)  # each page's sender closes its socket
            await asyncio.sleep(0.05)
            await runner.cleanup()

    def _authorised(self, request, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token.encode(), self.token.encode())

    async def _page(self, request):
        web = self._web
        if not self._authorised(request, request.query.get("token")):
            return web.Response(status=403, text="403: this page needs the session's token "
                                "(the URL printed by bemore drive)")
        return web.Response(text=self._html, content_type="text/html", charset="utf-8",
                            headers={"Cache-Control": "no-store",
                                     "Content-Security-Policy": "default-src 'self'; "
                                     "script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                     "connect-src 'self'; img-src 'self' data:"})

    async def _socket(self, request):
        web = self._web
        if not self._authorised(request, request.query.get("token")):
            raise web.HTTPForbidden(text="403: the token is required")
        ws = web.WebSocketResponse(heartbeat=HEARTBEAT_S)
        await ws.prepare(request)
        queue: asyncio.Queue = asyncio.Queue(maxsize=PAGE_QUEUE)
        for message in (self._hello, self._final):
            if message is not None:
                _offer(queue, json.dumps(message))
        self._queues.add(queue)
        self._ever_connected, self._lost_since = True, None
        sender = asyncio.create_task(_send_all(ws, queue))
        try:
            async for message in ws:
                if message.type == self._web.WSMsgType.TEXT and message.data == "ack-session":
                    self._acked.add(id(queue))
        finally:
            self._queues.discard(queue)
            if not self._queues:
                self._lost_since = time.monotonic()
            sender.cancel()
        return ws

    async def _stop(self, request):
        web = self._web
        if not self._authorised(request, request.headers.get(TOKEN_HEADER)):
            return web.json_response({"error": "the token is required"}, status=403)
        received = time.perf_counter()
        try:
            kind = (await request.json()).get("kind", "stop")
        except (ValueError, AttributeError):
            kind = "stop"
        if kind not in ("stop", "estop"):
            return web.json_response({"error": f"unknown kind {kind!r}"}, status=400)
        session = self._session
        if session is None:
            return web.json_response({"error": "no session running"}, status=409)
        who = request.remote or "?"
        # logged first, so that the log reads in order: the press, then the session's stop
        session.log.event("page stop", f"{kind.upper()} pressed on the web page ({who})",
                          sync=False, button=kind, client=who,
                          received_host_time=round(session.log.host_time(received), 6))
        if kind == "estop":
            session.request_stop("estop", f"e-stop from the web page ({who})")
        else:
            session.request_stop("interrupted", f"stopped from the web page ({who})")
        self.page_stops.append({"kind": kind, "perf_s": received})
        return web.json_response({"ok": True, "kind": kind})

    def _set_live(self, session, hello: dict) -> None:
        self._session, self._hello, self._final = session, hello, None
        self._broadcast(json.dumps(hello))

    def _set_final(self, payload: dict) -> None:
        self._session, self._final = None, payload
        self._acked.clear()
        self._broadcast(json.dumps(payload))

    def _broadcast(self, text: str) -> None:
        for queue in self._queues:
            _offer(queue, text)

    def _feed(self) -> None:
        """Feed-thread body: a sample of the live session for every page, FEED_HZ times a
        second, just after a send deadline while streaming; enforce --stop-if-page-lost."""
        period_ns = round(self.feed_period_s * 1e9)
        with realtime_priority(priority=1), pinned(other_cpus()):
            next_ns = time.perf_counter_ns()
            while not self._closing.is_set():
                next_ns = max(next_ns + period_ns, time.perf_counter_ns())
                session = self._session
                scheduler = getattr(session, "scheduler", None)
                wake_ns = next_ns
                if scheduler is not None:
                    slots = -(-(next_ns - scheduler.t0_ns) // scheduler.period_ns)  # ceil
                    wake_ns = scheduler.t0_ns + max(slots, 0) * scheduler.period_ns \
                        + AFTER_SEND_NS
                delay_s = (wake_ns - time.perf_counter_ns()) * 1e-9
                if delay_s > 0 and self._closing.wait(delay_s):
                    return
                if session is None:
                    continue
                if self._queues:
                    text = json.dumps({"type": "sample",
                                       "row": status_sample(session, self._end_ramp_t)})
                    self._call(self._broadcast, text)
                self._check_page_lost(session)

    def _check_page_lost(self, session) -> None:
        """--stop-if-page-lost: a controlled stop once no page was connected for that long
        (after one had been)."""
        limit = self.stop_if_page_lost_s
        lost_since = self._lost_since
        if (limit is not None and self._ever_connected and lost_since is not None
                and time.monotonic() - lost_since > limit and not session.stop_requested):
            message = f"no page connected for {limit:g} s (--stop-if-page-lost)"
            session.log.event("page lost", message, sync=False)
            session.request_stop("interrupted", f"stopped: {message}")


def _offer(queue: asyncio.Queue, item: str | None) -> None:
    """Queue ``item`` for a page, dropping its oldest sample when it is full (a slow page)."""
    while True:
        try:
            queue.put_nowait(item)
            return
        except asyncio.QueueFull:
            with contextlib.suppress(asyncio.QueueEmpty):
                queue.get_nowait()


async def _send_all(ws, queue: asyncio.Queue) -> None:
    """One page's sender: its queue to its socket (None closes it)."""
    with contextlib.suppress(ConnectionError, RuntimeError, asyncio.CancelledError):
        while True:
            item = await queue.get()
            if item is None:
                await ws.close()
                return
            await ws.send_str(item)


def _lan_address() -> str:
    """This machine's address on its default route (no packet is sent), else its host name."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 1))
        return probe.getsockname()[0]
    return socket.gethostname()


def announce(server: WebServer, echo: Callable[[str], None]) -> None:
    """Print the page's URL (token included) and its QR code for a tablet."""
    echo(f"live page: {server.url}")
    qr = terminal_qr(server.url)
    if qr:
        echo(qr.rstrip("\n"))
