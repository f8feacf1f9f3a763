"""The coach's live page (``bemore drive --web``): does it disturb the stream, and how fast does
its STOP reach the bench?

1. Streaming timing, same run, alternately, each on a fresh simulated bench (10 s at 1 kHz, the
   gesture of ``bench_streaming``): without ``--web``; with the page's server and no page; with
   the server and five pages open. A page is a WebSocket reading and decoding every message in
   another process (a tablet takes none of the bench PC's CPU; the browser's own rendering is
   not on this machine). Printed per run: the load average, period error p50/p99/p99.9/max,
   misses, the host process's CPU (user + system, in CPU-seconds per second of the session) and
   the messages each page received per second of the session (connect to disarm).
2. STOP latency: sessions stopped by a page's STOP (POST /api/stop with the token, from another
   process, at a random instant 0.2–1.5 s into the stream). From the press (the client's
   ``perf_counter`` just before the request; CLOCK_MONOTONIC, shared by every process) to the
   first setpoint of the ramp-down written to the bench, and to the first telemetry frame
   showing a ramp setpoint in force at the firmware (its due time is the lead, 20 ms, after it
   was sent). Target: the ramp reached within 50 ms.
"""

from __future__ import annotations

import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bemore.settings import load_bench
from bench.bench_streaming import slow_gesture
from bench.common import Measurement
from controller.drive import drive
from controller.log import read_log
from controller.modes import ModeSettings, build_plan
from controller.profile import DEFAULT_PROFILE
from controller.webview import WebServer, plan_payload

RUNS = 3
PAGES = 5
STOPS = 20
ARMS = ("no --web", "--web, no page", f"--web, {PAGES} pages")


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _pages_process(url: str, n: int, seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bench.web_pages", "read", url, str(n),
                             str(seconds)], stdout=subprocess.PIPE, text=True)


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.01)


def stream_once(arm: str, duration_s: float, folder: Path) -> dict:
    """One dry run of ``duration_s`` at 1 kHz in ``arm`` (one of ARMS); its figures."""
    bench = load_bench()
    settings = ModeSettings(rate_hz=1000.0, ramp_down_s=0.3)
    gesture = slow_gesture(duration_s)
    plan = build_plan(gesture, settings)
    server = pages = None
    view = None
    if arm != ARMS[0]:
        server = WebServer(port=0)
        url = server.start()
        hello = plan_payload(plan, settings, bench, DEFAULT_PROFILE, gesture.metadata)

        def view(session):
            return server.attach(session, hello)

        if arm == ARMS[2]:
            pages = _pages_process(url, PAGES, duration_s + 30)
            _wait(lambda: server.pages == PAGES, 20, "the pages to connect")
    load = os.getloadavg()[0]
    cpu, wall = _cpu_s(), time.perf_counter()
    log_path = folder / "session.jsonl"
    log_path.unlink(missing_ok=True)  # the previous run's: drive never overwrites a log
    try:
        result = drive(gesture, log_path, settings, bench=bench, plan=plan, view=view)
    finally:
        cpu, wall = _cpu_s() - cpu, time.perf_counter() - wall
        if server is not None:
            server.close()
    per_page = []
    if pages is not None:
        out, _ = pages.communicate(timeout=30)
        per_page = [count / wall for count in json.loads(out)["messages"]]
    return result.timing | {"reason": result.reason, "load": load, "cpu_per_s": cpu / wall,
                            "firmware_late": result.firmware_late, "page_rate": per_page}


def stop_once(delay_s: float, folder: Path) -> dict:
    """One session stopped by a page's STOP ``delay_s`` after ARM; the latencies (ms), or
    {"ended": message} when the session ended otherwise before the STOP (this shared machine
    can stall the simulated bench's pseudo-terminal past the telemetry timeout)."""
    bench = load_bench()
    settings = ModeSettings(rate_hz=1000.0, ramp_down_s=0.3)
    gesture = slow_gesture(3.0)
    plan = build_plan(gesture, settings)
    server = WebServer(port=0)
    url = server.start()
    hello = plan_payload(plan, settings, bench, DEFAULT_PROFILE, gesture.metadata)
    client = subprocess.Popen([sys.executable, "-m", "bench.web_pages", "stop", url,
                               str(delay_s)], stdout=subprocess.PIPE, text=True)
    _wait(lambda: server.pages == 1, 20, "the stopping page to connect")
    log_path = folder / "stop.jsonl"
    log_path.unlink(missing_ok=True)  # the previous run's: drive never overwrites a log
    load = os.getloadavg()[0]
    try:
        result = drive(gesture, log_path, settings, bench=bench, plan=plan,
                       view=lambda session: server.attach(session, hello))
    finally:
        server.close()
    if result.reason != "interrupted":
        client.kill()
        return {"load": load, "ended": f"{result.reason}: {result.message}"}
    pressed = json.loads(client.communicate(timeout=30)[0])
    if pressed["status"] != 200:
        raise RuntimeError(f"the page's STOP was refused: HTTP {pressed['status']}")
    log = read_log(log_path)
    event = next(e for e in log.events if e["kind"] == "page stop")
    origin = server.page_stops[0]["perf_s"] - event["received_host_time"]
    pressed_at = pressed["sent_perf_s"] - origin
    ramp = [i for i, rep in enumerate(log.setpoints["rep"]) if rep == -1]
    ramp_times = {int(log.setpoints["time_ms"][i]) for i in ramp}
    first_sent = float(log.setpoints["host_time"][ramp[0]])
    in_force = next(float(t) for t, due in zip(log.telemetry["host_time"],
                                               log.telemetry["setpoint_time_ms"], strict=True)
                    if int(due) in ramp_times and t > first_sent)
    return {"load": load,
            "request_ms": (event["received_host_time"] - pressed_at) * 1e3,
            "sent_ms": (first_sent - pressed_at) * 1e3,
            "in_force_ms": (in_force - pressed_at) * 1e3}


def _distribution(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return (f"median {statistics.median(ordered):.1f}, p90 {p90:.1f}, min {ordered[0]:.1f}, "
            f"max {ordered[-1]:.1f} ms")


def run(smoke: bool) -> list[Measurement]:
    """Both parts (smoke: 1 s streams, one run; two stops)."""
    duration_s, runs, stops = (1.0, 1, 2) if smoke else (10.0, RUNS, STOPS)
    by_arm: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    with tempfile.TemporaryDirectory() as folder:
        for index in range(runs):
            for arm in ARMS if index % 2 == 0 else tuple(reversed(ARMS)):
                t = stream_once(arm, duration_s, Path(folder))
                by_arm[arm].append(t)
                rates = ", ".join(f"{rate:.1f}" for rate in t["page_rate"])
                print(f"  run {index + 1}/{runs} {arm:<16} load {t['load']:.1f}: period error "
                      f"p50 {t['period_error_p50_ms']:.3f}, p99 {t['period_error_p99_ms']:.3f}, "
                      f"p99.9 {t['period_error_p999_ms']:.3f}, max "
                      f"{t['period_error_max_ms']:.2f} ms; misses firmware "
                      f"{t['firmware_late']}, host {t['deadline_misses']}; late sends "
                      f"{t['late_sends']}; host CPU {t['cpu_per_s']:.2f} s/s ({t['reason']})"
                      + (f"; messages per page per s: {rates}" if rates else ""))
                sys.stdout.flush()
        random.seed(21)
        latencies, ended = [], []
        for index in range(stops):
            last = stop_once(random.uniform(0.2, 1.5), Path(folder))
            if "ended" in last:
                ended.append(last["ended"])
                print(f"  stop {index + 1}/{stops} load {last['load']:.1f}: the session ended "
                      f"before the STOP: {last['ended']}")
                continue
            latencies.append(last)
            print(f"  stop {index + 1}/{stops} load {last['load']:.1f}: request "
                  f"{last['request_ms']:.1f} ms, ramp's first setpoint sent "
                  f"{last['sent_ms']:.1f} ms, ramp in force at the firmware "
                  f"{last['in_force_ms']:.1f} ms after the press")
            sys.stdout.flush()
    if not latencies:
        raise RuntimeError("no session reached its page's STOP: " + "; ".join(ended))
    for key, what in (("request_ms", "press → request at the server"),
                      ("sent_ms", "press → ramp's first setpoint sent"),
                      ("in_force_ms", "press → ramp in force at the firmware (telemetry)")):
        print(f"  {what}: {_distribution([x[key] for x in latencies])} ({len(latencies)} "
              f"stops; {len(ended)} sessions ended otherwise before their STOP)")

    def median(arm: str, key: str) -> float:
        return statistics.median(r[key] for r in by_arm[arm])

    out = []
    for arm in ARMS[1:]:
        out.append(Measurement(f"period error p99 at 1 kHz, {arm} (median of {runs})", "ms",
                               max(median(arm, "period_error_p99_ms"), 1e-6),
                               median(ARMS[0], "period_error_p99_ms"), "no --web, same run",
                               "no degradation"))
    out.append(Measurement(f"host CPU with {PAGES} pages (median of {runs})", "s/s",
                           median(ARMS[2], "cpu_per_s"), median(ARMS[0], "cpu_per_s"),
                           "no --web, same run"))
    stops = len(latencies)
    out.append(Measurement(f"page STOP → ramp's first setpoint sent, median of {stops}", "ms",
                           statistics.median(x["sent_ms"] for x in latencies), target="< 50 ms"))
    out.append(Measurement(f"page STOP → ramp's first setpoint sent, max of {stops}", "ms",
                           max(x["sent_ms"] for x in latencies), target="< 50 ms"))
    return out
