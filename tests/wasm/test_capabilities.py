"""Deny by default: a tool gets the files, variables, hosts and secrets it was granted,
and nothing else. Each refusal has a control that shows the probe would have seen it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentvisor.actions import Context
from agentvisor.errors import PolicyDenied
from agentvisor.wasm import ToolFailed

from .helpers import config, install, load, network, probe_manifest, tool_dir

# -- files ------------------------------------------------------------------------------


@pytest.fixture
def files_probe(tmp_path, probe, store, ws):
    """A probe granted read on docs/ and write on out/, in a workspace that also has a
    private file, with a secret file outside the workspace."""
    (ws / "docs").mkdir()
    (ws / "docs" / "readme.txt").write_text("granted text")
    (ws / "private.txt").write_text("not granted")
    (tmp_path / "outside.txt").write_text("outside the workspace")
    caps = {"files": [{"path": "docs", "access": "read"}, {"path": "out", "access": "write"}]}
    install(store, tool_dir(tmp_path, probe, probe_manifest(capabilities=caps)))
    return load(store), Context(workspace=str(ws))


def test_a_granted_directory_is_readable(files_probe):
    tools, ctx = files_probe
    result = tools.call("probe", "read", {"path": "/workspace/docs/readme.txt"}, ctx)
    assert result == {"ok": True, "text": "granted text"}


def test_the_rest_of_the_workspace_is_not_there(files_probe):
    tools, ctx = files_probe
    result = tools.call("probe", "read", {"path": "/workspace/private.txt"}, ctx)
    assert result["ok"] is False


@pytest.mark.parametrize(
    "path", ["/workspace/docs/../../outside.txt", "/etc/hostname", "/workspace/docs/../private.txt"]
)
def test_paths_outside_the_preopens_are_refused(files_probe, tmp_path, path):
    tools, ctx = files_probe
    assert Path("/etc/hostname").exists() or path != "/etc/hostname"
    result = tools.call("probe", "read", {"path": path}, ctx)
    assert result["ok"] is False, result


def test_a_link_inside_a_granted_directory_does_not_lead_out(files_probe, ws, tmp_path):
    tools, ctx = files_probe
    (ws / "docs" / "link.txt").symlink_to(tmp_path / "outside.txt")
    (ws / "docs" / "inner.txt").symlink_to("readme.txt")
    assert tools.call("probe", "read", {"path": "/workspace/docs/link.txt"}, ctx)["ok"] is False
    # control: a link that stays inside is followed
    inner = tools.call("probe", "read", {"path": "/workspace/docs/inner.txt"}, ctx)
    assert inner == {"ok": True, "text": "granted text"}


def test_read_access_is_read_only_and_write_access_writes(files_probe, ws):
    tools, ctx = files_probe
    refused = tools.call("probe", "write", {"path": "/workspace/docs/new.txt", "text": "x"}, ctx)
    assert refused["ok"] is False and not (ws / "docs" / "new.txt").exists()
    written = tools.call("probe", "write", {"path": "/workspace/out/new.txt", "text": "x"}, ctx)
    assert written == {"ok": True} and (ws / "out" / "new.txt").read_text() == "x"


def test_a_granted_path_that_is_a_link_out_is_refused(tmp_path, probe, store, ws):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "f.txt").write_text("outside")
    (ws / "docs").symlink_to(tmp_path / "elsewhere")
    caps = {"files": [{"path": "docs", "access": "read"}]}
    install(store, tool_dir(tmp_path, probe, probe_manifest(capabilities=caps)))
    with pytest.raises(PolicyDenied, match="symbolic link"):
        load(store).call(
            "probe", "read", {"path": "/workspace/docs/f.txt"}, Context(workspace=str(ws))
        )


def test_a_workspace_holding_a_protected_path_is_not_opened(tmp_path, probe, store, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("KEY")
    monkeypatch.setenv("HOME", str(home))
    caps = {"files": [{"path": ".", "access": "read"}]}
    install(store, tool_dir(tmp_path, probe, probe_manifest(capabilities=caps)))
    tools = load(store)
    with pytest.raises(PolicyDenied, match=r"protected path .*\.ssh"):
        tools.call(
            "probe", "read", {"path": "/workspace/.ssh/id_ed25519"}, Context(workspace=str(home))
        )
    # control: the same grant over a workspace without protected paths works
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "a.txt").write_text("a")
    assert (
        tools.call(
            "probe",
            "read",
            {"path": "/workspace/a.txt"},
            Context(workspace=str(tmp_path / "plain")),
        )["ok"]
        is True
    )


def test_write_access_to_a_directory_with_git_hooks_is_refused(tmp_path, probe, store, ws):
    (ws / "out" / ".git" / "hooks").mkdir(parents=True)
    caps = {"files": [{"path": "out", "access": "write"}]}
    install(store, tool_dir(tmp_path, probe, probe_manifest(capabilities=caps)))
    tools = load(store)
    with pytest.raises(PolicyDenied, match=r"\.git"):
        tools.call(
            "probe",
            "write",
            {"path": "/workspace/out/.git/hooks/pre-commit", "text": "evil"},
            Context(workspace=str(ws)),
        )
    assert not (ws / "out" / ".git" / "hooks" / "pre-commit").exists()
    (ws / "out" / ".git" / "hooks").rmdir()
    (ws / "out" / ".git").rmdir()
    assert tools.call(
        "probe", "write", {"path": "/workspace/out/a", "text": "ok"}, Context(workspace=str(ws))
    ) == {"ok": True}


def test_no_file_grant_means_no_files(tmp_path, probe, store, ws):
    (ws / "a.txt").write_text("a")
    install(store, tool_dir(tmp_path, probe, probe_manifest()))
    result = load(store).call(
        "probe", "read", {"path": "/workspace/a.txt"}, Context(workspace=str(ws))
    )
    assert result["ok"] is False


# -- environment ------------------------------------------------------------------------


def test_only_granted_variables_are_visible(tmp_path, probe, store, monkeypatch):
    monkeypatch.setenv("PROBE_GRANTED", "yes")
    monkeypatch.setenv("PROBE_OTHER", "no")
    install(
        store, tool_dir(tmp_path, probe, probe_manifest(capabilities={"env": ["PROBE_GRANTED"]}))
    )
    tools = load(store)
    assert tools.call("probe", "env", {"name": "PROBE_GRANTED"}) == {"value": "yes"}
    assert tools.call("probe", "env", {"name": "PROBE_OTHER"}) == {"value": None}
    assert os.environ.get("HOME") and tools.call("probe", "env", {"name": "HOME"}) == {
        "value": None
    }


# -- network ----------------------------------------------------------------------------


def http_probe(tmp_path, probe, store, hosts, secrets=(), cfg=None, net=None):
    caps = {"network": list(hosts), "secrets": list(secrets)}
    install(store, tool_dir(tmp_path, probe, probe_manifest(capabilities=caps)))
    return load(store, cfg, net)


def test_a_granted_host_is_reached_through_the_network_layer(tmp_path, probe, store, server):
    tools = http_probe(tmp_path, probe, store, [server.hostport], net=network(server.hostport))
    result = tools.call(
        "probe", "http", {"method": "POST", "url": server.url("/echo?x=1"), "body": "hi"}
    )
    assert result["status"] == 200 and json.loads(result["body"])["body"] == "hi"
    assert server.requests[0]["path"] == "/echo?x=1"


def test_a_host_not_in_the_manifest_is_refused(tmp_path, probe, store, server, other_server):
    # The policy allows both servers: the refusal comes from the tool's own grants.
    tools = http_probe(
        tmp_path,
        probe,
        store,
        [server.hostport],
        net=network(server.hostport, other_server.hostport),
    )
    assert "not granted this host" in refusal(tools, {"url": other_server.url()})
    assert other_server.requests == []
    assert tools.call("probe", "http", {"url": server.url()})["status"] == 200  # control


def test_a_redirect_to_a_host_not_in_the_manifest_is_refused(
    tmp_path, probe, store, server, other_server
):
    tools = http_probe(
        tmp_path,
        probe,
        store,
        [server.hostport],
        net=network(server.hostport, other_server.hostport),
    )
    redirect = server.url(f"/redirect?to={other_server.url()}")
    assert "not granted this host" in refusal(tools, {"url": redirect})
    assert other_server.requests == []


def test_the_policy_still_judges_a_granted_host(tmp_path, probe, store, server):
    tools = http_probe(tmp_path, probe, store, [server.hostport], net=network())
    assert "only a rule that allows this exact host" in refusal(tools, {"url": server.url()})
    assert server.requests == []


def test_no_network_grant_means_no_network(tmp_path, probe, store, server):
    tools = http_probe(tmp_path, probe, store, [], net=network(server.hostport))
    assert "granted no network access" in refusal(tools, {"url": server.url()})
    assert server.requests == []


def refusal(tools, request) -> str:
    """What the agent is told when the tool passes on the host's refusal."""
    with pytest.raises(ToolFailed) as info:
        tools.call("probe", "http", request)
    return str(info.value)


def secrets_config(server):
    return config(
        secrets=[
            {"name": "GRANTED_TOKEN", "env": "PROBE_GRANTED_TOKEN", "hosts": [server.hostport]},
            {"name": "OTHER_TOKEN", "env": "PROBE_OTHER_TOKEN", "hosts": [server.hostport]},
        ]
    )


def test_a_granted_secret_is_sent_and_redacted_back(tmp_path, probe, store, server, monkeypatch):
    monkeypatch.setenv("PROBE_GRANTED_TOKEN", "granted-value-123456")
    monkeypatch.setenv("PROBE_OTHER_TOKEN", "other-value-654321")
    tools = http_probe(
        tmp_path,
        probe,
        store,
        [server.hostport],
        ["GRANTED_TOKEN"],
        cfg=secrets_config(server),
        net=network(server.hostport),
    )
    result = tools.call(
        "probe",
        "http",
        {"url": server.url(), "headers": {"Authorization": "Bearer {{secret:GRANTED_TOKEN}}"}},
    )
    assert server.requests[0]["headers"]["Authorization"] == "Bearer granted-value-123456"
    assert "granted-value-123456" not in json.dumps(result)
    assert "{{secret:GRANTED_TOKEN}}" in result["body"]


def test_a_secret_not_granted_is_refused_before_sending(
    tmp_path, probe, store, server, monkeypatch
):
    monkeypatch.setenv("PROBE_GRANTED_TOKEN", "granted-value-123456")
    monkeypatch.setenv("PROBE_OTHER_TOKEN", "other-value-654321")
    tools = http_probe(
        tmp_path,
        probe,
        store,
        [server.hostport],
        ["GRANTED_TOKEN"],
        cfg=secrets_config(server),
        net=network(server.hostport),
    )
    message = refusal(
        tools, {"url": server.url(), "headers": {"Authorization": "Bearer {{secret:OTHER_TOKEN}}"}}
    )
    assert "not granted the secret {{secret:OTHER_TOKEN}}" in message
    assert server.requests == [] and "other-value" not in message


def test_a_malformed_request_is_answered_not_crashed(tmp_path, probe, store, server):
    tools = http_probe(tmp_path, probe, store, [server.hostport], net=network(server.hostport))
    assert refusal(tools, {"url": 5}) == "probe: bad request: url must be a string"
    assert tools.call("probe", "http", {"url": server.url()})["status"] == 200


def test_tool_errors_are_raised_with_the_tools_message(tmp_path, probe, store):
    install(store, tool_dir(tmp_path, probe, probe_manifest()))
    with pytest.raises(ToolFailed, match="probe: no path"):
        load(store).call("probe", "read", {})
