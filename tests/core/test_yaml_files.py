"""Every YAML file agentvisor reads goes through one reader: a key written twice is an
error naming both lines, schema errors name the line, and text that is not UTF-8 is a
clear error (never a traceback)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from agentvisor.approvals.rulefile import append_rules
from agentvisor.config import load_config, load_config_file
from agentvisor.config.yamlfile import load_yaml
from agentvisor.errors import ConfigError
from agentvisor.wasm import ManifestError, ToolChanged, parse_manifest
from tests.conftest import REPO, run_cli

MANIFEST = (REPO / "examples" / "wasm" / "wordcount" / "tool.yaml").read_text()


def config_error(tmp_path: Path, text: str | bytes) -> str:
    path = tmp_path / "c.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(path) in str(info.value)
    return str(info.value)


def test_a_second_rules_list_in_a_config_is_an_error(tmp_path):
    text = (
        "rules:\n"
        "  - {decision: deny, kind: exec, pattern: 'rm *'}\n"
        "sandbox: {pids: 10}\n"
        "rules:\n"
        "  - {decision: allow, kind: exec, pattern: 'ls'}\n"
    )
    assert "'rules' is written twice, on line 1 and on line 4" in config_error(tmp_path, text)
    control = tmp_path / "ok.yaml"
    control.write_text(text.split("rules:\n  - {decision: allow")[0])
    assert [r.pattern for r in load_config_file(control).rules] == ["rm *"]


def test_a_key_written_twice_in_a_nested_mapping_is_an_error(tmp_path):
    message = config_error(tmp_path, "sandbox:\n  pids: 10\n  memory_mb: 5\n  pids: 900\n")
    assert "'pids' is written twice, on line 2 and on line 4" in message


def test_yaml_merge_keys_may_still_be_overridden(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("sandbox:\n  <<: {pids: 10}\n  pids: 5\n")
    assert load_config_file(path).sandbox.pids == 5


@pytest.mark.parametrize(
    "text, expected",
    [
        ("sandbox:\n  network: none\n  pids: many\n", r"line 3: sandbox\.pids: .*integer"),
        ("approvals: {}\nsandbox:\n  memroy_mb: 1\n", r"line 3: sandbox\.memroy_mb: unknown key"),
        (
            "rules:\n  - {decision: deny, kind: exec, pattern: x}\n  - {decision: maybe, "
            "kind: exec, pattern: y}\n",
            r"line 3: rules\[1\]\.decision",
        ),
        ("rules:\n  - {kind: exec, pattern: x}\n", r"line 2: rules\[0\]\.decision: Field required"),
        (
            "sandbox:\n  pids: 5\n  mounts: [/a:/b, 'relative:/c']\n",
            r"line 3: sandbox\.mounts\[1\]",
        ),
        (
            "rules:\n  - {decision: deny, kind: exec, pattern: ok}\n"
            "  - {decision: deny, kind: exec, pattern: 'x', when: {time: '25:99-1'}}\n",
            r"line 3: rules\[1\]",
        ),
    ],
)
def test_schema_errors_name_the_line(tmp_path, text, expected):
    assert re.search(expected, config_error(tmp_path, text))


def test_a_config_that_is_not_utf8_is_a_clear_error(tmp_path):
    message = config_error(tmp_path, "sandbox:\n  workspace: /caf\xe9\n".encode("latin-1"))
    assert "not UTF-8 text (line 2" in message
    path = tmp_path / "agentvisor.yaml"
    path.write_bytes("sandbox: {pids: 5}\n# \xe9\n".encode("latin-1"))
    r = run_cli("check", "--config", str(path), "exec", "ls", cwd=tmp_path)
    assert r.returncode == 2 and "not UTF-8" in r.stderr and "Traceback" not in r.stderr


def test_a_manifest_with_a_second_name_is_refused():
    first = MANIFEST.splitlines().index("name: wordcount") + 1
    text = MANIFEST + "name: other-tool\n"
    twice = rf"'name' is written twice, on line {first} and on line {text.count(chr(10))}"
    with pytest.raises(ManifestError, match=twice):
        parse_manifest(text.encode(), "tool.yaml")
    assert parse_manifest(MANIFEST.encode(), "tool.yaml").name == "wordcount"  # control


def test_manifest_schema_errors_name_the_line():
    data = yaml.safe_load(MANIFEST)
    data["limits"] = {"memory_mb": "lots"}
    with pytest.raises(ManifestError, match=r"line \d+: limits\.memory_mb: Input should be"):
        parse_manifest(yaml.safe_dump(data, sort_keys=False).encode(), "tool.yaml")


def test_a_lock_file_with_a_tool_written_twice_is_refused(tmp_path, monkeypatch):
    from agentvisor.wasm.store import LOCK_FORMAT, ToolStore

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    store = ToolStore()
    store.lock_path.parent.mkdir(parents=True, exist_ok=True)
    entry = {
        "version": "1",
        "module_sha256": "0" * 64,
        "manifest_sha256": "0" * 64,
        "installed_at": "now",
        "source": "/x",
    }
    one = json.dumps({"name": "a", **entry})
    lock = f'{{"format": {LOCK_FORMAT}, "tools": {{\n"a": {one},\n"a": {one}\n}}}}\n'
    store.lock_path.write_text(lock)
    with pytest.raises(ToolChanged, match="'a' is written twice, on line 2 and on line 3"):
        store.entries()
    store.lock_path.write_text(lock.replace(f',\n"a": {one}', ""))
    assert list(store.entries()) == ["a"]  # control


def test_a_rule_file_with_a_key_written_twice_is_not_extended(tmp_path):
    """An "always" answer appends to a config's rules; a file that does not load as it
    is stays untouched."""
    path = tmp_path / "agentvisor.yaml"
    text = "approvals: {mode: manual}\napprovals: {mode: off}\n"
    path.write_text(text)
    entry = '- decision: allow\n  kind: exec\n  pattern: "ls"'
    with pytest.raises(ConfigError, match="'approvals' is written twice, on line 1 and on line 2"):
        append_rules(path, [entry])
    assert path.read_text() == text


def test_a_hermes_config_with_a_key_written_twice_is_refused(tmp_path):
    hermes = tmp_path / "config.yaml"
    hermes.write_text("terminal:\n  backend: docker\nterminal:\n  backend: local\n")
    r = run_cli(
        "import-hermes", str(hermes), cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)}
    )
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "'terminal' is written twice, on line 1 and on line 3" in r.stderr


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize("text", [LAUGHS, "a: &a [*a]\n", "a: &a {b: *a}\n"])
def test_a_planted_alias_bomb_is_refused_at_once(tmp_path, text):
    """Nine lines of aliases of aliases stand for 9**9 values: a project file like that in a
    subfolder hung every later run there (the config reader walks the expanded tree)."""
    planted = tmp_path / "agentvisor.yaml"
    planted.write_text(text)
    with pytest.raises(ConfigError, match="aliases expand to more than"):
        load_config(cwd=str(tmp_path), environ={"HOME": str(tmp_path)})


def test_aliases_of_ordinary_size_still_load():
    data = load_yaml(b"x: &x {pids: 1}\nsandbox:\n  <<: *x\nlist: [*x, *x]\n", "f").data
    assert data["sandbox"] == {"pids": 1} and len(data["list"]) == 2


def deny_rules(count: int) -> str:
    return "rules:\n" + "".join(
        f'  - {{decision: deny, kind: exec, pattern: "x{i}"}}\n' for i in range(count)
    )


def test_a_planted_large_project_file_is_refused_unread(tmp_path):
    """A sandboxed command can write app/agentvisor.yaml: 8 MB of deny rules took a minute
    and 800 MB of the host to refuse, at every later run in app/."""
    app = tmp_path / "ws" / "app"
    app.mkdir(parents=True)
    planted = app / "agentvisor.yaml"
    planted.write_text(deny_rules(30_000))  # 1.6 MB
    assert planted.stat().st_size > 1 << 20
    with pytest.raises(ConfigError, match=r"agentvisor.yaml: larger than 1024 KiB"):
        load_config(cwd=str(app))
    with open(planted, "r+b") as f:  # sparse: never read whole
        f.truncate(1 << 40)
    with pytest.raises(ConfigError, match="larger than 1024 KiB"):
        load_config(cwd=str(app))
    # Control: the same kind of file under the limit is read.
    planted.write_text(deny_rules(1_000))
    assert len(load_config(cwd=str(app)).rules) == 1_000
