"""Configuration: lookup order, secure defaults, and errors that name file and key."""

from __future__ import annotations

import subprocess
import sys
import typing
from pathlib import Path

import pytest

from agentvisor.config import Config, config_from_dict, field_types, load_config
from agentvisor.errors import ConfigError
from agentvisor.records import Declared
from tests.conftest import REPO


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_without_a_file(tmp_path, isolated_home, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config()
    assert config.source is None
    assert config.sandbox.network == "none"
    assert config.sandbox.memory_mb == 4096 and config.sandbox.pids == 256
    assert config.sandbox.tmp_size_mb == 512 and config.sandbox.timeout == 180
    assert config.sandbox.allow_unenforced_limits is False
    assert config.approvals.mode == "manual"


def test_lookup_order(tmp_path, isolated_home, monkeypatch):
    monkeypatch.chdir(tmp_path)
    user = write(isolated_home / ".config" / "agentvisor" / "config.yaml", "sandbox: {pids: 11}\n")
    assert load_config().sandbox.pids == 11 and load_config().source == str(user)
    write(tmp_path / "agentvisor.yaml", "sandbox: {pids: 22}\n")
    assert load_config().sandbox.pids == 22
    explicit = write(tmp_path / "other.yaml", "sandbox: {pids: 33}\n")
    assert load_config(explicit).sandbox.pids == 33


def test_a_sandboxs_empty_stand_in_does_not_hide_the_user_config(
    tmp_path, isolated_home, monkeypatch
):
    """While a sandbox runs in a workspace without agentvisor.yaml, a read-only stand-in
    sits there (a directory, not a file); the user's config must still apply beside it."""
    from tests.sandbox.helpers import sandbox

    monkeypatch.chdir(tmp_path)
    write(isolated_home / ".config" / "agentvisor" / "config.yaml", "sandbox: {pids: 11}\n")
    layout = sandbox(tmp_path).backend.layout
    layout.make_placeholders()
    try:
        assert (tmp_path / "agentvisor.yaml").exists()
        assert load_config().sandbox.pids == 11
    finally:
        layout.cleanup()


def test_missing_explicit_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")


def test_empty_file_means_defaults(tmp_path):
    assert load_config(write(tmp_path / "c.yaml", "")).sandbox.pids == 256


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "sandbox:\n  memroy_mb: 10\n",
            r"sandbox\.memroy_mb: unknown key \(accepted here: backend",
        ),
        ("sandboxx: {}\n", r"sandboxx: unknown key"),
        ("sandbox:\n  pids: many\n", r"sandbox\.pids: .*integer.*'many'"),
        ("sandbox:\n  pids: '12'\n", r"sandbox\.pids"),
        ("sandbox:\n  network: host\n", r"sandbox\.network: Input should be 'none' or 'proxy'"),
        ("sandbox:\n  pids: 0\n", r"sandbox\.pids: must be greater than 0"),
        ("sandbox:\n  mounts: ['/a:/b:rwx']\n", r"sandbox\.mounts\[0\]: .*mode must be"),
        ("sandbox:\n  mounts: ['relative:/b']\n", r"sandbox\.mounts\[0\]: .*absolute"),
        ("approvals:\n  mode: yolo\n", r"approvals\.mode"),
        ("- a\n- b\n", r"top level must be a mapping"),
        ("sandbox: [\n", r"not valid YAML"),
        ("source: x\n", r"unknown key 'source'"),
    ],
)
def test_errors_name_file_and_key(tmp_path, text, expected):
    path = write(tmp_path / "c.yaml", text)
    with pytest.raises(ConfigError, match=expected) as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_mount_spec_defaults_to_read_only():
    from agentvisor.config import parse_mount

    assert parse_mount("/a:/b").writable is False
    assert parse_mount("/a:/b:rw").writable is True


def _keys(cls: type[Declared], prefix: str) -> list[str]:
    out = []
    for name, hint in field_types(cls).items():
        if name == "source":
            continue
        inner = typing.get_args(hint)[0] if typing.get_origin(hint) is list else hint
        if isinstance(inner, type) and issubclass(inner, Declared):
            out += _keys(inner, f"{prefix}{name}.")
        else:
            out.append(prefix + name)
    return out


def test_every_key_is_documented():
    doc = (REPO / "docs" / "configuration.md").read_text()
    missing = [k for k in _keys(Config, "") if f"`{k}`" not in doc]
    assert missing == [], f"document these keys in docs/configuration.md: {missing}"


def test_config_from_dict_roundtrip():
    config = config_from_dict({"sandbox": {"mounts": ["/usr/share:/share"]}})
    assert config.sandbox.mounts == ["/usr/share:/share"]


def test_importing_config_stays_cheap():
    """Every `agentvisor exec` imports the config module and builds the defaults."""
    code = (
        "import sys; from agentvisor.config import Config; Config(); "
        "print(sorted(m for m in ('dataclasses', 'typing', 'datetime', 'pydantic', 'yaml') "
        "if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr


def test_a_validated_config_is_made_of_records():
    config = config_from_dict(
        {
            "secrets": [{"name": "a", "hosts": ["h"], "env": "E"}],
            "approvals": {"llm": {"url": "u", "model": "m"}},
        },
        source="S",
    )
    for value in (config, config.sandbox.docker, config.secrets[0], config.approvals.llm):
        assert isinstance(value, Declared), value
    assert config == Config(secrets=config.secrets, approvals=config.approvals)
    assert config.source == "S"
