"""Persistent session containers: reused while their settings hold, replaced when not."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from agentvisor.sandbox.docker import DockerBackend
from agentvisor.sandbox.env import build_env

from .helpers import config


def session(ws: Path, name: str, **settings: Any) -> DockerBackend:
    env = build_env(os.environ, home=str(Path.home())).env
    return DockerBackend(config(persistent=True, **settings), ws, env, Path.home(), session=name)


def running(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0


def container_id(engine: Any, backend: DockerBackend) -> str:
    return engine.inspect_container(backend._container_name())["Id"]


def start_background(backend: DockerBackend, marker: str) -> None:
    result = backend.run(
        [
            "sh",
            "-c",
            f"echo kept > /tmp/state; nohup sh -c 'sleep 300; : {marker}' >/dev/null 2>&1 &",
        ]
    )
    assert result.ok, result


def test_session_keeps_files_and_background_processes(ws: Path, engine: Any) -> None:
    marker = f"agentvisor-keep-{os.getpid()}"
    first = session(ws, "keep")
    try:
        start_background(first, marker)
        assert running(marker)
        again = session(ws, "keep")  # a new process of the same session, same settings
        result = again.run(["cat", "/tmp/state"])
        assert result.stdout == b"kept\n" and result.stderr == b""
        assert container_id(engine, again) == container_id(engine, first)
        assert running(marker)
        other = session(ws, "other-session")  # control: another session is another container
        assert other.run(["sh", "-c", "cat /tmp/state || echo none"]).stdout == b"none\n"
        other.close()
    finally:
        first.close()
    assert not running(marker)
    assert engine.containers(all=True, filters={"name": first._container_name()}) == []


def test_changed_limits_replace_the_container_with_a_notice(ws: Path, engine: Any) -> None:
    marker = f"agentvisor-replace-{os.getpid()}"
    first = session(ws, "replace", memory_mb=512)
    try:
        start_background(first, marker)
        old = container_id(engine, first)
        changed = session(ws, "replace", memory_mb=640)
        result = changed.run(["sh", "-c", "cat /tmp/state || echo fresh"])
        assert result.stdout == b"fresh\n"
        notice = result.stderr.decode()
        assert "replaced because its settings changed (limits)" in notice, notice
        assert "background processes included, have ended" in notice, notice
        assert container_id(engine, changed) != old
        assert not running(marker)
    finally:
        first.close()


def test_a_new_image_replaces_the_container(ws: Path, engine: Any, image: str) -> None:
    first = session(ws, "image")
    assert first.run(["true"]).ok
    committed = engine.commit(
        first._container_name(), repository="agentvisor-test-alt", tag="latest"
    )["Id"]
    try:
        newer = session(ws, "image", docker={"image": "agentvisor-test-alt:latest"})
        notice = newer.run(["true"]).stderr.decode()
        assert "settings changed (image)" in notice, notice
        # Rebuilding the same tag to new content counts as a change too (the id is hashed).
        engine.tag(image, "agentvisor-test-alt", "latest", force=True)
        rebuilt = session(ws, "image", docker={"image": "agentvisor-test-alt:latest"})
        assert "settings changed (image)" in rebuilt.run(["true"]).stderr.decode()
    finally:
        first.close()  # the session's one container, whichever backend made it
        engine.remove_image("agentvisor-test-alt:latest", force=True)
        engine.remove_image(committed, force=True)


def test_for_session_gives_a_session_its_own_container(ws: Path, engine: Any) -> None:
    from .helpers import sandbox

    shared = sandbox(ws, persistent=True).backend  # what the gateway holds
    assert isinstance(shared, DockerBackend) and not shared.persistent  # no session: fresh
    mine = shared.for_session("s-1")
    try:
        mine.run(["sh", "-c", "echo 1 > /tmp/n"])
        assert mine.run(["cat", "/tmp/n"]).stdout == b"1\n"
        assert shared.run(["sh", "-c", "cat /tmp/n || echo none"]).stdout == b"none\n"
    finally:
        mine.close()


def test_timeout_in_a_session_ends_it_and_the_next_run_works(ws: Path, engine: Any) -> None:
    backend = session(ws, "timeout")
    try:
        result = backend.run(["sleep", "60"], timeout=1.5)
        assert result.exit_code == 124 and result.timed_out
        assert b"the timeout ended the command and every process" in result.stderr
        assert backend.run(["echo", "again"]).stdout == b"again\n"
    finally:
        backend.close()
