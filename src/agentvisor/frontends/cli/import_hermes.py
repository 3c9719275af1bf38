"""``agentvisor import-hermes [PATH]``: a Hermes Agent config as an agentvisor config.

Reads PATH (default ``~/.hermes/config.yaml``) and ``HERMES_WRITE_SAFE_ROOT`` (from the
environment, else the ``.env`` beside PATH; no other variable is read from it), maps what
decides the agent's access (see `agentvisor.hermes`), checks the result against
agentvisor's schema, and writes it to ``--output FILE`` or standard output. The report
of what was mapped, made stricter and left out goes to standard error when the config
goes to standard output, else to standard output.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

DEFAULT_PATH = "~/.hermes/config.yaml"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-hermes",
        help="turn a Hermes Agent config.yaml into an agentvisor config",
        description="Read a Hermes Agent config.yaml and write the equivalent agentvisor "
        "config: terminal backend and Docker settings, approvals, toolsets and the write "
        "safe root. Prints what it mapped, what it made stricter and what it could not map; "
        "it never gives the agent more than Hermes did without saying so.",
    )
    p.add_argument(
        "path",
        nargs="?",
        default=DEFAULT_PATH,
        metavar="PATH",
        help=f"the Hermes config (default: {DEFAULT_PATH})",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the agentvisor config to FILE (default: standard output)",
    )
    p.add_argument("--force", action="store_true", help="overwrite FILE when it exists")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    from ...config import config_from_dict, read_yaml
    from ...hermes import import_hermes

    path = Path(os.path.expanduser(args.path))
    data = read_yaml(path, " the Hermes config").data
    result = import_hermes(data, env=_hermes_env(path))
    config_from_dict(result.config, source="the imported config")  # a bug here must not ship
    text = (
        f"# agentvisor config imported from {path} by `agentvisor import-hermes`.\n"
        "# Read the import report before using it.\n"
        + yaml.safe_dump(result.config, sort_keys=False, default_flow_style=False)
    )
    report = sys.stdout if args.output else sys.stderr
    if args.output:
        _write(Path(args.output), text, force=args.force)
        print(f"wrote {args.output}", file=report)
    else:
        sys.stdout.write(text)
    for title, lines in (
        ("mapped", result.mapped),
        ("made stricter", result.stricter),
        ("refused (agentvisor would not run it; left out)", result.refused),
        ("not mapped", result.unmapped),
    ):
        print(f"{title}:", file=report)
        for line in lines or ["(nothing)"]:
            print(f"  - {line}", file=report)
    return 0


def _hermes_env(path: Path) -> dict[str, str]:
    """Hermes' ``.env`` beside its config, and HERMES_WRITE_SAFE_ROOT from the environment
    (which Hermes lets override the file)."""
    from ...errors import ConfigError

    env: dict[str, str] = {}
    seen: dict[str, int] = {}  # name -> line
    dotenv = path.parent / ".env"
    try:
        lines = dotenv.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
    except UnicodeDecodeError as exc:  # read as nothing, its keys would be in no list
        raise ConfigError(f"{dotenv}: not UTF-8 (byte {exc.start}); save it as UTF-8") from None
    for number, line in enumerate(lines, 1):
        name, sep, value = line.strip().removeprefix("export ").partition("=")
        name = name.strip()
        if not sep or not name or name.startswith("#"):
            continue
        if name in seen:  # which one counts is not for an import to guess
            raise ConfigError(
                f"{dotenv}: line {number}: {name} is set again (first on line {seen[name]})"
            )
        seen[name] = number
        env[name] = value.strip().strip("'\"")
    if os.environ.get("HERMES_WRITE_SAFE_ROOT"):
        env["HERMES_WRITE_SAFE_ROOT"] = os.environ["HERMES_WRITE_SAFE_ROOT"]
    return env


def _write(path: Path, text: str, *, force: bool) -> None:
    from ...errors import ConfigError

    if path.exists() and not force:
        raise ConfigError(f"{path} exists; pass --force to overwrite it")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
