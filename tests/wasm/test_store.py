"""Manifests, the lock file, and the module checks made before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agentvisor.wasm import (
    ManifestError,
    ToolChanged,
    ToolNotInstalled,
    parse_manifest,
    read_package,
)

from .conftest import EXAMPLES, REPO
from .helpers import install, load, probe_manifest, tool_dir


def manifest_error(data: dict) -> str:
    with pytest.raises(ManifestError) as info:
        parse_manifest(yaml.safe_dump(data).encode(), "tool.yaml")
    return str(info.value)


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_example_manifests_are_valid(name):
    path = REPO / "examples" / "wasm" / name / "tool.yaml"
    assert parse_manifest(path.read_bytes(), str(path)).name == name


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"colour": "red"}, "colour: unknown key"),
        ({"name": "Bad_Name"}, "name: 'Bad_Name'"),
        ({"capabilities": {"files": [{"path": "../up"}]}}, "without '..'"),
        ({"capabilities": {"files": [{"path": "/etc"}]}}, "a relative path inside the workspace"),
        ({"capabilities": {"files": [{"path": "~/.ssh"}]}}, "a relative path inside the workspace"),
        ({"capabilities": {"files": [{"path": "./docs/"}]}}, "write it as 'docs'"),
        ({"capabilities": {"files": [{"path": ".", "access": "write"}]}}, "would include .git"),
        (
            {"capabilities": {"files": [{"path": ".git/hooks", "access": "write"}]}},
            "would include .git/hooks",
        ),
        ({"capabilities": {"files": [{"path": "docs", "access": "admin"}]}}, "access"),
        ({"capabilities": {"network": ["*"]}}, "no bare wildcard"),
        ({"capabilities": {"network": ["*.com"]}}, "no bare wildcard"),
        ({"capabilities": {"network": ["https://api.github.com"]}}, "no scheme"),
        ({"capabilities": {"network": ["api.example.com:99999"]}}, "port 99999 is not 1 to"),
        ({"capabilities": {"network": ["[::1]:0"]}}, "port 0 is not 1 to 65535"),
        ({"capabilities": {"env": ["BAD-NAME"]}}, "not a valid name"),
        ({"capabilities": {"secrets": ["A", "A"]}}, "listed twice"),
        ({"capabilities": {"sockets": True}}, "capabilities.sockets: unknown key"),
        ({"limits": {"memory_mb": 0}}, "limits.memory_mb: must be 1 to 4096"),
        ({"limits": {"timeout": 7200}}, "limits.timeout"),
        ({"module": "../other.wasm"}, "a .wasm file name in the tool's directory"),
    ],
)
def test_bad_manifests_are_refused_with_the_key(change, expected):
    data = probe_manifest()
    data.update(change)
    assert expected in manifest_error(data)


def test_bad_functions_are_refused():
    data = probe_manifest()
    data["functions"] = [
        {"name": "av_alloc", "description": "x", "input_schema": {"type": "object"}}
    ]
    assert "not memory, av_alloc" in manifest_error(data)
    data["functions"] = [{"name": "f", "description": "x", "input_schema": {"type": "string"}}]
    assert "type: object" in manifest_error(data)
    data["functions"] = [
        {"name": "f", "description": "x", "input_schema": {"type": "object", "required": "path"}}
    ]
    assert "input_schema: required: 'path' is not of type 'array'" in manifest_error(data)


def test_ports_in_range_are_accepted():
    data = probe_manifest(capabilities={"network": ["api.example.com:65535", "[::1]:1"]})
    parse_manifest(yaml.safe_dump(data).encode(), "tool.yaml")


def test_a_module_that_is_a_symlink_is_refused(tmp_path, probe):
    """A link to a module outside the tool's directory is never followed."""
    folder = tool_dir(tmp_path, probe, probe_manifest())
    assert read_package(folder).module_bytes == probe.read_bytes()  # control: a real file
    outside = tmp_path / "elsewhere.wasm"
    outside.write_bytes(probe.read_bytes())
    (folder / "tool.wasm").unlink()
    (folder / "tool.wasm").symlink_to(outside)
    with pytest.raises(ManifestError, match=r"symbolic link.*never followed"):
        read_package(folder)


def test_a_good_write_grant_is_accepted():
    data = probe_manifest(
        capabilities={
            "files": [{"path": "notes", "access": "write"}],
            "network": ["api.example.com", "*.example.org", "127.0.0.1:8080"],
        }
    )
    manifest = parse_manifest(yaml.safe_dump(data).encode(), "tool.yaml")
    assert manifest.capabilities.files[0].guest_path == "/workspace/notes"


# -- the lock ---------------------------------------------------------------------------


def installed_probe(tmp_path, probe, store, **caps):
    install(store, tool_dir(tmp_path, probe, probe_manifest(capabilities=caps)))
    return store.tool_dir("probe")


def test_the_lock_records_the_modules_sha256(tmp_path, probe, store):
    import hashlib

    installed_probe(tmp_path, probe, store)
    lock = json.loads(store.lock_path.read_text())
    assert lock["tools"]["probe"]["module_sha256"] == hashlib.sha256(probe.read_bytes()).hexdigest()
    assert store.open("probe").manifest.name == "probe"  # control: unchanged files load


def test_a_changed_module_is_refused_until_reinstalled(tmp_path, probe, store):
    folder = installed_probe(tmp_path, probe, store)
    module = folder / "tool.wasm"
    module.write_bytes(module.read_bytes() + b"\0")
    with pytest.raises(ToolChanged, match=r"tool\.wasm changed since the operator accepted it"):
        store.open("probe")
    tools = load(store)
    assert "probe" in tools.refused and tools.list() == []
    with pytest.raises(ToolChanged, match="agentvisor tool install"):
        tools.call("probe", "echo", {})
    install(store, tmp_path / "src-probe")  # the operator installs it again
    assert load(store).call("probe", "echo", {"ok": 1}) == {"ok": 1}


def test_a_manifest_widened_after_install_is_refused(tmp_path, probe, store):
    folder = installed_probe(tmp_path, probe, store)
    data = yaml.safe_load((folder / "tool.yaml").read_text())
    data["capabilities"] = {"files": [{"path": ".", "access": "read"}], "network": ["evil.test"]}
    (folder / "tool.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ToolChanged, match=r"tool\.yaml changed"):
        store.open("probe")
    assert "probe" in load(store).refused


def test_a_missing_module_is_refused(tmp_path, probe, store):
    folder = installed_probe(tmp_path, probe, store)
    (folder / "tool.wasm").unlink()
    with pytest.raises(ToolChanged, match="cannot be read"):
        store.open("probe")


def test_remove(tmp_path, probe, store):
    folder = installed_probe(tmp_path, probe, store)
    assert store.remove("probe").name == "probe"
    assert not folder.exists() and store.entries() == {}
    with pytest.raises(ToolNotInstalled):
        store.remove("probe")


def test_reinstalling_replaces_the_old_version(tmp_path, probe, store):
    installed_probe(tmp_path, probe, store)
    data = probe_manifest()
    data["version"] = "2.0.0"
    install(store, tool_dir(tmp_path / "v2", probe, data))
    assert store.entries()["probe"].version == "2.0.0"
    assert store.open("probe").manifest.version == "2.0.0"


# -- the module is checked against the ABI before it is installed ------------------------


def wat_tool(tmp_path: Path, wat: str, name: str = "watty") -> Path:
    import wasmtime

    module = tmp_path / f"{name}.wasm"
    module.write_bytes(wasmtime.wat2wasm(wat))
    manifest = probe_manifest(name)
    manifest["functions"] = [f for f in manifest["functions"] if f["name"] == "echo"]
    return tool_dir(tmp_path, module, manifest)


ALLOC = '(func (export "av_alloc") (param i32) (result i32) i32.const 16)'
ECHO = '(func (export "echo") (param i32 i32) (result i64) i64.const 0)'
MEMORY = '(memory (export "memory") 1)'


@pytest.mark.parametrize(
    ("wat", "expected"),
    [
        (f"(module {ALLOC} {ECHO})", "must export its memory"),
        (f"(module {MEMORY} {ECHO})", "must export av_alloc"),
        (f"(module {MEMORY} {ALLOC})", "must export echo"),
        (
            f"(module {MEMORY} {ALLOC} "
            '(func (export "echo") (param i32) (result i32) i32.const 0))',
            "must export echo with parameters ('i32', 'i32')",
        ),
        (
            f'(module (import "env" "system" (func (param i32))) {MEMORY} {ALLOC} {ECHO})',
            "imports env.system, which the host does not provide",
        ),
        (
            f'(module (import "agentvisor" "http_request" (func (param i32))) {MEMORY} {ALLOC} '
            f"{ECHO})",
            "imports agentvisor.http_request",
        ),
        (
            f'(module (import "wasi_snapshot_preview1" "sock_open" (func (param i32) (result i32)))'
            f" {MEMORY} {ALLOC} {ECHO})",
            "imports something the host does not provide",
        ),
    ],
)
def test_modules_that_break_the_abi_are_not_installed(tmp_path, store, wat, expected):
    with pytest.raises(ManifestError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        install(store, wat_tool(tmp_path, wat))
    assert store.entries() == {}


def test_a_module_that_keeps_the_abi_is_installed(tmp_path, store):
    install(store, wat_tool(tmp_path, f"(module {MEMORY} {ALLOC} {ECHO})"))  # control
    assert "watty" in store.entries()


def test_a_directory_without_a_built_module_says_how_to_build_it(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "tool.yaml").write_text(yaml.safe_dump(probe_manifest()))
    with pytest.raises(ManifestError, match="make wasm-examples"):
        read_package(folder)
    (folder / "tool.wasm").write_text("not wasm")
    with pytest.raises(ManifestError, match="not a WebAssembly module"):
        read_package(folder)
