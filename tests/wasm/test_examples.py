"""The example tools, built from source, installed and called through the Python API."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from agentvisor.actions import Context
from agentvisor.wasm import BadArguments, ToolFailed

from .helpers import config, install, load, network


@pytest.fixture
def examples(built, store):
    """Every example, installed as shipped."""
    for name in ("wordcount", "jsonlint", "notes"):
        install(store, built / name)
    return store


def test_wordcount_counts_a_workspace_file(examples, ws):
    (ws / "a.txt").write_text("one two  three\nfour\n")
    result = load(examples).call(
        "wordcount", "count", {"path": "a.txt"}, Context(workspace=str(ws))
    )
    assert result == {"path": "a.txt", "lines": 2, "words": 4, "bytes": 20}


def test_wordcount_cannot_leave_the_workspace(examples, ws, tmp_path):
    (tmp_path / "secret.txt").write_text("x")
    with pytest.raises(ToolFailed, match="cannot open"):
        load(examples).call(
            "wordcount", "count", {"path": "../secret.txt"}, Context(workspace=str(ws))
        )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": [1, 2.5e3, "\\u00e9\\ud83d\\ude00", null, true]}', {"valid": True}),
        (
            '{"a": [1, 2,]}',
            {"valid": False, "problem": "unexpected character", "line": 1, "column": 13},
        ),
        (
            '{\n  "a": 01\n}',
            {"valid": False, "problem": "expected ',' or '}'", "line": 2, "column": 9},
        ),
        (
            '"\\ud800"',
            {
                "valid": False,
                "problem": "unpaired surrogate in a \\u escape",
                "line": 1,
                "column": 2,
            },
        ),
        (
            "[" * 200 + "]" * 200,
            {"valid": False, "problem": "nested too deeply", "line": 1, "column": 129},
        ),
        ("", {"valid": False, "problem": "unexpected end of input", "line": 1, "column": 1}),
    ],
)
def test_jsonlint_checks_json_strictly(examples, text, expected):
    assert load(examples).call("jsonlint", "validate", {"text": text}) == expected


def test_jsonlint_agrees_with_python_on_well_formed_json(examples):
    tools = load(examples)
    for value in ({"k": [1, -2, 3.5, "x\ny", {"z": None}]}, [], "é", 0, -1.5e-7):
        assert tools.call("jsonlint", "validate", {"text": json.dumps(value)}) == {"valid": True}


def test_notes_appends_below_notes_only(examples, ws):
    tools = load(examples)
    ctx = Context(workspace=str(ws))
    assert tools.call("notes", "append", {"name": "todo", "text": "milk"}, ctx) == {
        "note": "notes/todo.md",
        "appended_bytes": 5,
    }
    tools.call("notes", "append", {"name": "todo", "text": "eggs\n"}, ctx)
    assert (ws / "notes" / "todo.md").read_text() == "milk\neggs\n"
    with pytest.raises(BadArguments, match="does not match"):
        tools.call("notes", "append", {"name": "../escape", "text": "x"}, ctx)
    assert sorted(p.name for p in ws.rglob("*")) == ["notes", "todo.md"]


def api_client(built, tmp_path, hosts):
    """The api-client example with its network grant pointed at ``hosts``."""
    folder = tmp_path / "api-client"
    shutil.copytree(built / "api-client", folder)
    data = yaml.safe_load((folder / "tool.yaml").read_text())
    data["capabilities"]["network"] = hosts
    (folder / "tool.yaml").write_text(yaml.safe_dump(data))
    return folder


def test_api_client_uses_its_secret_toward_its_host(built, tmp_path, store, server, monkeypatch):
    monkeypatch.setenv("API_BASE_URL", f"http://{server.hostport}")
    monkeypatch.setenv("TEST_GITHUB_TOKEN", "ghp_test_value_0123456789")
    install(store, api_client(built, tmp_path, [server.hostport]))
    cfg = config(
        secrets=[{"name": "GITHUB_TOKEN", "env": "TEST_GITHUB_TOKEN", "hosts": [server.hostport]}]
    )
    result = load(store, cfg, network(server.hostport)).call(
        "api-client", "get", {"path": "/repos/o/r/issues"}
    )
    sent = server.requests[0]
    assert sent["path"] == "/repos/o/r/issues"
    assert sent["headers"]["Authorization"] == "Bearer ghp_test_value_0123456789"
    assert result["status"] == 200 and "ghp_test_value" not in json.dumps(result)
    assert (
        json.loads(result["body"])["headers"]["Authorization"] == "Bearer {{secret:GITHUB_TOKEN}}"
    )


def test_api_client_as_shipped_reaches_only_api_github_com(built, store, server, monkeypatch):
    # API_BASE_URL is the tool's to read, but it cannot widen the network grant.
    monkeypatch.setenv("API_BASE_URL", f"http://{server.hostport}")
    install(store, built / "api-client")
    tools = load(store, config(), network(server.hostport))
    with pytest.raises(ToolFailed, match="not granted this host"):
        tools.call("api-client", "get", {"path": "/x"})
    assert server.requests == []
