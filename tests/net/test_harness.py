"""`agentvisor run`: a harness in the sandbox, keys injected by the proxy (issue 18)."""

from __future__ import annotations

import json
import re
import ssl
from pathlib import Path
from typing import Any

import pytest

from agentvisor.actions import Action, Context
from agentvisor.config import config_from_dict
from agentvisor.errors import ConfigError
from agentvisor.net import guard
from agentvisor.net.harness import HarnessPolicy, load_profile, profile_names
from agentvisor.policy import PolicyEngine

from ..conftest import requires_bwrap
from .helpers import Server

TOKEN = "sk-harness-0123456789abcdefghij"


def test_the_shipped_profiles_load_and_are_chosen_by_program_name() -> None:
    assert {"codex", "claude", "hermes", "generic"} <= set(profile_names())
    assert load_profile(None, "/usr/local/bin/codex").name == "codex"
    assert load_profile(None, "claude").name == "claude"
    assert load_profile(None, "hermes").keys[0].secret == "OPENROUTER_API_KEY"
    assert load_profile(None, "my-agent").name == "generic"
    assert load_profile("codex", "anything").state_dirs == [".codex"]


def test_a_bad_profile_is_an_error_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nhosts: [a]\nstate: [.x]\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: state \(line 3\): Extra inputs"):
        load_profile(str(path), "x")
    with pytest.raises(ConfigError, match="no harness profile 'nope'"):
        load_profile("nope", "x")


def test_the_profile_opens_its_hosts_beneath_the_operators_rules(isolated_home: Path) -> None:
    config = config_from_dict(
        {"rules": [{"decision": "deny", "kind": "fetch", "pattern": "api.openai.com:8443"}]}
    )
    engine = PolicyEngine.from_config(config, grants=None)
    policy = HarnessPolicy(engine, load_profile("codex", "codex"))
    proxy = Context(tool="proxy")
    connect = Action("fetch", "api.openai.com:443", method="CONNECT")
    assert engine.decide(connect, proxy).verdict == "deny"  # control: the default
    assert policy.decide(connect, proxy).rule == "profile:codex"
    denied = Action("fetch", "api.openai.com:8443", method="CONNECT")
    assert policy.decide(denied, proxy).verdict == "deny"  # the operator's rule wins
    other = Action("fetch", "example.com:443", method="CONNECT")
    assert policy.decide(other, proxy).verdict == "deny"
    secret = Action("secret", "OPENAI_API_KEY", host="api.openai.com")
    assert policy.decide(secret, proxy).verdict == "allow"
    assert policy.decide(Action("secret", "OTHER", host="x"), proxy).verdict == "ask"


@requires_bwrap
def test_run_gives_the_harness_placeholders_and_its_own_state(
    isolated_home: Path,
    tmp_path: Path,
    workspace: Path,
    ca: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A harness stand-in inside the sandbox calls its API over TLS with the placeholder
    it was given; the server gets the key; a probe in the same sandbox finds the key in
    no environment, file or state directory; the state it wrote lands in agentvisor's
    per-harness directory."""
    from agentvisor.frontends.cli import main

    monkeypatch.setenv("RUN_KEY", TOKEN)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    # api.test resolves to the loopback server on the host side only.
    real = guard.system_resolver
    monkeypatch.setattr(
        guard,
        "system_resolver",
        lambda host, port: ["127.0.0.1"] if host == "api.test" else real(host, port),
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("api.test").configure_cert(context)
    api = Server(tls=context)
    upstream_ca = tmp_path / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(upstream_ca))
    profile = tmp_path / "stand-in.yaml"
    profile.write_text(
        "name: stand-in\nstate_dirs: [.standin]\n"
        "keys: [{env: API_KEY, secret: API_KEY}]\nhosts: [api.test]\n"
    )
    config = tmp_path / "agentvisor.yaml"
    config.write_text(
        f"rules:\n  - {{decision: allow, kind: fetch, pattern: 'api.test:{api.port}'}}\n"
        f"secrets:\n  - {{name: API_KEY, env: RUN_KEY, hosts: ['api.test:{api.port}']}}\n"
        f"network: {{ca_file: '{upstream_ca}'}}\n"
    )
    harness = f"""
import glob, os, urllib.request
req = urllib.request.Request("https://api.test:{api.port}/echo",
    headers={{"Authorization": "Bearer " + os.environ["API_KEY"]}})
with urllib.request.urlopen(req, timeout=20) as r:
    placeholder = os.environ["API_KEY"] == "{{{{secret:API_KEY}}}}"
    print("status", r.status, "key-is-placeholder", placeholder)
open(os.path.expanduser("~/.standin/session.json"), "w").write("{{}}")
found = []
paths = glob.glob("/proc/*/environ") + glob.glob("/run/agentvisor/*")
paths += glob.glob(os.path.expanduser("~/**"), recursive=True)
for path in paths:
    try:
        if b"{TOKEN}" in open(path, "rb").read():
            found.append(path)
    except OSError:
        pass
print("found", found)
"""
    try:
        code = main(
            [
                "run",
                "--config",
                str(config),
                "--profile",
                str(profile),
                "--workspace",
                str(workspace),
                "--",
                "python3",
                "-c",
                harness,
            ]
        )
    finally:
        api.close()
    out = capfd.readouterr().out
    assert code == 0, out
    assert "status 200 key-is-placeholder True" in out, out
    assert "found []" in out, out
    headers = {k.lower(): v for k, v in api.requests[0]["headers"].items()}
    assert headers["authorization"] == f"Bearer {TOKEN}"
    state = tmp_path / "data" / "agentvisor" / "harness" / "stand-in" / ".standin"
    assert (state / "session.json").read_text() == "{}"
    # Every request of the harness is in the audit log, with its outcome, and no value.
    from agentvisor.config import load_config
    from agentvisor.state import State

    events = State.from_config(load_config(config)).audit.events(limit=100)
    network = [e for e in events if e.kind == "network" and (e.session or "").startswith("run-")]
    results = [e.result or "" for e in network]
    assert any(r.startswith(f"CONNECT api.test:{api.port}") for r in results), results
    response = re.compile(rf"GET https://api\.test:{api.port}/echo -> 200, \d+ bytes")
    assert any(response.fullmatch(r) for r in results), results
    assert all(TOKEN not in repr(e.as_dict()) for e in events)


CODEX = Path(__file__).resolve().parents[2] / ".cache" / "codex" / "node_modules" / ".bin" / "codex"
CODEX_REPLY = "HELLO-FROM-THE-TEST-SERVER"


class ResponsesServer(Server):
    """An OpenAI-compatible server on loopback: the Responses API, streamed as SSE."""

    def route_v1_responses(self, h: Any, q: dict[str, str], body: bytes) -> None:
        item = {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "content": [{"type": "output_text", "text": CODEX_REPLY}],
        }
        usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
        events = [
            {"type": "response.created", "response": {"id": "resp_1"}},
            {"type": "response.output_item.done", "item": item},
            {"type": "response.completed", "response": {"id": "resp_1", "usage": usage}},
        ]
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        for event in events:
            h.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            h.wfile.flush()
        h.close_connection = True


@requires_bwrap
@pytest.mark.skipif(not CODEX.exists(), reason="the pinned Codex CLI is installed by `make codex`")
def test_the_real_codex_cli_works_with_a_key_it_never_holds(
    isolated_home: Path,
    tmp_path: Path,
    workspace: Path,
    ca: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """`agentvisor run -- codex exec`: Codex CLI (npm @openai/codex, pinned) talks to an
    OpenAI-compatible TLS server on loopback through the proxy; the server receives the
    real key; a probe run right after Codex, in the same sandbox, finds the key in no
    environment, file, /proc/*/environ or Codex's state directory."""
    from agentvisor.frontends.cli import main

    monkeypatch.setenv("RUN_KEY", TOKEN)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    real = guard.system_resolver
    monkeypatch.setattr(
        guard,
        "system_resolver",
        lambda host, port: ["127.0.0.1"] if host == "api.test" else real(host, port),
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("api.test").configure_cert(context)
    api = ResponsesServer(tls=context)
    upstream_ca = tmp_path / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(upstream_ca))
    install = CODEX.parents[2]  # .cache/codex, visible read-only inside
    config = tmp_path / "agentvisor.yaml"
    config.write_text(
        f"rules:\n  - {{decision: allow, kind: fetch, pattern: 'api.test:{api.port}'}}\n"
        f"secrets:\n  - {{name: OPENAI_API_KEY, env: RUN_KEY, hosts: ['api.test:{api.port}']}}\n"
        f"network: {{ca_file: '{upstream_ca}'}}\n"
        f"sandbox: {{mounts: ['{install}:{install}:ro']}}\n"
    )
    provider = (
        f'model_providers.test={{name="test", base_url="https://api.test:{api.port}/v1", '
        'env_key="OPENAI_API_KEY", wire_api="responses"}'
    )
    (workspace / "probe.py").write_text(PROBE_FOR_KEY.replace("TOKEN", TOKEN))
    script = (
        f"{CODEX} exec --skip-git-repo-check -c '{provider}' -c model_provider=test "
        "-c model=test-model 'say hello' </dev/null; echo codex-exit $?; python3 probe.py"
    )
    try:
        code = main(
            [
                "run",
                "--config",
                str(config),
                "--profile",
                "codex",
                "--workspace",
                str(workspace),
                "--",
                "sh",
                "-c",
                script,
            ]
        )
    finally:
        api.close()
    out, err = capfd.readouterr()
    assert code == 0, out + err
    assert CODEX_REPLY in out and "codex-exit 0" in out, out + err
    assert "found []" in out, out
    request = next(r for r in api.requests if r["path"] == "/v1/responses")
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert headers["authorization"] == f"Bearer {TOKEN}"
    state = tmp_path / "data" / "agentvisor" / "harness" / "codex" / ".codex"
    assert any(state.iterdir())  # Codex kept its state in agentvisor's per-harness place


PROBE_FOR_KEY = """
import glob, os
found = [k for k, v in os.environ.items() if "TOKEN" in v]
paths = glob.glob("/proc/*/environ") + glob.glob("/run/agentvisor/*")
paths += glob.glob(os.path.expanduser("~/.codex/**"), recursive=True)
for path in paths:
    try:
        if b"TOKEN" in open(path, "rb").read():
            found.append(path)
    except OSError:
        pass
print("found", found)
"""
