"""Screenshots of the coach's live page during a dry run, phone-sized and desktop-sized, for
docs/ (README links them).

    .venv/bin/python tools/web_screenshots.py SETPOINTS.csv [--mode assistive --load 70]
        [--reps 2] [--at 1.6] [--out docs/img]

Runs ``controller.drive.drive`` on the simulated bench with the page's server, opens the page
in Debian's headless chromium (Selenium, /usr/bin/chromedriver) at 390×844 and 1280×800, and
saves each whole page ``--at`` seconds into the session: live_page_phone.png,
live_page_desktop.png.
"""

from __future__ import annotations

import argparse
import base64
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controller.drive import drive  # noqa: E402
from controller.modes import ModeSettings, build_plan  # noqa: E402
from controller.profile import DEFAULT_PROFILE  # noqa: E402
from controller.setpoints import read_setpoints  # noqa: E402
from controller.settings import load_bench  # noqa: E402
from controller.webview import WebServer, plan_payload  # noqa: E402

SIZES = {"phone": (390, 844), "desktop": (1280, 800)}


def browser(width: int, height: int, folder: Path):
    """Headless chromium at ``width`` × ``height`` CSS pixels, at nice 19 without the right to
    raise it (as tests/controller/test_webview.py: run as root, chromium would raise its display
    threads to nice -8 and starve the simulated bench on a busy 2-core machine)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    wrapper = folder / "chromedriver"
    wrapper.write_text("#!/bin/sh\nexec setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice "
                       'nice -n 19 /usr/bin/chromedriver "$@"\n')
    wrapper.chmod(0o755)

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                     f"--window-size={width},{height}"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(str(wrapper)), options=options)


def full_page(driver, path: Path) -> None:
    """The whole page (beyond the window's height) as a PNG."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    width = driver.execute_script("return document.documentElement.clientWidth")
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})
    path.write_bytes(base64.b64decode(shot["data"]))


def main() -> None:
    """Entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("setpoints")
    parser.add_argument("--mode", default="assistive")
    parser.add_argument("--load", type=float, default=70.0)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--at", type=float, default=1.6, help="seconds after ARM")
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bench = load_bench()
    gesture = read_setpoints(args.setpoints)
    settings = ModeSettings(mode=args.mode, load_pct=args.load, reps=args.reps, rest_s=1.0,
                            rate_hz=bench.streaming.rate_hz,
                            ramp_down_s=bench.streaming.ramp_down_s)
    plan = build_plan(gesture, settings)
    hello = plan_payload(plan, settings, bench, DEFAULT_PROFILE, gesture.metadata)
    server = WebServer(port=0)
    url = server.start()
    scratch = Path(tempfile.mkdtemp())
    drivers = {name: browser(*size, scratch) for name, size in SIZES.items()}
    try:
        for driver in drivers.values():
            driver.get(url)
        armed = threading.Event()

        def view(session):
            armed.set()
            return server.attach(session, hello)

        result: dict = {}
        log_path = out / "screenshot_session.jsonl"
        log_path.unlink(missing_ok=True)  # the previous run's: drive never overwrites a log
        thread = threading.Thread(target=lambda: result.setdefault("r", drive(
            gesture, log_path, settings, bench=bench, plan=plan, view=view)), daemon=True)
        thread.start()
        armed.wait(30)
        time.sleep(args.at)
        shots = [threading.Thread(target=full_page, args=(driver, out / f"live_page_{name}.png"))
                 for name, driver in drivers.items()]  # both at the same instant
        for shot in shots:
            shot.start()
        for shot in shots:
            shot.join()
        print(f"wrote {', '.join(str(out / f'live_page_{name}.png') for name in drivers)}")
        thread.join(60)
        print(result["r"].message)
    finally:
        for driver in drivers.values():
            driver.quit()
        server.close()
        (out / "screenshot_session.jsonl").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
