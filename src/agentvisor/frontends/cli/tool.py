"""``agentvisor tool``: install, list, inspect and remove Wasm tools (docs/wasm.md).

These commands are the operator's: installing shows every capability the tool asks for
and installs only when the person at the terminal accepts (``--yes`` accepts in
scripts). With neither a terminal nor ``--yes``, nothing is installed. The installed
files and the lock live in agentvisor's state directory, which no sandbox can see.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

CONFIG_HELP = "config file, used alone (default: user config, project agentvisor.yaml over it)"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tool",
        help="install, list, inspect and remove Wasm tools",
        description="Manage tools compiled to WebAssembly. A tool runs with exactly the "
        "capabilities its manifest asks for and the operator accepted at install: files "
        "below workspace directories, network hosts, environment variables, secrets by "
        "name, and memory, time and output limits. Installed tools are offered to agents "
        "in the toolset 'wasm' as wasm_TOOL_FUNCTION.",
    )
    tool = p.add_subparsers(dest="tool_command", metavar="ACTION")
    p.set_defaults(handler=lambda args: (p.print_help(), 2)[1])

    inst = tool.add_parser(
        "install",
        help="show a tool's capabilities and install it once accepted",
        description="Read the tool's manifest (tool.yaml) and module, check the module, "
        "show what it asks for, and install it when accepted. The SHA-256 of the module "
        "and the manifest go into the lock file; a changed file is refused until the tool "
        "is installed again. Installing over an installed tool replaces it.",
    )
    inst.add_argument(
        "path", metavar="PATH_OR_DIR", help="the tool's directory, or its manifest file"
    )
    inst.add_argument(
        "--yes",
        action="store_true",
        help="accept the capabilities as shown, without asking (for scripts)",
    )
    inst.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    inst.set_defaults(handler=run_install)

    ls = tool.add_parser(
        "list",
        help="list installed tools and whether they pass the lock",
        description="List installed Wasm tools. A tool whose files no "
        "longer match the lock is shown as REFUSED, with the reason.",
    )
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(handler=run_list)

    ins = tool.add_parser(
        "inspect",
        help="show an installed tool's manifest and grants",
        description="Show an installed tool: its functions and their "
        "input schemas, the capabilities it was granted, its limits "
        "(after the config's ceilings), and its lock entry.",
    )
    ins.add_argument("name", metavar="NAME")
    ins.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    ins.set_defaults(handler=run_inspect)

    rm = tool.add_parser(
        "remove",
        help="uninstall a tool",
        description="Remove an installed tool and its lock entry.",
    )
    rm.add_argument("name", metavar="NAME")
    rm.set_defaults(handler=run_remove)


def run_install(args: argparse.Namespace) -> int:
    from ...config import load_config
    from ...wasm import InstallRefused, ToolStore, describe, read_package, tool_name
    from ...wasm.runtime import Runtime
    from ...wasm.store import sha256

    config = load_config(args.config)
    package = read_package(args.path)
    manifest = package.manifest
    Runtime.shared().compile(manifest, package.module_bytes)  # refuses a module that breaks the ABI
    store = ToolStore()
    old = store.entries().get(manifest.name)
    if (
        old is not None
        and old.module_sha256 == package.module_sha256
        and old.manifest_sha256 == sha256(package.manifest_bytes)
        and _intact(store, manifest.name)
    ):
        print(f"{manifest.name} {manifest.version} is already installed, identical")
        return 0
    print("\n".join(describe(manifest)))
    for note in _ceiling_notes(manifest, config):
        print(f"  note: {note}")
    print(f"module: {package.source / manifest.module} (SHA-256 {package.module_sha256})")
    if old is not None:
        print(f"replaces: {old.name} {old.version}, installed {old.installed_at}")
    if not _accepted(args.yes, manifest.name):
        raise InstallRefused(f"{manifest.name} was not installed")
    store.install(package)
    names = ", ".join(tool_name(manifest.name, f.name) for f in manifest.functions)
    print(
        f"installed {manifest.name} {manifest.version}; agents with the toolset 'wasm' see: {names}"
    )
    return 0


def _intact(store: Any, name: str) -> bool:
    """The installed files still match the lock (else installing again repairs them)."""
    from ...wasm import WasmError

    try:
        store.open(name)
    except WasmError:
        return False
    return True


def _accepted(yes: bool, name: str) -> bool:
    from ...wasm import InstallRefused

    if yes:
        return True
    if not sys.stdin.isatty():
        raise InstallRefused(
            f"{name} was not installed: there is no terminal to accept its "
            "capabilities on; run the command in a terminal, or add --yes "
            "to accept them as shown"
        )
    try:
        answer = input(f"Install {name} with these capabilities? [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def _ceiling_notes(manifest: Any, config: Any) -> list[str]:
    asked, ceiling = manifest.limits, config.wasm
    notes = []
    for what, value, top, key in (
        ("memory_mb", asked.memory_mb, ceiling.max_memory_mb, "max_memory_mb"),
        ("timeout", asked.timeout, ceiling.max_timeout, "max_timeout"),
        ("output_kb", asked.output_kb, ceiling.max_output_kb, "max_output_kb"),
    ):
        if value > top:
            notes.append(f"limits.{what} {value:g} is lowered to {top:g} by wasm.{key}")
    return notes


def run_list(args: argparse.Namespace) -> int:
    from ...wasm import ToolStore, WasmError

    store = ToolStore()
    rows: list[dict[str, Any]] = []
    for name, entry in sorted(store.entries().items()):
        try:
            manifest = store.open(name).manifest
        except WasmError as exc:
            rows.append(
                {"name": name, "version": entry.version, "status": "REFUSED", "reason": str(exc)}
            )
            continue
        caps = manifest.capabilities
        granted = (
            [f"{g.access} {g.path}" for g in caps.files]
            + [f"net {h}" for h in caps.network]
            + [f"env {n}" for n in caps.env]
            + [f"secret {n}" for n in caps.secrets]
        )
        rows.append(
            {
                "name": name,
                "version": entry.version,
                "status": "ok",
                "functions": [f.name for f in manifest.functions],
                "capabilities": granted,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no Wasm tools installed (agentvisor tool install PATH_OR_DIR)")
    for row in rows:
        if row["status"] != "ok":
            print(f"{row['name']} {row['version']}  REFUSED: {row['reason']}")
            continue
        shown = ", ".join(row["capabilities"]) or "no capabilities"
        functions = ", ".join(row["functions"])
        print(f"{row['name']} {row['version']}  functions: {functions}  [{shown}]")
    return 0


def run_inspect(args: argparse.Namespace) -> int:
    from ...config import load_config
    from ...wasm import ToolStore, describe, tool_name
    from ...wasm.tools import effective_limits

    store = ToolStore()
    installed = store.open(args.name)  # a changed tool raises ToolChanged, exit 125
    manifest, entry = installed.manifest, installed.entry
    print("\n".join(describe(manifest)).replace("capabilities requested:", "capabilities granted:"))
    limits = effective_limits(manifest, load_config(args.config).wasm)
    print(
        f"limits in force: memory {limits.memory_bytes >> 20} MB, time {limits.timeout:g} s, "
        f"output {limits.output_bytes // 1024} KB"
    )
    print(f"installed: {entry.installed_at} from {entry.source}")
    print(f"module SHA-256:   {entry.module_sha256}")
    print(f"manifest SHA-256: {entry.manifest_sha256}")
    for fn in manifest.functions:
        print(f"\n{tool_name(manifest.name, fn.name)}: {fn.description.strip()}")
        print(json.dumps(fn.input_schema, indent=2))
    return 0


def run_remove(args: argparse.Namespace) -> int:
    from ...wasm import ToolStore

    entry = ToolStore().remove(args.name)
    print(f"removed {entry.name} {entry.version}")
    return 0
