"""Configuration: lookup order, secure defaults, and errors that name file and key."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from agentvisor.config import config_from_dict, defaults, load_config
from agentvisor.config.schema import Config
from agentvisor.errors import ConfigError
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
    write(tmp_path / "agentvisor.yaml", "sandbox: {pids: 5}\n")  # laid over it (narrower)
    assert load_config().sandbox.pids == 5
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
        ("sandbox:\n  pids: 0\n", r"sandbox\.pids: .*greater than 0"),
        ("gateway:\n  port: 65536\n", r"gateway\.port: .*less than or equal to 65535"),
        (
            "rules:\n  - {decision: deny, kind: exec, pattern: x, kindd: y}\n",
            r"rules\[0\]\.kindd: unknown key \(accepted here: decision",
        ),
        ("sandbox:\n  mounts: ['/a:/b:rwx']\n", r"sandbox\.mounts\[0\]: .*mode must be"),
        ("sandbox:\n  mounts: ['relative:/b']\n", r"sandbox\.mounts\[0\]: .*absolute"),
        ("approvals:\n  mode: yolo\n", r"approvals\.mode"),
        (
            "approvals:\n  max_pending_per_session: 0\n",
            r"approvals\.max_pending_per_session: .*greater than 0",
        ),
        ("gateway:\n  max_calls_per_client: -1\n", r"gateway\.max_calls_per_client: .*greater"),
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
    from agentvisor.protected import parse_mount

    assert parse_mount("/a:/b").writable is False
    assert parse_mount("/a:/b:rw").writable is True


DOC_ROW = re.compile(r"^\| `([a-z_.]+)` \| (.*?) \| (.*?) \| (.*) \|$")


def _doc_rows() -> dict[str, tuple[str, str, str]]:
    """docs/configuration.md's tables: key -> (default, accepted, what it does)."""
    text = (REPO / "docs" / "configuration.md").read_text()
    rows = {}
    for line in text.splitlines():
        m = DOC_ROW.match(line)
        if m:
            key, default, accepted, what = m.groups()
            rows[key] = (default, accepted, what.replace("\\|", "|"))
    return rows


def _section(annotation: object) -> type[BaseModel] | None:
    from agentvisor.config import _section_type

    return _section_type(annotation)


def _schema_keys(cls: type[BaseModel], prefix: str, rows: dict) -> list[tuple[str, object]]:
    """Each key of the schema: a documented key as a whole, else its section's keys."""
    out = []
    for name, field in cls.model_fields.items():
        if name == "source":
            continue
        key = prefix + name
        section = _section(field.annotation)
        if key not in rows and section is not None:
            out += _schema_keys(section, f"{key}.", rows)
        else:
            out.append((key, field))
    return out


def test_every_key_is_documented():
    rows = _doc_rows()
    missing = [key for key, _ in _schema_keys(Config, "", rows) if key not in rows]
    assert missing == [], f"document these keys in docs/configuration.md: {missing}"


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_documented_defaults_ranges_and_descriptions_are_the_schemas():
    """The docs and the schema are one thing: each row's default, range and text."""
    rows = _doc_rows()
    wrong = []
    for key, field in _schema_keys(Config, "", rows):
        doc_default, accepted, what = rows[key]
        if field.is_required():
            expected = "required"
        else:
            value = field.get_default(call_default_factory=True)
            # None: the docs say in words what applies instead (e.g. the current directory).
            expected = None if value is None else f"`{_shown(value)}`".replace("'", "")
        if expected is not None and not doc_default.replace("'", "").startswith(expected):
            wrong.append(f"{key}: documented default {doc_default!r}, schema {expected!r}")
        for constraint in field.metadata:
            for attr, shown in (("gt", "> {}"), ("ge", "≥ {}")):
                bound = getattr(constraint, attr, None)
                if bound is not None and shown.format(bound) not in accepted:
                    le = next((c.le for c in field.metadata if getattr(c, "le", None)), None)
                    if le is None or not re.search(rf"{bound} *(to|–) *{le}", accepted):
                        wrong.append(f"{key}: accepted {accepted!r} omits {shown.format(bound)}")
        if field.description is not None and field.description != what:
            wrong.append(f"{key}: documented as {what!r}, schema says {field.description!r}")
    assert wrong == []


def test_defaults_without_pydantic_are_the_schemas(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first, cached = defaults(), defaults()  # computed, then read from the cache
    expected = Config().model_dump(mode="json")
    assert first._data == cached._data == {**expected, "source": None}
    assert cached.sandbox.docker.image == Config().sandbox.docker.image
    assert cached.model_copy(update={"source": "x"}).source == "x"
    with pytest.raises(AttributeError):
        cached.sandbox.pids = 1


def test_a_loaded_config_cannot_be_changed():
    config = config_from_dict({"sandbox": {"pids": 9}})
    with pytest.raises(ValidationError, match="frozen"):
        config.sandbox.pids = 1


def test_config_from_dict_roundtrip():
    config = config_from_dict({"sandbox": {"mounts": ["/usr/share:/share"]}})
    assert config.sandbox.mounts == ["/usr/share:/share"]


def test_defaults_stay_cheap(tmp_path):
    """Every `agentvisor exec` without a config file builds the defaults: once the schema
    has cached them, neither pydantic nor YAML (nor typing) is imported for that."""
    code = (
        "import sys; from agentvisor.config import defaults; defaults().sandbox.pids; "
        "print(sorted(m for m in ('dataclasses', 'typing', 'datetime', 'pydantic', 'yaml') "
        "if m in sys.modules))"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr


def test_a_validated_config_is_made_of_schema_models():
    config = config_from_dict(
        {
            "secrets": [{"name": "a", "hosts": ["h"], "env": "E"}],
            "approvals": {"llm": {"url": "u", "model": "m"}},
        },
        source="S",
    )
    for value in (config, config.sandbox.docker, config.secrets[0], config.approvals.llm):
        assert isinstance(value, BaseModel), value
    assert config.source == "S"
    assert config.model_copy(update={"source": None}) == Config(
        secrets=config.secrets, approvals=config.approvals
    )
