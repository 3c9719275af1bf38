"""``agentvisor trust FILE``: let a project file widen the configuration (docs/configuration.md)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "trust",
        help="trust a project's agentvisor.yaml (or list and revoke trusted files)",
        description="A project file (agentvisor.yaml in the current directory or a parent) "
        "may only narrow the operator's configuration unless the operator trusts it. Trust "
        "is pinned to the file's content: after any change, trust it again.",
    )
    p.add_argument("file", nargs="?", help="the project file to trust (or, with --revoke, forget)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--list", action="store_true", help="list the trusted files")
    mode.add_argument("--revoke", action="store_true", help="stop trusting FILE")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ...config import config_from_dict, parse_yaml, trust
    from ...errors import ConfigError

    if args.list:
        return _list(trust.pins())
    if args.file is None:
        raise ConfigError("trust needs a FILE (or --list)")
    path = Path(args.file).absolute()
    if args.revoke:
        if not trust.unpin(path):
            raise ConfigError(f"{path}: was not trusted")
        print(f"no longer trusted: {path}")
        return 0
    from ...config.yamlfile import read_limited

    try:
        content = read_limited(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    document = parse_yaml(content, path)
    config_from_dict(document.data, source=str(path), document=document)  # only a valid one
    trust.pin(path, content)
    print(f"trusted: {path} (sha256 {trust.content_hash(content)[:16]}; changing it revokes this)")
    return 0


def _list(pins: dict[str, str]) -> int:
    from pathlib import Path

    from ...config import trust

    if not pins:
        print("no trusted project files")
    for name, digest in pins.items():
        try:
            state = "ok" if trust.content_hash(Path(name).read_bytes()) == digest else "changed"
        except OSError:
            state = "missing"
        print(f"{state:8} {digest[:16]}  {name}")
    return 0
