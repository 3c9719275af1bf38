"""Dashboard login: token guesses are slowed per source (one checked at a time, then a
back-off that doubles), and every wrong token is recorded (issue 16). A real `serve`."""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx

from agentvisor.state import State
from tests.dashboard.conftest import serve
from tests.dashboard.test_access import DASH_TOKEN, with_login


def _login(gw: Any, token: str) -> httpx.Response:
    return httpx.post(
        gw.base + "/dashboard/login",
        data={"name": "mallory", "token": token},
        headers={"origin": gw.base},
        timeout=30,
    )


def test_parallel_wrong_guesses_are_refused_unchecked_and_recorded(dash_env: Any) -> None:
    with_login(dash_env)
    with serve(dash_env) as gw:
        # Control: a single wrong token is checked and refused as wrong.
        assert _login(gw, "guess-0").status_code == 401

        async def burst() -> list[int]:
            statuses: list[int] = []
            async with httpx.AsyncClient(timeout=30) as client:

                async def guess(n: int) -> None:
                    response = await client.post(
                        gw.base + "/dashboard/login",
                        data={"name": "mallory", "token": f"guess-{n}"},
                        headers={"origin": gw.base},
                    )
                    statuses.append(response.status_code)

                async with anyio.create_task_group() as tg:
                    for n in range(1, 41):
                        tg.start_soon(guess, n)
            return statuses

        statuses = anyio.run(burst)
        checked = statuses.count(401)
        assert checked <= 2 and statuses.count(429) == 40 - checked, statuses

        # Wrong tokens in a row: from the third, the source waits, even with the right one.
        wrong = 1 + checked
        while _login(gw, "guess-again").status_code == 401:
            wrong += 1
        refused = _login(gw, DASH_TOKEN)
        assert refused.status_code == 429 and "try again in" in refused.text
        deadline = time.monotonic() + 20
        while (ok := _login(gw, DASH_TOKEN)).status_code == 429:
            assert time.monotonic() < deadline, "the back-off never ended"
            time.sleep(0.5)
        assert ok.status_code == 303  # the right token, once the wait is over

    failures = State().audit.events(kind="login")
    assert failures and all(e.decision == "deny" for e in failures)
    assert all("from 127.0.0.1" in (e.result or "") for e in failures)
    assert any("attempts refused unchecked meanwhile" in (e.result or "") for e in failures)
    assert len(failures) == wrong  # every checked wrong token, and only those


def test_a_spoofed_forwarded_for_is_no_new_source(dash_env: Any) -> None:
    """Issue 16, a new variant: uvicorn took the client's address from X-Forwarded-For on
    connections from 127.0.0.1, so 40 guesses naming 40 sources were all checked. The
    source is the connection's own address; another address is not locked out."""
    with_login(dash_env)
    with serve(dash_env) as gw:

        async def burst() -> list[int]:
            statuses: list[int] = []
            async with httpx.AsyncClient(timeout=30) as client:

                async def guess(n: int) -> None:
                    response = await client.post(
                        gw.base + "/dashboard/login",
                        data={"name": "mallory", "token": f"guess-{n}"},
                        headers={"origin": gw.base, "x-forwarded-for": f"10.0.0.{n}"},
                    )
                    statuses.append(response.status_code)

                async with anyio.create_task_group() as tg:
                    for n in range(1, 41):
                        tg.start_soon(guess, n)
            return statuses

        statuses = anyio.run(burst)
        assert statuses.count(401) <= 2 and statuses.count(429) >= 38, statuses
        while _login(gw, "guess-again").status_code == 401:
            pass  # the guesser's own address is now waiting
        assert _login(gw, DASH_TOKEN).status_code == 429
        # A person on another address (127.0.0.2 is loopback too) logs in at once.
        other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"))
        with other:
            response = other.post(
                gw.base + "/dashboard/login",
                data={"name": "alice", "token": DASH_TOKEN},
                headers={"origin": gw.base},
                timeout=30,
            )
        assert response.status_code == 303, response.text
    sources = [e.result or "" for e in State().audit.events(kind="login")]
    assert sources and all("from 127.0.0.1" in s for s in sources), sources
