"""Stand-ins for the coach's pages, in their own process (as a tablet would be): used by
``bench_webpage``. Not a benchmark itself.

``python -m bench.web_pages read URL N SECONDS``: N pages' WebSockets, each reading and decoding
every message for SECONDS; prints one JSON line {"messages": [per page], "seconds": ...}.
``python -m bench.web_pages stop URL DELAY_S``: waits for the session to be ARMED on its socket,
then DELAY_S more, then presses STOP as the page's button does (POST /api/stop with the token);
prints {"sent_perf_s": time.perf_counter() just before the request, "status": HTTP status}.
perf_counter is CLOCK_MONOTONIC on Linux: the same clock in every process of the machine.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.request

import aiohttp


def _socket_url(url: str) -> str:
    return url.replace("http://", "ws://").replace("/?token=", "/ws?token=")


async def _read(url: str, seconds: float) -> int:
    count = 0
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession() as client, client.ws_connect(_socket_url(url)) as ws:
        while time.monotonic() < deadline:
            try:
                message = await ws.receive(timeout=max(deadline - time.monotonic(), 0.01))
            except asyncio.TimeoutError:
                break
            if message.type != aiohttp.WSMsgType.TEXT:
                break
            json.loads(message.data)
            count += 1
    return count


async def _pages(url: str, n: int, seconds: float) -> list[int]:
    return list(await asyncio.gather(*(_read(url, seconds) for _ in range(n))))


async def _wait_armed(url: str) -> None:
    async with aiohttp.ClientSession() as client, client.ws_connect(_socket_url(url)) as ws:
        async for message in ws:
            data = json.loads(message.data)
            if data["type"] == "sample" and data["row"][6] == "ARMED":
                return


def _stop(url: str, delay_s: float) -> dict:
    asyncio.run(_wait_armed(url))
    time.sleep(delay_s)
    base, token = url.split("/?token=")
    request = urllib.request.Request(f"{base}/api/stop", data=b'{"kind": "stop"}',
                                     headers={"Content-Type": "application/json",
                                              "X-Bemore-Token": token})
    sent = time.perf_counter()
    with urllib.request.urlopen(request, timeout=5) as response:
        status = response.status
    return {"sent_perf_s": sent, "status": status}


def main(argv: list[str]) -> None:
    """Entry point (see the module docstring)."""
    command, url = argv[0], argv[1]
    if command == "read":
        n, seconds = int(argv[2]), float(argv[3])
        started = time.monotonic()
        counts = asyncio.run(_pages(url, n, seconds))
        print(json.dumps({"messages": counts, "seconds": time.monotonic() - started}))
    elif command == "stop":
        print(json.dumps(_stop(url, float(argv[2]))))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
