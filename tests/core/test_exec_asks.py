"""`agentvisor exec` asks through a running gateway's exec server (issue 15 points 2, 3,
outside MCP): they wait without holding anything another run needs, count against the
gateway's caps on pending asks, and a CLI killed while it waits withdraws its ask.

Real parts: `agentvisor serve` as a process, the real `agentvisor exec` CLI, bwrap, and a
person present on the shared approval queue (as the dashboard is) who answers or not."""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentvisor.config import ApprovalsConfig
from agentvisor.state import State
from agentvisor.state.asks import Answer
from tests.conftest import AGENTVISOR, requires_bwrap
from tests.gateway.conftest import free_port

pytestmark = requires_bwrap

ASKS = "sudo -n true; touch ran"  # sudo asks; nothing answers it here unless a test does


@pytest.fixture
def served(tmp_path: Path, isolated_home: Path) -> Iterator[dict[str, Any]]:
    """`agentvisor serve` with its exec server, its approval queue in a shared database,
    and a person present on that queue (so asks wait for them instead of failing fast)."""
    env = dict(os.environ, HOME=str(isolated_home), XDG_RUNTIME_DIR=str(tmp_path / "run"))
    env.pop("AGENTVISOR_NO_GATEWAY", None)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    config = isolated_home / ".config" / "agentvisor" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(
        f"approvals: {{timeout: 120}}\naudit: {{url: '{url}'}}\n"
        "rules: [{decision: ask, kind: fetch, pattern: asked.example.test}]\n"
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    queue = State(url).approvals
    stop, present = threading.Event(), threading.Event()

    def person_present() -> None:
        with queue.present("test-dashboard"):
            present.set()
            stop.wait(300)

    threading.Thread(target=person_present, daemon=True).start()
    assert present.wait(10)
    proc = subprocess.Popen(
        [AGENTVISOR, "serve", "--port", str(free_port()), "--workspace", str(ws)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    sock = tmp_path / "run" / "agentvisor" / "exec.sock"
    deadline = time.monotonic() + 30
    while not sock.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert sock.exists(), proc.communicate()[1] if proc.poll() is not None else "no socket"
    try:
        yield {"env": env, "ws": ws, "queue": queue}
    finally:
        stop.set()
        proc.terminate()
        proc.wait(15)


def start_exec(served: dict[str, Any], command: str, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [AGENTVISOR, "exec", *options, "--", "sh", "-c", command],
        env=served["env"],
        cwd=served["ws"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def until(check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


def exec_latency(served: dict[str, Any]) -> float:
    """The best of three medians of five `agentvisor exec -- true` runs."""
    medians = []
    for _ in range(3):
        took = []
        for _ in range(5):
            start = time.perf_counter()
            proc = start_exec(served, "true")
            assert proc.wait(60) == 0, proc.communicate()
            took.append(time.perf_counter() - start)
        medians.append(statistics.median(took))
    return min(medians)


def test_pending_exec_asks_are_capped_and_a_second_exec_keeps_its_speed(
    served: dict[str, Any],
) -> None:
    queue = served["queue"]
    cap = ApprovalsConfig().max_pending_per_client  # every exec of this user is one client
    exec_latency(served)  # warm up
    unloaded = exec_latency(served)
    # 100 at once: the cap must hold even when they all ask at the same moment.
    started = [start_exec(served, ASKS) for _ in range(100)]
    try:
        until(lambda: sum(p.poll() is not None for p in started) >= 100 - cap, timeout=120)
        until(lambda: len(queue.pending()) >= cap, timeout=120)
        loaded = exec_latency(served)
        waiting = [p for p in started if p.poll() is None]
        assert len(waiting) == cap and len(queue.pending()) == cap, len(waiting)
        refused = [p.communicate()[1] for p in started if p not in waiting]
    finally:
        for proc in started:
            proc.kill()
            proc.wait()
    print(
        f"exec -- true median: unloaded {unloaded * 1000:.1f} ms, {cap} asks {loaded * 1000:.1f} ms"
    )
    assert all("gateway:ask-limit" in r for r in refused), refused[0]
    assert all(f"this client already has {cap} asks waiting" in r for r in refused), refused[0]
    assert loaded <= 2 * unloaded, (unloaded, loaded)
    assert not (served["ws"] / "ran").exists()


def test_an_exec_killed_while_it_waits_withdraws_its_ask(served: dict[str, Any]) -> None:
    queue = served["queue"]
    proc = start_exec(served, ASKS)
    until(lambda: len(queue.pending()) == 1)
    [ask] = queue.pending()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    until(lambda: (queue.get(ask.id) or ask).status != "pending", timeout=10)
    assert queue.get(ask.id).status == "withdrawn"
    late = queue.answer(ask.id, Answer("once", "web", "tester"))
    assert not late and "withdrawn" in late.message
    time.sleep(1.0)
    assert not (served["ws"] / "ran").exists()


def test_control_an_answered_exec_ask_runs(served: dict[str, Any]) -> None:
    queue = served["queue"]
    proc = start_exec(served, ASKS)
    with contextlib.ExitStack() as stack:
        stack.callback(proc.kill)
        until(lambda: len(queue.pending()) == 1)
        [ask] = queue.pending()
        assert queue.answer(ask.id, Answer("once", "web", "tester"))
        assert proc.wait(60) == 0, proc.communicate()
    assert (served["ws"] / "ran").exists()


# Through the egress proxy: prints the status, or the proxy's refusal and its rule.
FETCH = (
    'python3 -c "import urllib.request as u, urllib.error as e\n'
    "try: print(u.urlopen('http://asked.example.test/', timeout=110).status)\n"
    "except e.HTTPError as x: print(x.code, x.headers['x-agentvisor-rule'])\""
)


def test_a_network_ask_of_an_exec_run_goes_to_the_gateways_people(
    served: dict[str, Any],
) -> None:
    """A destination asked while an exec runs behind the proxy waits on the gateway's
    queue (not the server's own terminal); answered, the request goes on (to the name's
    lookup, which refuses a name that does not exist)."""
    queue = served["queue"]
    proc = start_exec(served, FETCH, "--network", "proxy")
    with contextlib.ExitStack() as stack:
        stack.callback(proc.kill)
        until(lambda: len(queue.pending()) == 1)
        [ask] = queue.pending()
        assert ask.action["kind"] == "fetch" and "asked.example.test" in ask.action["target"]
        assert queue.answer(ask.id, Answer("once", "web", "tester"))
        out, err = proc.communicate(timeout=60)
    assert out.startswith("403 guard:dns"), (out, err)


def test_an_exec_killed_while_its_network_ask_waits_withdraws_it(
    served: dict[str, Any],
) -> None:
    queue = served["queue"]
    proc = start_exec(served, FETCH, "--network", "proxy")
    until(lambda: len(queue.pending()) == 1)
    [ask] = queue.pending()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    until(lambda: (queue.get(ask.id) or ask).status != "pending", timeout=10)
    assert queue.get(ask.id).status == "withdrawn"
