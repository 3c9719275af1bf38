"""The built-in categories: the default policy, each one switchable in the config.

`CATEGORIES` is the data (name, level, what it covers); the checks below look at what
`analyze` worked out a command would do and say which categories it falls in, in words
a person understands. Hardline categories deny and nothing lifts them; the others ask.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterable, Iterator

from ..records import Record, init
from . import hosts, knowledge
from .analyze import Content, Field, Invocation, Note, resolve_path
from .globs import PathSet
from .lazyre import regex


class Category(Record):
    __match_args__ = ("name", "hardline", "summary")
    __slots__ = __match_args__
    name: str
    hardline: bool
    summary: str

    def __init__(self, name: str, hardline: bool, summary: str) -> None:
        init(self, "name", name)
        init(self, "hardline", hardline)
        init(self, "summary", summary)

    @property
    def verdict(self) -> str:
        return "deny" if self.hardline else "ask"


CATEGORIES: dict[str, Category] = {
    c.name: c
    for c in (
        Category(
            "delete_system",
            True,
            "recursive delete (or move away) of /, a system directory or a home directory",
        ),
        Category(
            "disk_format",
            True,
            "filesystem creation, wiping, partitioning or discard on a block device",
        ),
        Category("block_device_write", True, "writing to a block device (/dev/sda, /dev/nvme0n1…)"),
        Category("fork_bomb", True, "a function that calls itself in a pipe or in the background"),
        Category("power", True, "shutdown, reboot, halt, poweroff, init 0/6, sysrq"),
        Category("kill_all", True, "kill -1: signal every process the user can reach"),
        Category("chmod_system", True, "recursive chmod/chown/chgrp on / or a system directory"),
        Category(
            "download_exec",
            True,
            "code downloaded from the network piped, substituted or saved into a shell or "
            "interpreter",
        ),
        Category(
            "credentials",
            False,
            "reading key material and credential files (~/.ssh, ~/.aws, .env*, ~/.netrc, "
            "~/.git-credentials, ~/.docker/config.json, ~/.kube/config, /etc/shadow, "
            "/proc/*/environ, …)",
        ),
        Category(
            "exfiltration",
            False,
            "sending files, command output or the environment to the "
            "network (curl -d @file, | nc, scp to a remote, …)",
        ),
        Category(
            "persistence",
            False,
            "making something run later: shell start-up files, authorized_keys, crontab, at, "
            "systemd units, setuid bits, git hooks and code-running git config, PATH "
            "directories, agentvisor's own config",
        ),
        Category("privilege", False, "sudo, su, doas, pkexec, run0; agentvisor grant/revoke"),
        Category(
            "vcs_destructive",
            False,
            "force push, +ref push, deleting remote branches, reset --hard, clean -f, "
            "branch -D, filter-branch, reflog expire, checkout/restore that discards work",
        ),
        Category(
            "private_network",
            False,
            "reaching loopback, private, link-local or cloud metadata addresses; network scanners",
        ),
        Category(
            "dynamic_code",
            False,
            "code that cannot be known before it runs: a program name from a variable, eval "
            "of non-literal text, decoded payloads fed to a shell, inline interpreter code "
            "that starts processes or deletes files, commands that cannot be parsed",
        ),
    )
}

HARDLINE = frozenset(n for n, c in CATEGORIES.items() if c.hardline)


class Finding(Record):
    """One reason an action falls in a category. ``verdict`` may be ``ask`` for a
    hardline category when the analysis can only say it *might* be one."""

    __match_args__ = ("category", "verdict", "reason", "piece", "tag")
    __slots__ = __match_args__
    category: str
    verdict: str
    reason: str
    piece: str
    tag: str

    def __init__(
        self, category: str, verdict: str, reason: str, piece: str = "", tag: str = ""
    ) -> None:
        init(self, "category", category)
        init(self, "verdict", verdict)
        init(self, "reason", reason)
        init(self, "piece", piece)
        init(self, "tag", tag)

    @property
    def hardline(self) -> bool:
        return self.verdict == "deny" and self.category in HARDLINE


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Judge:
    """Applies the enabled categories. Paths are judged as absolute, normalised paths."""

    def __init__(self, home: str, enabled: Iterable[str] | None = None) -> None:
        self.home = home.rstrip("/") or "/"
        self.enabled = frozenset(CATEGORIES if enabled is None else enabled)
        self.credentials = PathSet(knowledge.CREDENTIAL_PATTERNS, self.home)
        self.persistence = PathSet(knowledge.PERSISTENCE_PATTERNS, self.home)

    # --- entry points -----------------------------------------------------------------

    def invocation(self, inv: Invocation) -> list[Finding]:
        found = [f for f in self._invocation(inv) if f.category in self.enabled]
        return _dedupe(found)

    def notes(self, notes: list[Note]) -> list[Finding]:
        out: list[Finding] = []
        for n in notes:
            if n.kind == "recursion":
                if n.forks:
                    out.append(
                        Finding(
                            "fork_bomb",
                            "deny",
                            f"function `{n.text}` calls itself "
                            "in a pipe or in the background: a fork bomb",
                            n.text,
                        )
                    )
                else:
                    out.append(
                        Finding(
                            "dynamic_code",
                            "ask",
                            f"function `{n.text}` calls itself without end",
                            n.text,
                        )
                    )
            elif n.kind == "unparsed":
                out.append(
                    Finding(
                        "dynamic_code",
                        "ask",
                        f"part of the command could not be parsed: `{_short(n.text, 80)}`",
                        n.text,
                    )
                )
            elif n.kind == "too_deep":
                out.append(
                    Finding(
                        "dynamic_code",
                        "ask",
                        "shells, eval and functions are nested too deep to follow",
                        n.text,
                    )
                )
            elif n.kind == "too_many":
                out.append(Finding("dynamic_code", "ask", n.text, n.text))
        return [f for f in out if f.category in self.enabled]

    def read_path(self, path: str) -> list[Finding]:
        out: list[Finding] = []
        if self.credentials.match(path):
            out.append(
                Finding(
                    "credentials",
                    "ask",
                    f"reads {path}, which holds key material or credentials",
                    path,
                )
            )
        return [f for f in out if f.category in self.enabled]

    def write_path(self, path: str, piece: str = "") -> list[Finding]:
        out: list[Finding] = []
        piece = piece or path
        if knowledge.is_block_device(path):
            out.append(
                Finding("block_device_write", "deny", f"writes to the block device {path}", piece)
            )
        elif path == "/proc/sysrq-trigger":
            out.append(
                Finding(
                    "power",
                    "deny",
                    "writes to /proc/sysrq-trigger, which can reboot or halt the machine",
                    piece,
                )
            )
        elif self.persistence.match(path):
            out.append(
                Finding(
                    "persistence",
                    "ask",
                    f"writes {path}, which makes code run "
                    "later (start-up file, scheduler, service, hook or PATH)",
                    piece,
                )
            )
        return [f for f in out if f.category in self.enabled]

    def fetch_host(self, host: str, piece: str) -> list[Finding]:
        kind = hosts.classify(host)
        if kind is None or "private_network" not in self.enabled:
            return []
        return [
            Finding(
                "private_network",
                "ask",
                f"reaches {host}, a {_KIND_WORDS[kind]} address",
                piece,
                tag=kind,
            )
        ]

    # --- exec -------------------------------------------------------------------------

    def _invocation(self, inv: Invocation) -> Iterator[Finding]:
        piece = _short(inv.text)
        if inv.program is None:
            head = inv.argv[0]
            if "download" in head.taint:
                yield Finding(
                    "download_exec", "deny", f"`{piece}` runs downloaded text as a command", piece
                )
            else:
                what = "a glob" if head.glob and not head.dynamic else "only known when it runs"
                yield Finding("dynamic_code", "ask", f"the program in `{piece}` is {what}", piece)
        yield from self._code(inv, piece)
        check = _PROGRAM_CHECKS.get(inv.program or "")
        if check is not None:
            yield from check(self, inv, piece)
        elif inv.program and knowledge.DISK_WRITERS.match(inv.program):
            yield from self._disk(inv, piece)
        yield from self._paths(inv, piece)
        if inv.program in knowledge.NET_CLIENTS:
            yield from self._network(inv, piece)

    def _code(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        code = inv.runs_code
        if code is not None:
            if "download" in code.taint:
                yield Finding(
                    "download_exec",
                    "deny",
                    f"`{piece}` runs code downloaded from the network{_from(code)}",
                    piece,
                )
            elif code.kind == "unknown":
                tag = "decoded" if "decoded" in code.taint else ""
                what = "decoded text" if tag else "code that is only known when it runs"
                yield Finding(
                    "dynamic_code", "ask", f"`{piece}` runs {what}{_from(code)}", piece, tag=tag
                )
            elif code.kind == "literal" and "decoded" in code.taint:
                yield Finding(
                    "dynamic_code",
                    "ask",
                    f"`{piece}` runs code that was decoded first (an obfuscated payload)",
                    piece,
                    tag="decoded",
                )
        facts = inv.code_facts
        if facts is not None:
            lang = inv.code_lang or "inline"
            if facts.unparsed:
                yield Finding(
                    "dynamic_code",
                    "ask",
                    f"inline {lang} code in `{piece}` cannot be parsed",
                    piece,
                )
            if facts.spawns:
                yield Finding(
                    "dynamic_code",
                    "ask",
                    f"inline {lang} code starts processes ({', '.join(sorted(set(facts.spawns)))})",
                    piece,
                )
            if facts.deletes:
                yield Finding(
                    "dynamic_code",
                    "ask",
                    f"inline {lang} code deletes files ({', '.join(sorted(set(facts.deletes)))})",
                    piece,
                )
            if facts.dynamic:
                yield Finding(
                    "dynamic_code",
                    "ask",
                    f"inline {lang} code builds code at run "
                    f"time ({', '.join(sorted(set(facts.dynamic)))})",
                    piece,
                )

    # --- paths read and written -------------------------------------------------------

    def _paths(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        for path in self.reads(inv):
            yield from self.read_path(path)
        for path in self.writes(inv):
            yield from self.write_path(path, piece)
        for r in inv.redirects:
            if r.target is not None and r.target.text.startswith(("/dev/tcp/", "/dev/udp/")):
                host = r.target.text.split("/")[3] if r.target.text.count("/") >= 3 else ""
                yield from self.fetch_host(host, piece)
                if r.writes:
                    yield Finding(
                        "exfiltration",
                        "ask",
                        f"`{piece}` sends data to {host} over /dev/tcp",
                        piece,
                    )

    def path_of(self, f: Field, inv: Invocation) -> str | None:
        if f.lead_dynamic:
            return None
        return resolve_path(f.probe("x") if f.dynamic else f.text, inv.cwd, self.home)

    def reads(self, inv: Invocation) -> list[str]:
        """Paths whose contents ``inv`` may read."""
        out: list[str] = []
        candidates: list[Field] = []
        if inv.program not in knowledge.METADATA_ONLY:
            for a in inv.argv[1:]:
                text = a.text
                if text.startswith("-") and "=" in text:
                    candidates.append(Field(((text.split("=", 1)[1], a.dynamic),)))
                elif text.startswith("@"):
                    candidates.append(Field(((text[1:], a.dynamic),)))
                elif re.match(r"^[a-z]+=", text):
                    candidates.append(Field(((text.split("=", 1)[1], a.dynamic),)))
                    candidates.append(a)
                elif text.startswith("-"):
                    continue
                else:
                    if "=@" in text or "=<" in text:
                        named = re.split(r"=[@<]", text, maxsplit=1)[1]
                        candidates.append(Field(((named, a.dynamic),)))
                    candidates.append(a)
        for r in inv.redirects:
            if r.reads and r.target is not None:
                candidates.append(r.target)
        if inv.stdin.kind == "file":
            candidates.append(Field(((inv.stdin.text, False),)))
        for f in candidates:
            path = self.path_of(f, inv)
            if path:
                out.append(path)
        return out

    def writes(self, inv: Invocation) -> list[str]:
        """Paths ``inv`` may create or change."""
        targets: list[Field] = [r.target for r in inv.redirects if r.writes and r.target]
        program = inv.program or ""
        args = inv.argv[1:]
        operands = _operands(args)
        if program in ("tee", "touch", "truncate", "sponge", "install", "mkdir", "sudoedit"):
            targets.extend(operands)
        elif program in ("cp", "mv", "ln", "rsync", "install") and operands:
            t_opt = _option_value(args, ("-t", "--target-directory"))
            targets.append(t_opt if t_opt is not None else operands[-1])
        elif program == "dd":
            targets.extend(
                Field(((a.text[3:], a.dynamic),)) for a in args if a.text.startswith("of=")
            )
        elif program in ("sed", "perl", "ruby") and any(
            re.match(r"^-[a-zA-Z]*i", a.text) or a.text.startswith("--in-place") for a in args
        ):
            targets.extend(operands[1:] if program == "sed" else operands)
        out = []
        for f in targets:
            if f.text.isdigit() or f.text in ("-", "/dev/null", "/dev/stdout", "/dev/stderr"):
                continue
            path = self.path_of(f, inv)
            if path:
                out.append(path)
        return out

    # --- deletes, devices, power, kill, permissions -----------------------------------

    def _delete(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        recursive, targets = _delete_targets(inv)
        if not recursive:
            return
        for t in targets:
            yield from self._delete_target(t, inv, piece)

    def _delete_target(self, t: Field, inv: Invocation, piece: str) -> Iterator[Finding]:
        if t.lead_dynamic:
            yield Finding(
                "delete_system",
                "ask",
                f"`{piece}` deletes recursively a path that is only known when it runs ({t.text})",
                piece,
            )
            return
        path = resolve_path(t.probe("*") if t.dynamic else t.text, inv.cwd, self.home)
        if path is None:
            yield Finding(
                "delete_system",
                "ask",
                f"`{piece}` deletes recursively in a directory that is only known when it runs",
                piece,
            )
            return
        what = self._protected_dir(path, glob=t.glob or t.dynamic)
        if what:
            yield Finding("delete_system", "deny", f"`{piece}` deletes {what} recursively", piece)

    def _protected_dir(self, path: str, glob: bool = False) -> str:
        """Describe ``path`` if it is /, a system directory or a home directory (or a glob
        that covers one, or everything in one)."""
        if self._is_home(path) and path != "/home":
            return f"the home directory {path}"
        if path in knowledge.SYSTEM_DIRS:
            return "/ (the whole filesystem)" if path == "/" else f"the system directory {path}"
        if not glob or not _GLOB.search(path):
            return ""
        head, _, tail = path.rpartition("/")
        head = head or "/"
        if regex(_CATCH_ALL).fullmatch(tail) and (
            head in knowledge.SYSTEM_DIRS or self._is_home(head)
        ):
            return f"everything in {head}"
        for d in (*knowledge.SYSTEM_DIRS, self.home):
            if d != "/" and fnmatch.fnmatchcase(d, path):
                return f"{d} (matched by {path})"
        return ""

    def _is_home(self, path: str) -> bool:
        if path in (self.home, "/root", "/home"):
            return True
        parent = posixpath.dirname(path)
        return parent in knowledge.HOME_PARENTS and path != parent

    def _disk(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        program = inv.program or ""
        base = "mkfs" if program.startswith("mkfs") else program
        args = [a.text for a in inv.argv[1:]]
        when = knowledge.DISK_WRITE_WHEN.get(base)
        if when is not None:
            if any(a in knowledge.DISK_READ_ONLY_OPTS for a in args):
                return
            if "*" not in when and not any(a.split("=")[0] in when for a in args):
                return
        for f in _operands(inv.argv[1:]):
            if f.lead_dynamic:
                yield Finding(
                    "disk_format",
                    "ask",
                    f"`{piece}` works on a device that is only known when it runs",
                    piece,
                )
            elif knowledge.is_block_device(posixpath.normpath(f.text)):
                verb = "overwrites" if program == "shred" else "formats, wipes or repartitions"
                yield Finding(
                    "disk_format", "deny", f"`{piece}` {verb} the block device {f.text}", piece
                )

    def _power(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        args = [a.text for a in inv.argv[1:]]
        if any(a in ("--help", "-h", "--version") for a in args) and inv.program != "shutdown":
            return
        if "--help" in args:
            return
        yield Finding("power", "deny", f"`{piece}` shuts down or restarts the machine", piece)

    def _systemctl(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        ops = [a.text for a in _operands(inv.argv[1:])]
        verb = ops[0] if ops else ""
        if verb in knowledge.POWER_VERBS:
            yield from self._power(inv, piece)
        elif verb in (
            "enable",
            "link",
            "edit",
            "set-default",
            "preset",
            "reenable",
            "add-wants",
            "add-requires",
        ):
            yield Finding("persistence", "ask", f"`{piece}` makes a service start later", piece)

    def _init(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        if any(a.text in knowledge.POWER_RUNLEVELS for a in inv.argv[1:]):
            yield from self._power(inv, piece)

    def _loginctl(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        if any(a.text in knowledge.POWER_VERBS for a in inv.argv[1:]):
            yield from self._power(inv, piece)

    def _kill(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        args = [a.text for a in inv.argv[1:]]
        if inv.program == "killall5":
            yield Finding("kill_all", "deny", f"`{piece}` signals every process", piece)
            return
        if args == ["-1"]:
            pids = ["-1"]
        else:
            pids = []
            i = 0
            while i < len(args):
                a = args[i]
                if a == "--":
                    pids.extend(args[i + 1 :])
                    break
                if a in ("-s", "-n", "--signal"):
                    i += 2
                    continue
                if a.startswith("-") and i == 0 and a != "-1":
                    i += 1
                    continue
                if a.startswith("-") and i == 0 and a == "-1" and len(args) > 1:
                    i += 1  # kill -1 PID: -1 is the signal (SIGHUP)
                    continue
                pids.append(a)
                i += 1
        if "-1" in pids:
            yield Finding(
                "kill_all",
                "deny",
                f"`{piece}` signals every process the user can reach (pid -1)",
                piece,
            )

    def _chmod(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        args = inv.argv[1:]
        texts = [a.text for a in args]
        recursive = any(
            t in ("-R", "--recursive") or re.fullmatch(r"-[a-zA-Z]*R[a-zA-Z]*", t) for t in texts
        )
        operands = _operands(args)
        if inv.program == "chmod" and operands:
            mode = operands[0].text
            if re.search(r"[ugoa]*[+=][rwxXt]*s", mode) or re.fullmatch(r"[2467][0-7]{3}", mode):
                yield Finding("persistence", "ask", f"`{piece}` sets a setuid/setgid bit", piece)
        if not recursive:
            return
        has_reference = any(t.startswith("--reference") for t in texts)
        for f in operands[0 if has_reference else 1 :]:
            path = None if f.lead_dynamic else resolve_path(f.text, inv.cwd, self.home)
            if path is None:
                continue
            what = self._protected_dir(path, glob=f.glob)
            if what and not what.startswith("the home"):
                yield Finding(
                    "chmod_system",
                    "deny",
                    f"`{piece}` changes permissions or owner of {what} recursively",
                    piece,
                )

    # --- privilege, persistence, version control ---------------------------------------

    def _privilege(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        spec = knowledge.WRAPPERS.get(inv.program or "")
        if spec and inv.argv[1:] and all(a.text in spec.no_command_opts for a in inv.argv[1:]):
            return  # sudo -l, sudo -v: nothing runs
        yield Finding("privilege", "ask", f"`{piece}` runs as another user ({inv.program})", piece)

    def _agentvisor(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        ops = [a.text for a in _operands(inv.argv[1:])]
        if ops and ops[0] in ("grant", "revoke"):
            yield Finding("privilege", "ask", f"`{piece}` changes agentvisor's own grants", piece)

    def _crontab(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        texts = [a.text for a in inv.argv[1:]]
        if any(t in ("-l", "-r", "-ir", "-ri") for t in texts) and "-e" not in texts:
            return
        yield Finding("persistence", "ask", f"`{piece}` installs a crontab", piece)

    def _schedule(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        texts = [a.text for a in inv.argv[1:]]
        if inv.program in ("at", "batch") and any(t in ("-l", "-r", "-d", "-c") for t in texts):
            return
        yield Finding(
            "persistence",
            "ask",
            f"`{piece}` schedules or installs something that runs later",
            piece,
        )

    def _systemd_run(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        if any(a.text.startswith(("--on-", "--timer")) for a in inv.argv[1:]):
            yield Finding("persistence", "ask", f"`{piece}` sets a timer that runs later", piece)

    def _git(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        args = [a.text for a in inv.argv[1:]]
        i = 0
        while i < len(args) and args[i].startswith("-"):
            i += 2 if args[i] in knowledge.GIT_GLOBAL_OPTS_WITH_ARG else 1
        if i >= len(args):
            return
        sub, rest = args[i], args[i + 1 :]
        reason = _git_destructive(sub, rest)
        if reason:
            yield Finding("vcs_destructive", "ask", f"`{piece}` {reason}", piece)
        for key, value in _git_config_sets(sub, rest):
            if _git_code_key(key, value):
                yield Finding(
                    "persistence",
                    "ask",
                    f"`{piece}` sets git's {key}, a command git "
                    "runs later (also outside the sandbox)",
                    piece,
                )

    # --- network ----------------------------------------------------------------------

    def _curl(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        args = inv.argv[1:]
        data_opts = (
            "-d",
            "--data",
            "--data-binary",
            "--data-raw",
            "--data-urlencode",
            "--data-ascii",
            "-F",
            "--form",
            "--form-string",
            "--json",
            "-T",
            "--upload-file",
            "--post-file",
            "--body-file",
        )
        for index, a in enumerate(args):
            key, eq, value = a.text.partition("=")
            if key in data_opts and not eq and index + 1 < len(args):
                v = args[index + 1]
            elif key in data_opts and eq:
                v = Field(((value, a.dynamic),), taint=a.taint)
            elif key.startswith("-d") and len(key) > 2 and not key.startswith("--"):
                v = Field(((a.text[2:], a.dynamic),), taint=a.taint)
            else:
                continue
            text = v.text
            upload = key in ("-T", "--upload-file", "--post-file", "--body-file")
            if upload or text.startswith("@") or "=@" in text or "=<" in text:
                name = text if upload else re.split(r"@|=<", text, maxsplit=1)[-1]
                if name == "-" or name == ".":
                    yield Finding(
                        "exfiltration",
                        "ask",
                        f"`{piece}` sends its input{_from(inv.stdin)} to the network",
                        piece,
                    )
                else:
                    yield Finding(
                        "exfiltration", "ask", f"`{piece}` uploads the file {name}", piece
                    )
            elif "cmdsub" in v.taint:
                yield Finding(
                    "exfiltration",
                    "ask",
                    f"`{piece}` sends the output of a command to the network",
                    piece,
                )
        if inv.program in ("http", "https", "xh", "xhs", "httpie"):
            for a in args:
                if re.match(r"^[^=:@]*(=@|@|:=@)", a.text) and not a.text.startswith("-"):
                    yield Finding("exfiltration", "ask", f"`{piece}` uploads {a.text}", piece)

    def _sender(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        texts = [a.text for a in inv.argv[1:]]
        if inv.program in ("nc", "ncat", "netcat") and any(
            t in ("-e", "-c", "--exec", "--sh-exec", "--lua-exec") for t in texts
        ):
            yield Finding(
                "exfiltration",
                "ask",
                f"`{piece}` connects a program to the network (a remote shell)",
                piece,
            )
        if inv.program == "socat" and any(
            re.match(r"^(EXEC|SYSTEM|FILE|OPEN|GOPEN):", t, re.I) for t in texts
        ):
            yield Finding(
                "exfiltration", "ask", f"`{piece}` connects files or programs to the network", piece
            )
        if inv.stdin.kind in ("file", "unknown", "literal") and not (
            inv.program == "ssh" and inv.stdin.kind == "literal"
        ):
            yield Finding(
                "exfiltration",
                "ask",
                f"`{piece}` sends its input{_from(inv.stdin)} to the network",
                piece,
            )

    def _remote_copy(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        ops = _operands(inv.argv[1:])
        if inv.program == "rclone":
            ops = ops[1:]
        if len(ops) >= 2 and _is_remote(ops[-1].text):
            yield Finding(
                "exfiltration",
                "ask",
                f"`{piece}` copies files to another host ({ops[-1].text})",
                piece,
            )
        if inv.program == "sftp" and inv.stdin.kind != "none":
            yield Finding(
                "exfiltration", "ask", f"`{piece}` runs sftp commands from its input", piece
            )

    def _network(self, inv: Invocation, piece: str) -> Iterator[Finding]:
        if inv.program in knowledge.SCANNERS:
            yield Finding(
                "private_network",
                "ask",
                f"`{piece}` scans the network ({inv.program})",
                piece,
                tag="scan",
            )
        seen: set[str] = set()
        for a in inv.argv[1:]:
            if a.lead_dynamic or (a.text.startswith("-") and "=" not in a.text):
                continue
            for host in hosts.hosts_in(a.probe("0")):
                if host not in seen:
                    seen.add(host)
                    yield from self.fetch_host(host, piece)


_GLOB = re.compile(r"[*?\[]")
_CATCH_ALL = r"\*|\.\*|\*\*|\*/|\{\*,\.\*\}|\.\?\*|\[!.\]\*|\?\*|\.\[!.\]\*"
_KIND_WORDS = {
    "loopback": "loopback",
    "private": "private-network",
    "link-local": "link-local",
    "metadata": "cloud metadata",
    "internal": "internal-network",
}


def _from(content: Content) -> str:
    return f" (from `{_short(content.source, 60)}`)" if content.source else ""


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, str]] = set()
    out = []
    for f in findings:
        key = (f.category, f.reason)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _operands(args: Iterable[Field]) -> list[Field]:
    out: list[Field] = []
    dashdash = False
    for a in args:
        if dashdash or a.dynamic or not a.text.startswith("-") or a.text == "-":
            out.append(a)
        elif a.text == "--":
            dashdash = True
    return out


def _option_value(args: tuple[Field, ...], names: tuple[str, ...]) -> Field | None:
    for index, a in enumerate(args):
        key, eq, value = a.text.partition("=")
        if key in names:
            if eq:
                return Field(((value, a.dynamic),))
            if index + 1 < len(args):
                return args[index + 1]
    return None


def _delete_targets(inv: Invocation) -> tuple[bool, list[Field]]:
    program = inv.program
    args = inv.argv[1:]
    texts = [a.text for a in args]
    if program == "rm":
        recursive = any(
            t in ("--recursive",) or re.fullmatch(r"-[a-zA-Z]*[rR][a-zA-Z]*", t)
            for t in texts
            if t != "--"
        )
        return recursive, _operands(args)
    if program == "find" and "-delete" in texts:
        starts = []
        for a in args:
            if a.text.startswith(("-", "(", "!")) and not a.dynamic:
                break
            starts.append(a)
        return True, starts or [Field(((".", False),))]
    if program == "mv":
        ops = _operands(args)
        if _option_value(args, ("-t", "--target-directory")) is not None:
            return True, [o for o in ops if o is not _option_value(args, ("-t",))]
        return True, ops[:-1]
    if program == "rsync" and any(t.startswith("--delete") for t in texts):
        ops = _operands(args)
        return True, ops[-1:] if ops and not _is_remote(ops[-1].text) else []
    return False, []


def _is_remote(text: str) -> bool:
    return bool(
        re.match(r"^(rsync://|[a-z0-9+.-]+:(?!/)|([^/@:\s]+@)?[A-Za-z0-9_.-]+:)", text)
    ) and not text.startswith("/")


def _git_destructive(sub: str, rest: list[str]) -> str:
    flags = set(rest)
    short = "".join(t[1:] for t in rest if re.fullmatch(r"-[a-zA-Z]+", t))
    if sub == "push":
        if (
            {"--force", "--mirror"} & flags
            or "f" in short
            or any(t.startswith(("--force-with-lease", "--force-if-includes")) for t in rest)
        ):
            return "force-pushes, which can overwrite history on the remote"
        if {"--delete", "--prune"} & flags or "d" in short:
            return "deletes branches or tags on the remote"
        ops = [t for t in rest if not t.startswith("-")]
        if any(t.startswith("+") for t in ops[1:]):
            return "force-pushes a +ref, which can overwrite history on the remote"
        if any(t.startswith(":") and len(t) > 1 for t in ops[1:]):
            return "deletes a branch on the remote (:ref)"
    elif sub == "reset" and "--hard" in flags:
        return "discards uncommitted work (reset --hard)"
    elif (
        sub == "clean"
        and ("f" in short or "--force" in flags)
        and not ("n" in short or "--dry-run" in flags)
    ):
        return "deletes untracked files (clean -f)"
    elif sub == "branch" and (
        "D" in short
        or (("d" in short or "--delete" in flags) and ("f" in short or "--force" in flags))
    ):
        return "force-deletes a branch (branch -D)"
    elif sub in ("filter-branch", "filter-repo"):
        return "rewrites history"
    elif sub == "reflog" and rest and rest[0] in ("expire", "delete"):
        return "drops reflog entries that recover lost commits"
    elif sub == "update-ref" and "-d" in flags:
        return "deletes a ref"
    elif sub == "checkout" and (
        "f" in short or "--force" in flags or any(t in (".", ":/", "*", "./") for t in rest)
    ):
        return "discards uncommitted changes (checkout)"
    elif sub == "restore":
        staged_only = ("S" in short or "--staged" in flags) and not (
            "W" in short or "--worktree" in flags
        )
        if not staged_only and any(t in (".", ":/", "*", "./") for t in rest):
            return "discards uncommitted changes in the whole tree (restore)"
    return ""


def _git_config_sets(sub: str, rest: list[str]) -> Iterator[tuple[str, str]]:
    if sub == "config":
        ops = []
        i = 0
        while i < len(rest):
            t = rest[i]
            if t in ("-f", "--file", "--blob", "--type"):
                i += 2
                continue
            if not t.startswith("-"):
                ops.append(t)
            i += 1
        if ops and ops[0] in ("set", "unset", "get", "list", "edit"):
            if ops[0] != "set":
                return
            ops = ops[1:]
        if len(ops) >= 2:
            yield ops[0], ops[1]
    elif sub in ("clone", "submodule", "init"):
        for index, t in enumerate(rest):
            value = None
            if t in ("-c", "--config") and index + 1 < len(rest):
                value = rest[index + 1]
            elif t.startswith("--config="):
                value = t.split("=", 1)[1]
            if value and "=" in value:
                key, _, v = value.partition("=")
                yield key, v
            if sub == "clone" and (t.startswith("--template") or t in ("-u", "--upload-pack")):
                yield "init.templatedir", "x"


def _git_code_key(key: str, value: str) -> bool:
    parts = key.split(".")
    if len(parts) < 2:
        return False
    lowered = ".".join([parts[0].lower(), *parts[1:-1], parts[-1].lower()])
    for pattern in knowledge.GIT_CODE_KEYS:
        p_parts = pattern.split(".")
        if len(p_parts) != len(lowered.split(".")) and not (
            len(p_parts) == 2 and p_parts[1] == "*"
        ):
            continue
        if fnmatch.fnmatchcase(lowered.lower(), pattern):
            return not pattern.startswith("alias.") or value.lstrip().startswith("!")
    return False


_PROGRAM_CHECKS = {
    "rm": Judge._delete,
    "find": Judge._delete,
    "mv": Judge._delete,
    "shutdown": Judge._power,
    "reboot": Judge._power,
    "poweroff": Judge._power,
    "halt": Judge._power,
    "systemctl": Judge._systemctl,
    "init": Judge._init,
    "telinit": Judge._init,
    "loginctl": Judge._loginctl,
    "kill": Judge._kill,
    "pkill": Judge._kill,
    "killall5": Judge._kill,
    "chmod": Judge._chmod,
    "chown": Judge._chmod,
    "chgrp": Judge._chmod,
    "agentvisor": Judge._agentvisor,
    "crontab": Judge._crontab,
    "at": Judge._schedule,
    "batch": Judge._schedule,
    "launchctl": Judge._schedule,
    "update-rc.d": Judge._schedule,
    "chkconfig": Judge._schedule,
    "rc-update": Judge._schedule,
    "useradd": Judge._schedule,
    "adduser": Judge._schedule,
    "usermod": Judge._schedule,
    "passwd": Judge._schedule,
    "chpasswd": Judge._schedule,
    "visudo": Judge._schedule,
    "systemd-run": Judge._systemd_run,
    "git": Judge._git,
    "curl": Judge._curl,
    "wget": Judge._curl,
    "http": Judge._curl,
    "https": Judge._curl,
    "xh": Judge._curl,
    "httpie": Judge._curl,
    "scp": Judge._remote_copy,
    "rsync": Judge._remote_copy,
    "sftp": Judge._remote_copy,
    "rclone": Judge._remote_copy,
}
for _p in knowledge.PRIVILEGE:
    _PROGRAM_CHECKS[_p] = Judge._privilege
for _p in knowledge.NET_SENDERS:
    _PROGRAM_CHECKS.setdefault(_p, Judge._sender)
_PROGRAM_CHECKS["rsync"] = lambda self, inv, piece: (
    *Judge._delete(self, inv, piece),
    *Judge._remote_copy(self, inv, piece),
)
