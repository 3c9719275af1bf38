"""`ExecRequest`: one `agentvisor exec` run, as the CLI reads it and the server decodes it."""

from __future__ import annotations

from ..records import Declared, Default

# Exit status when agentvisor itself refuses or fails (the command's own status otherwise).
EXIT_REFUSED = 125


class ExecRequest(Declared):
    """What one run takes: the command, where the caller is, and its overrides of the
    config (None: the config's value)."""

    argv: tuple[str, ...]
    cwd: str
    environ: dict[str, str] = Default(factory=dict)
    config: str | None = None  # config file; None: discovered from cwd
    workspace: str | None = None  # relative to cwd; None: cwd itself
    timeout: float | None = None
    network: str | None = None  # "none" or "proxy"
    backend: str | None = None  # "bwrap", "docker" or "local"
    dry_run: bool = False  # print the sandbox command line instead of running it
    raw_output: bool = False  # pass control sequences to the caller's terminal unfiltered
