"""The configuration schema: pydantic models, one per section of the YAML file.

Each key's type, default, accepted range and description live here once: validation uses
them, and docs/configuration.md is tested against them (tests/core/test_config.py).
Importing this module imports pydantic (tens of milliseconds); without a config file,
`agentvisor.config.defaults` gives the same defaults without it.
"""

from __future__ import annotations

import datetime
import sys
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from .narrowing import GRANTS, LESS, MORE, RESTRICTS, RULES, TOOLSETS, Ranked

Verdict = Literal["allow", "ask", "deny"]
Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


class Section(BaseModel):
    # Unknown keys and wrong types are errors (no "12" for 12); a loaded config never changes.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def default_backend() -> Literal["bwrap", "local"]:
    return "bwrap" if sys.platform.startswith("linux") else "local"


class DockerConfig(Section):
    """The docker backend's own settings (docs/docker.md)."""

    image: str = Field(
        "agentvisor-sandbox:latest",
        description=(
            "the image commands run in; never pulled. Build the default with `scripts/docker-"
            "build-image.sh`"
        ),
    )
    user: str = Field(
        "auto",
        description=(
            "who commands run as. `auto`: your own uid:gid; when agentvisor runs as root, the"
            " owner of the workspace (uid 0 without capabilities, with a warning, only when "
            "root owns it)"
        ),
    )
    read_only_root: Annotated[bool, Ranked(True, False)] = Field(
        True,
        description=(
            "the image's filesystem is read-only; writes go to the workspace, writable mounts"
            " and the tmpfs scratch space"
        ),
    )
    cpus: Annotated[float, MORE] = Field(
        1.0, gt=0, description="CPU cores the container may use (CFS quota)"
    )
    disk_mb: Annotated[int | None, MORE] = Field(
        None,
        gt=0,
        description=(
            "size of the container's writable layer; needs a storage driver with quotas "
            "(overlay2 on XFS with `pquota`), otherwise refused unless "
            "`sandbox.allow_unenforced_limits`"
        ),
    )
    extra_args: Annotated[list[str], GRANTS] = Field(
        default_factory=list,
        description=(
            "vetted extra options: `--cap-add` (CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, "
            "SETGID, SETUID, NET_BIND_SERVICE), `--add-host`, `--ulimit`, `--shm-size`, "
            "`--security-opt apparmor=PROFILE`, `--label`, `--hostname`, "
            "`-v`/`--volume`/`--mount type=bind` (checked like `sandbox.mounts`). Anything "
            "else is refused, naming the entry and what it would weaken (docs/docker.md)"
        ),
    )


class SandboxConfig(Section):
    backend: Annotated[Literal["bwrap", "local", "docker"], Ranked("bwrap", "local")] = Field(
        default_factory=default_backend,
        description=(
            "`bwrap`: namespaces, no capabilities, seccomp, no network. `docker`: a hardened "
            "container through the Docker Engine API (`sandbox.docker` below, "
            "docs/docker.md). `local`: **no isolation** (trusted use only; warns on every "
            "run)"
        ),
    )
    network: Annotated[Literal["none", "proxy"], Ranked("none", "proxy")] = Field(
        "none",
        description=(
            "`none`: loopback only. `proxy`: the only way out is agentvisor's egress proxy, "
            "which applies the policy (see docs/network.md)"
        ),
    )
    workspace: str | None = Field(
        None, description="the one writable place; bind-mounted at the same path"
    )
    mounts: Annotated[list[str], GRANTS] = Field(
        default_factory=list,
        description=(
            "extra directories; read-only unless `rw` is written. Protected paths are refused"
        ),
    )
    memory_mb: Annotated[int, MORE] = Field(
        4096,
        gt=0,
        description=(
            "memory of the whole sandbox (cgroup), or per process (RLIMIT_AS) without a cgroup"
        ),
    )
    pids: Annotated[int, MORE] = Field(
        256, gt=0, description="processes and threads of the whole sandbox"
    )
    cpu_seconds: Annotated[int | None, MORE] = Field(
        None, gt=0, description="CPU time per process (RLIMIT_CPU)"
    )
    file_size_mb: Annotated[int, MORE] = Field(
        4096, gt=0, description="largest file a process may write (RLIMIT_FSIZE)"
    )
    tmp_size_mb: Annotated[int, MORE] = Field(
        512,
        gt=0,
        description=(
            "size of each scratch tmpfs: `/tmp`, `/var/tmp`, `/run`, `/dev/shm` and the "
            "scratch home"
        ),
    )
    disk_mb: Annotated[int | None, MORE] = Field(
        None,
        gt=0,
        description=(
            "the most one gateway session's sandbox (or one `agentvisor exec` run) may write "
            "in total: the scratch tmpfs share it (`/tmp` 20 %, home 15 %, `/var/tmp`, "
            "`/run`, `/dev/shm` 5 % each, none above `tmp_size_mb`) and the session's "
            "changeset holds the rest (an ext4 image, "
            'needs root); writing past it fails with "No space left on device". Refused '
            "where writes land directly (`workspace.mode: direct`, the docker or local "
            "backend, writable `sandbox.mounts`) unless "
            "`sandbox.allow_unenforced_limits` (docs/sandbox.md)"
        ),
    )
    timeout: Annotated[float, MORE] = Field(
        180.0,
        gt=0,
        description="wall-clock limit of one command; then the whole sandbox is killed (exit 124)",
    )
    env_passthrough: Annotated[list[str], GRANTS] = Field(
        default_factory=list,
        description=(
            "caller variables to pass in; names that look like credentials (KEY, TOKEN, "
            "SECRET, PASSWORD, PASSWD, CREDENTIAL, CREDS, AUTH, BEARER, DSN, WEBHOOK, "
            "PRIVATE, COOKIE, SESSION) are still dropped, with a warning"
        ),
    )
    env_passthrough_secrets: Annotated[list[str], GRANTS] = Field(
        default_factory=list,
        description=(
            "credential-like variables to pass in anyway; warns on every run. Prefer secrets "
            "with placeholders (docs/network.md)"
        ),
    )
    protected_paths: Annotated[list[str], RESTRICTS] = Field(
        default_factory=list,
        description="extends the built-in list of paths never visible in a sandbox (see below)",
    )
    readonly_paths: Annotated[list[str], RESTRICTS] = Field(
        default_factory=list,
        description=(
            "extends the built-in list of workspace files kept read-only because the host "
            "runs them later; a trailing `/` marks a directory"
        ),
    )
    allow_unenforced_limits: Annotated[bool, Ranked(False, True)] = Field(
        False,
        description=(
            "run even when a configured limit cannot be enforced on this machine (warns); "
            "otherwise such a run is refused"
        ),
    )
    persistent: Annotated[bool, Ranked(False, True)] = Field(
        True,
        description=(
            "for gateway sessions: one sandbox per session that commands join (files in "
            "scratch space and background processes survive between calls); `false`: a fresh "
            "sandbox per call"
        ),
    )
    idle_timeout: Annotated[float, MORE] = Field(
        1800.0,
        gt=0,
        description=(
            "a session that saw no call for this long is closed: its sandbox, its pending "
            "asks, its changeset (settled) and, over HTTP, its MCP session"
        ),
    )
    idle_stop: Annotated[float, MORE] = Field(
        300.0,
        gt=0,
        description=(
            "a session's sandbox that ran nothing and saw no call for this long is stopped "
            "(its processes and scratch files end, its resources return); the session lives "
            "on and its next call starts a fresh sandbox"
        ),
    )
    docker: DockerConfig = Field(default_factory=DockerConfig, description="see sandbox.docker")


class ApprovalsLLMConfig(Section):
    """An OpenAI-compatible endpoint for the smart-mode LLM judge (docs/policy.md)."""

    url: str = Field(description="the endpoint's base URL")
    model: str = Field(description="the model name")
    api_key_env: str | None = Field(None, description="the variable holding the API key")
    timeout: float = Field(20.0, gt=0, description="seconds one judgement may take")


class ApprovalsConfig(Section):
    mode: Annotated[Literal["manual", "smart", "off"], Ranked("manual", "smart", "off")] = Field(
        "manual",
        description=(
            "who settles an `ask`: a person; a risk judge first, then a person; nobody (asks "
            "become allows — the hardline floor and deny rules still hold)"
        ),
    )
    timeout: Annotated[float, MORE] = Field(
        300.0, gt=0, description="an ask nobody answers in time is denied"
    )
    unattended: Literal["deny"] = Field(
        "deny", description="what happens when no person can be reached: always deny"
    )
    max_pending_per_session: Annotated[int, MORE] = Field(
        16,
        gt=0,
        description=(
            "asks one session may have waiting for a person at once; the next one is denied "
            "at once (rule `gateway:ask-limit`)"
        ),
    )
    max_pending_per_client: Annotated[int, MORE] = Field(
        64,
        gt=0,
        description=(
            "asks one client (the peer address over HTTP, the process over stdio) may have "
            "waiting at once over all its sessions; the next one is denied at once"
        ),
    )
    judge: Annotated[Literal["rules", "llm"], Ranked("rules", "llm")] = Field(
        "rules",
        description=(
            "in `smart` mode, what may settle an ask first: the built-in rule table, or a "
            "model behind `approvals.llm`. A judge only turns an ask into allow or deny; "
            "anything it is unsure of goes to a person (docs/policy.md)"
        ),
    )
    llm: ApprovalsLLMConfig | None = Field(
        None,
        description=(
            "an OpenAI-compatible endpoint for `judge: llm`: `url` (e.g. "
            "`http://127.0.0.1:11434/v1`), `model`, `api_key_env` (the name of an environment"
            " variable holding the key, never the key), `timeout` (seconds, default 20)"
        ),
    )


class RuleWhenConfig(Section):
    """Conditions on the context a rule applies in; glob patterns (docs/policy.md)."""

    session: str | list[str] | None = None
    agent: str | list[str] | None = None
    toolset: str | list[str] | None = None
    tool: str | list[str] | None = None
    time: str | None = Field(None, description='"HH:MM-HH:MM", local time')
    days: list[Day] | None = None


class RuleConfig(Section):
    """One entry of ``rules:`` (docs/policy.md)."""

    decision: Verdict = Field(description="what the rule decides")
    kind: Literal["exec", "read", "write", "fetch", "secret", "tool"] = Field(
        description="what kind of action it is about"
    )
    pattern: str = Field(
        description=(
            "exec: command tokens (`git push *`); read/write: gitignore pattern; fetch: "
            "`host`, `*.domain`, `*`, optional `:port`; secret: `NAME` or `NAME@HOST`; tool: "
            "glob"
        )
    )
    id: str | None = Field(None, description="the name decisions cite")
    when: RuleWhenConfig | None = Field(
        None,
        description=(
            "conditions on the context: globs (or lists of globs) for `session`, `agent`, "
            '`toolset`, `tool`; `time: "09:00-18:00"` (local); `days: [mon, tue, ...]`'
        ),
    )
    methods: list[str] | None = Field(
        None, description="fetch rules only: the methods the rule covers"
    )
    arguments: dict[str, str] | None = Field(
        None,
        description=(
            "tool rules only: argument name -> glob its value must match (any item of a list; "
            "a missing argument does not match)"
        ),
    )
    expires: datetime.datetime | datetime.date | str | None = Field(
        None, description="after it the rule stops matching (a date lasts to the end of that day)"
    )
    reason: str | None = Field(None, description="shown in decisions made by this rule")


class PolicyCategoriesConfig(Section):
    """Each built-in category on (true) or off (false) (docs/policy.md)."""

    delete_system: Annotated[bool, Ranked(True, False)] = Field(
        True,
        description=(
            "hardline: recursive delete (or move away) of `/`, a system directory or a home "
            "directory"
        ),
    )
    disk_format: Annotated[bool, Ranked(True, False)] = Field(
        True,
        description="hardline: mkfs, wipefs, blkdiscard, shred, partitioning on a block device",
    )
    block_device_write: Annotated[bool, Ranked(True, False)] = Field(
        True, description="hardline: writing to a block device (`> /dev/sda`, `dd of=/dev/nvme0n1`)"
    )
    fork_bomb: Annotated[bool, Ranked(True, False)] = Field(
        True, description="hardline: a function that calls itself in a pipe or in the background"
    )
    power: Annotated[bool, Ranked(True, False)] = Field(
        True, description="hardline: shutdown, reboot, halt, poweroff, `init 0`/`6`, sysrq"
    )
    kill_all: Annotated[bool, Ranked(True, False)] = Field(
        True, description="hardline: `kill -1` (every process)"
    )
    chmod_system: Annotated[bool, Ranked(True, False)] = Field(
        True, description="hardline: recursive chmod/chown/chgrp on `/` or a system directory"
    )
    download_exec: Annotated[bool, Ranked(True, False)] = Field(
        True,
        description=(
            "hardline: downloaded code piped, substituted or saved into a shell or interpreter"
        ),
    )
    credentials: Annotated[bool, Ranked(True, False)] = Field(
        True, description="ask: reading key material and credential files"
    )
    exfiltration: Annotated[bool, Ranked(True, False)] = Field(
        True, description="ask: sending files, command output or the environment to the network"
    )
    persistence: Annotated[bool, Ranked(True, False)] = Field(
        True,
        description=(
            "ask: start-up files, authorized_keys, crontab, at, systemd, setuid, git hooks "
            "and code-running git config"
        ),
    )
    privilege: Annotated[bool, Ranked(True, False)] = Field(
        True,
        description=(
            "ask: sudo, su, doas, pkexec, run0; `agentvisor grant`/`revoke` run by an agent"
        ),
    )
    vcs_destructive: Annotated[bool, Ranked(True, False)] = Field(
        True,
        description=(
            "ask: force push, remote branch deletion, reset --hard, clean -f, branch -D, "
            "history rewrites, discarding checkouts"
        ),
    )
    private_network: Annotated[bool, Ranked(True, False)] = Field(
        True,
        description="ask: loopback, private, link-local and metadata addresses; network scanners",
    )
    ops_destructive: Annotated[bool, Ranked(True, False)] = Field(
        True,
        description=(
            "ask: destructive verbs of tools that act outside the sandbox: container engines, "
            "Kubernetes, Helm, cloud CLIs, Terraform, database clients (DROP, TRUNCATE, "
            "FLUSHALL, dropDatabase)"
        ),
    )
    cover_tracks: Annotated[bool, Ranked(True, False)] = Field(
        True,
        description=(
            "ask: rewriting, truncating or deleting logs (/var/log) and shell histories, "
            "switching history off"
        ),
    )
    dynamic_code: Annotated[bool, Ranked(True, False)] = Field(
        True,
        description=(
            "ask: code only known at run time (program from a variable, eval of non-literal "
            "text, decoded payloads, inline interpreter code that spawns or deletes, "
            "unparsable commands)"
        ),
    )


class PolicyDefaultsConfig(Section):
    """What a kind gets when no rule, grant or category decided (docs/policy.md)."""

    exec: Annotated[Verdict, Ranked("deny", "ask", "allow")] = Field(
        "allow", description="a command no rule, grant or category decided (it runs in the sandbox)"
    )
    read: Annotated[Verdict, Ranked("deny", "ask", "allow")] = Field(
        "allow", description="a file-tool read no rule, grant or category decided"
    )
    write: Annotated[Verdict, Ranked("deny", "ask", "allow")] = Field(
        "ask",
        description=(
            "a file-tool write outside the workspace and `files.write_roots` (inside them "
            "writes are allowed)"
        ),
    )
    secret: Annotated[Verdict, Ranked("deny", "ask", "allow")] = Field(
        "ask",
        description=(
            "using a secret no rule or grant allows (the secret's own `hosts` are checked as well)"
        ),
    )
    tool: Annotated[Verdict, Ranked("deny", "ask", "allow")] = Field(
        "ask", description="a named tool no rule or grant allows"
    )


class PolicyConfig(Section):
    categories: PolicyCategoriesConfig = Field(default_factory=PolicyCategoriesConfig)
    defaults: PolicyDefaultsConfig = Field(default_factory=PolicyDefaultsConfig)


class NetworkConfig(Section):
    """Caps and extra blocks for every host-side network path (docs/network.md)."""

    max_response_bytes: Annotated[int, MORE] = Field(
        10 * 1024 * 1024,
        gt=0,
        description=(
            "largest response body a host-side tool reads; the rest is cut and the result "
            "says `truncated`"
        ),
    )
    timeout: Annotated[float, MORE] = Field(
        30.0,
        gt=0,
        description=(
            "total time of one host-side request, redirects included; also the proxy's "
            "connect and read timeout"
        ),
    )
    max_redirects: Annotated[int, MORE] = Field(
        5,
        ge=0,
        le=20,
        description=(
            "redirects the host-side client follows, each one checked again like a new request"
        ),
    )
    ca_file: str | None = Field(
        None,
        description=(
            "extra certificate authorities to trust (e.g. a company CA), in addition to the "
            "public ones"
        ),
    )
    block: Annotated[list[str], RESTRICTS] = Field(
        default_factory=list,
        description=(
            "more ranges treated as internal, beside the built-in ones (loopback, private, "
            "CGNAT, link-local, unique-local, benchmarking, multicast, ...)"
        ),
    )
    proxy_port: int = Field(
        3128,
        ge=1,
        le=65535,
        description=(
            "the port the egress proxy is presented on inside a `--network proxy` sandbox "
            "(`HTTP_PROXY=http://127.0.0.1:PORT`)"
        ),
    )


class SecretConfig(Section):
    name: str = Field(description="the name used in the placeholder `{{secret:NAME}}`")
    hosts: list[str] = Field(
        description=(
            "where the value may be sent: the host actually connected to (and TLS-verified), "
            "never a `Host` header"
        )
    )
    env: str | None = Field(
        None,
        description=(
            "read the value from this environment variable of the agentvisor process (set "
            "exactly one of `env`, `file`)"
        ),
    )
    file: str | None = Field(
        None,
        description=(
            "read the value from this host file (kept out of every sandbox by "
            "`sandbox.protected_paths`)"
        ),
    )
    header: str | None = Field(
        None,
        description=(
            "also add this header by itself to `http_request` calls to one of `hosts` (e.g. "
            "`Authorization: Bearer {value}`)"
        ),
    )
    proxy_body: bool = Field(
        False,
        description=(
            "the egress proxy of `agentvisor run` fills this placeholder in request bodies "
            "to one of `hosts` too, not only in headers (bodies up to 16 MiB)"
        ),
    )


class WebSearchConfig(Section):
    provider: Literal["none", "searxng", "brave"] = Field(
        "none",
        description=(
            "where `web_search` sends queries; `none` makes the tool answer with how to "
            "configure one"
        ),
    )
    url: str | None = Field(
        None,
        description=(
            "`searxng`: the instance (JSON output enabled); `brave`: overrides the API endpoint"
        ),
    )
    api_key_secret: str | None = Field(
        None,
        description="`brave`: the secret holding the API key (sent only to that secret's hosts)",
    )
    max_results: int = Field(10, description="results returned when the call does not say")


class WorkspaceConfig(Section):
    """How the agent's writes reach the workspace: changesets (docs/changesets.md)."""

    mode: Literal["auto", "review", "direct"] = Field(
        "auto",
        description=(
            "`auto`: after each call, changed paths pass the write policy and are applied, "
            "except the host-run class (git config and hooks at any depth, nested "
            "repositories, `.envrc`, editor tasks, `agentvisor.yaml`), which waits for a "
            "person; `review`: nothing is applied without a person; `direct`: writes land "
            "at once"
        ),
    )
    hold: list[str] = Field(
        default_factory=list,
        description=(
            "more paths always held for a person (gitignore-style globs, relative to the workspace)"
        ),
    )
    undo_mb: int = Field(
        512,
        ge=0,
        description="undo data kept for `agentvisor undo`, in MiB; the oldest is dropped first",
    )


class FilesConfig(Section):
    """Where the file tools may read and write, besides the workspace (docs/gateway.md)."""

    write_roots: Annotated[list[str], GRANTS] = Field(
        default_factory=list, description="extra directories the file tools may read and write"
    )
    read_roots: Annotated[list[str], GRANTS] = Field(
        default_factory=list, description="extra directories the file tools may only read"
    )
    max_read_bytes: Annotated[int, MORE] = Field(
        1024 * 1024, gt=0, description="larger files are refused by `read_file`"
    )
    max_write_bytes: Annotated[int, MORE] = Field(
        10 * 1024 * 1024, gt=0, description="larger writes are refused"
    )


class GatewayConfig(Section):
    """The MCP gateway: what agents see and how results come back (docs/gateway.md)."""

    host: str = Field(
        "127.0.0.1",
        description=(
            "where `agentvisor serve` listens; any non-loopback address requires `gateway.token`"
        ),
    )
    port: int = Field(
        8765, ge=1, le=65535, description="the HTTP port of `agentvisor serve` (MCP at `/mcp`)"
    )
    token: str | None = Field(
        None,
        description=(
            "bearer token clients must send (`Authorization: Bearer ...`); required off loopback"
        ),
    )
    max_output_bytes: Annotated[int, MORE] = Field(
        50_000,
        gt=0,
        description=(
            "tool output longer than this keeps its head and tail with a marker of what was cut"
        ),
    )
    exec_helper_idle: Annotated[float, MORE] = Field(
        600.0,
        ge=0,
        description=(
            "how long the helper that `agentvisor exec` leaves behind waits for the next run "
            "before it exits; `0`: never start one (docs/gateway.md)"
        ),
    )
    max_sessions_per_client: Annotated[int, MORE] = Field(
        64,
        gt=0,
        description=(
            "sessions one client (the peer address over HTTP) may hold open at once; the next "
            "one is refused (rule `gateway:quota`)"
        ),
    )
    max_calls_per_client: Annotated[int, MORE] = Field(
        32,
        gt=0,
        description=(
            "tool calls one client may have running at once; the next one is refused at once "
            "and audited (rule `gateway:quota`)"
        ),
    )


class AuditConfig(Section):
    """Where the audit log is kept and for how long (docs/audit.md)."""

    url: str | None = Field(
        None,
        description=(
            "where audit events go: one hash-chained event per call, decision, approval, "
            "grant change and sandbox lifecycle event, committed before the result returns"
        ),
    )
    retention_days: Annotated[float | None, LESS] = Field(
        None,
        gt=0,
        description=(
            "events older than this are deleted (checked at start and hourly); the chain "
            "stays verifiable from a checkpoint of the last deleted event"
        ),
    )


class StateConfig(Section):
    """Where grants and pending approvals are kept, shared by gateways (docs/audit.md)."""

    url: str | None = Field(
        None,
        description=(
            "where grants and pending approvals live; gateways that share it share grants and"
            " answer each other's asks"
        ),
    )


class WasmConfig(Section):
    """Ceilings on what any Wasm tool gets, whatever its manifest asks (docs/wasm.md)."""

    max_memory_mb: Annotated[int, MORE] = Field(
        256,
        gt=0,
        description=(
            "most linear memory any tool call gets; `memory.grow` fails past it, and a module"
            " that needs more at start does not run"
        ),
    )
    max_timeout: Annotated[float, MORE] = Field(
        60.0,
        gt=0,
        description=(
            "longest wall-clock time of one tool call; then it is interrupted wherever it is"
        ),
    )
    max_output_kb: Annotated[int, MORE] = Field(
        1024, gt=0, description="largest result one tool call may return; a larger one is refused"
    )


class DashboardConfig(Section):
    """The web dashboard `agentvisor serve` shows on its own port (docs/dashboard.md)."""

    enabled: bool = Field(
        True,
        description=(
            "serve the dashboard (and, while it is served, a person counts as reachable for "
            "approvals)"
        ),
    )
    login: Annotated[Literal["auto", "always"], Ranked("always", "auto")] = Field(
        "auto",
        description=(
            "`auto`: no login for a browser on this machine when the gateway listens on "
            "loopback; a token login otherwise (another address, a non-loopback client, or a "
            "request through a proxy). `always`: a token login everywhere (machines with "
            "several users)"
        ),
    )
    token: str | None = Field(
        None,
        description=(
            "the dashboard login token (or the `AGENTVISOR_DASHBOARD_TOKEN` environment "
            "variable). Keep it different from `gateway.token`, which agents hold; without "
            "it, a dashboard that needs a login stays locked"
        ),
    )
    login_hours: Annotated[float, MORE] = Field(12.0, gt=0, description="how long a login lasts")


class WebhooksConfig(Section):
    """Approvals through signed webhooks, e.g. a chat bot (docs/dashboard.md)."""

    targets: list[str] = Field(
        default_factory=list, description="where pending asks (and their outcome) are POSTed"
    )
    secret_env: str | None = Field(
        None,
        description=(
            "the environment variable that holds the HMAC-SHA256 key (set this or `secret_file`)"
        ),
    )
    secret_file: str | None = Field(None, description="a file that holds the HMAC-SHA256 key")
    approvers: Annotated[list[str], GRANTS] = Field(
        default_factory=list,
        description=(
            "who may answer through the webhook; required with targets; anyone else is "
            "refused and audited. No wildcards: there is no allow-everyone setting"
        ),
    )
    callback_url: str | None = Field(
        None, description="the callback address sent with each ask, as the target should reach it"
    )
    max_age: Annotated[float, MORE] = Field(
        300.0,
        gt=0,
        description=(
            "a signed message older (or newer) than this is refused; a signature is accepted once"
        ),
    )
    timeout: float = Field(10.0, gt=0, description="how long one POST to a target may take")


Label = Literal["private_read", "untrusted_read", "external_write", "internal_write"]


class UpstreamConfig(Section):
    """One entry of ``upstreams:``: a third-party MCP server behind the gateway
    (docs/upstreams.md)."""

    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9-]*(_[a-z0-9-]+)*$",
        max_length=32,
        description=(
            "the server's name; its tools are offered as `NAME__TOOL` (lower-case letters, "
            "digits, `-`, single `_`)"
        ),
    )
    command: list[str] = Field(
        default_factory=list,
        description=(
            "a stdio server: the command, run inside agentvisor's sandbox whose only way out "
            "is the egress proxy (set exactly one of `command`, `url`)"
        ),
    )
    url: str | None = Field(
        None,
        description=(
            "an HTTP server (streamable HTTP): every request is admitted by the destination "
            "guard and the `fetch` rules first"
        ),
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "variables for a stdio server; write `{{secret:NAME}}` for a credential (the "
            "proxy injects it toward the secret's hosts only)"
        ),
    )
    mounts: list[str] = Field(
        default_factory=list,
        description=(
            "what a stdio server's sandbox must see besides the workspace (its code, its "
            "interpreter), as `sandbox.mounts`: `HOST:INSIDE[:ro|rw]`"
        ),
    )
    cwd: str | None = Field(
        None, description="the stdio server's working directory inside the sandbox"
    )
    labels: dict[str, list[Label]] = Field(
        default_factory=dict,
        description=(
            "flow labels per tool name; a tool not listed gets labels guessed from the verbs "
            "of its name"
        ),
    )
    timeout: float = Field(60.0, gt=0, description="longest time one call may take")


class FlowScopeConfig(Section):
    """The operator's task scope every session starts with (docs/upstreams.md)."""

    recipients: list[str] = Field(
        default_factory=list,
        description="people (addresses, user names) any session may send to",
    )
    hosts: list[str] = Field(
        default_factory=list, description="hosts any session may send to or fetch from"
    )
    accounts: list[str] = Field(
        default_factory=list, description="accounts (e.g. IBANs) any session may pay or write to"
    )


class FlowSessionConfig(Section):
    read_untrusted: bool | None = None
    read_private: bool | None = None


class FlowWhenConfig(Section):
    session: FlowSessionConfig = Field(default_factory=FlowSessionConfig)


class FlowRuleConfig(Section):
    """One entry of ``flow.rules``: a rule on what a session has read."""

    decision: Literal["ask", "deny"] = Field(description="what the rule decides")
    tool: str = Field("*", description="a glob on the tool's name (`mail__*`)")
    labels: list[Label] = Field(
        default_factory=list, description="the call carries one of these labels (any, if empty)"
    )
    when: FlowWhenConfig | None = Field(
        None,
        description=(
            "`{session: {read_untrusted: BOOL, read_private: BOOL}}`: what the session must "
            "(true) or must not (false) have read"
        ),
    )
    arguments: dict[str, str] = Field(
        default_factory=dict,
        description="argument name -> glob its value must match (any item of a list)",
    )
    reason: str | None = Field(None, description="shown in decisions made by this rule")


class FlowConfig(Section):
    """The session flow guard (docs/upstreams.md)."""

    mode: Literal["provenance", "trifecta", "off"] = Field(
        "provenance",
        description=(
            "`provenance`: ask when a write would carry a value lifted from untrusted text, or "
            "private data out, that the task scope does not name; `trifecta`: ask any external "
            "write after untrusted content; `off`: only `flow.rules`"
        ),
    )
    scope: FlowScopeConfig = Field(default_factory=FlowScopeConfig)
    rules: list[FlowRuleConfig] = Field(default_factory=list)


class Config(Section):
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    files: FilesConfig = Field(default_factory=FilesConfig)
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    toolsets: Annotated[list[str], TOOLSETS] = Field(
        default_factory=lambda: ["debugging"],
        description=(
            "the tools a session gets; `agentvisor mcp --toolsets a,b` and "
            "`agentvisor serve --toolsets a,b` override it"
        ),
    )
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    secrets: Annotated[list[SecretConfig], GRANTS] = Field(default_factory=list)
    web_search: WebSearchConfig = Field(default_factory=WebSearchConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    rules: Annotated[list[RuleConfig], RULES] = Field(default_factory=list)
    wasm: WasmConfig = Field(default_factory=WasmConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    state: StateConfig = Field(default_factory=StateConfig)
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)
    webhooks: WebhooksConfig = Field(default_factory=WebhooksConfig)
    upstreams: list[UpstreamConfig] = Field(default_factory=list)
    flow: FlowConfig = Field(default_factory=FlowConfig)
    # Not a key (a file that sets it is refused): the file this config came from, None
    # for the built-in defaults.
    source: str | None = Field(None, exclude=True)
