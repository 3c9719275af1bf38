"""What every check needs to know besides the command: the home directory and the
path sets, and the judgement of a single path or host (also used for read/write/fetch
actions that are not commands)."""

from __future__ import annotations

import fnmatch
import posixpath
import re

from ...protected import SYSTEM_DIRS
from .. import hosts, knowledge
from ..facts import Field, Invocation, resolve_path
from ..globs import PathSet
from ..lazyre import regex
from .findings import Finding, operands, option_value

_GLOB = re.compile(r"[*?\[]")
_CATCH_ALL = r"\*|\.\*|\*\*|\*/|\{\*,\.\*\}|\.\?\*|\[!.\]\*|\?\*|\.\[!.\]\*"
_KIND_WORDS = {
    "loopback": "loopback",
    "private": "private-network",
    "link-local": "link-local",
    "metadata": "cloud metadata",
    "internal": "internal-network",
}


class Scope:
    """The machine as the checks see it. Paths are judged absolute and normalised."""

    def __init__(self, home: str) -> None:
        self.home = home.rstrip("/") or "/"
        self.credentials = PathSet(knowledge.CREDENTIAL_PATTERNS, self.home)
        self.persistence = PathSet(knowledge.PERSISTENCE_PATTERNS, self.home)
        self.tracks = PathSet(knowledge.TRACK_PATTERNS, self.home)

    # --- one path, one host -----------------------------------------------------------

    def read_path(self, path: str) -> list[Finding]:
        if not self.credentials.match(path):
            return []
        reason = f"reads {path}, which holds key material or credentials"
        return [Finding("credentials", "ask", reason, path)]

    def write_path(self, path: str, piece: str = "") -> list[Finding]:
        piece = piece or path
        if knowledge.is_block_device(path):
            return [
                Finding("block_device_write", "deny", f"writes to the block device {path}", piece)
            ]
        if path == "/proc/sysrq-trigger":
            reason = "writes to /proc/sysrq-trigger, which can reboot or halt the machine"
            return [Finding("power", "deny", reason, piece)]
        if self.tracks.match(path):
            reason = f"rewrites {path}, a log or shell history (it hides what was done)"
            return [Finding("cover_tracks", "ask", reason, piece)]
        if self.persistence.match(path):
            reason = (
                f"writes {path}, which makes code run "
                "later (start-up file, scheduler, service, hook or PATH)"
            )
            return [Finding("persistence", "ask", reason, piece)]
        return []

    def fetch_host(self, host: str, piece: str) -> list[Finding]:
        kind = hosts.classify(host)
        if kind is None:
            return []
        reason = f"reaches {host}, a {_KIND_WORDS[kind]} address"
        return [Finding("private_network", "ask", reason, piece, tag=kind)]

    def protected_dir(self, path: str, glob: bool = False) -> str:
        """Describe ``path`` if it is /, a system directory or a home directory (or a glob
        that covers one, or everything in one)."""
        if self.is_home(path) and path != "/home":
            return f"the home directory {path}"
        if path in SYSTEM_DIRS:
            return "/ (the whole filesystem)" if path == "/" else f"the system directory {path}"
        if not glob or not _GLOB.search(path):
            return ""
        head, _, tail = path.rpartition("/")
        head = head or "/"
        if regex(_CATCH_ALL).fullmatch(tail) and (head in SYSTEM_DIRS or self.is_home(head)):
            return f"everything in {head}"
        for d in (*SYSTEM_DIRS, self.home):
            if d != "/" and fnmatch.fnmatchcase(d, path):
                return f"{d} (matched by {path})"
        return ""

    def is_home(self, path: str) -> bool:
        if path in (self.home, "/root", "/home"):
            return True
        parent = posixpath.dirname(path)
        return parent in knowledge.HOME_PARENTS and path != parent

    # --- what a command reads and writes ----------------------------------------------

    def path_of(self, f: Field, inv: Invocation) -> str | None:
        if f.lead_dynamic:
            return None
        return resolve_path(f.probe("x") if f.dynamic else f.text, inv.cwd, self.home)

    def reads(self, inv: Invocation) -> list[str]:
        """Paths whose contents ``inv`` may read."""
        candidates: list[Field] = []
        if inv.program not in knowledge.METADATA_ONLY:
            # A key handed to the program that uses it (ssh -i KEY) is not read out.
            uses = knowledge.KEY_OPTS.get(inv.program or "", frozenset())
            args = inv.argv[1:]
            for index, a in enumerate(args):
                if index and args[index - 1].text in uses:
                    continue
                candidates.extend(_read_candidates(a))
        for r in inv.redirects:
            if r.reads and r.target is not None:
                candidates.append(r.target)
        if inv.stdin.kind == "file":
            candidates.append(Field(((inv.stdin.text, False),)))
        return [p for p in (self.path_of(f, inv) for f in candidates) if p]

    def writes(self, inv: Invocation) -> list[str]:
        """Paths ``inv`` may create or change."""
        targets: list[Field] = [r.target for r in inv.redirects if r.writes and r.target]
        program = inv.program or ""
        args = inv.argv[1:]
        ops = operands(args)
        if program in ("tee", "touch", "truncate", "sponge", "install", "mkdir", "sudoedit"):
            targets.extend(ops)
        elif program in ("cp", "mv", "ln", "rsync", "install") and ops:
            t_opt = option_value(args, ("-t", "--target-directory"))
            targets.append(t_opt if t_opt is not None else ops[-1])
        elif program == "dd":
            targets.extend(
                Field(((a.text[3:], a.dynamic),)) for a in args if a.text.startswith("of=")
            )
        elif program in ("sed", "perl", "ruby") and any(
            re.match(r"^-[a-zA-Z]*i", a.text) or a.text.startswith("--in-place") for a in args
        ):
            targets.extend(ops[1:] if program == "sed" else ops)
        write_opts = knowledge.WRITE_OPTS.get(program, frozenset())
        for index, a in enumerate(args):
            if a.text in write_opts and index + 1 < len(args) and program != "tar":
                targets.append(args[index + 1])
        out = []
        for f in targets:
            if f.text.isdigit() or f.text in ("-", "/dev/null", "/dev/stdout", "/dev/stderr"):
                continue
            path = self.path_of(f, inv)
            if path:
                out.append(path)
        return out


def _read_candidates(a: Field) -> list[Field]:
    """The paths an argument may name for reading (``--opt=PATH``, ``@PATH``, ``k=PATH``)."""
    text = a.text
    if text.startswith("-") and "=" in text:
        return [Field(((text.split("=", 1)[1], a.dynamic),))]
    if text.startswith("@"):
        return [Field(((text[1:], a.dynamic),))]
    if re.match(r"^[a-z]+=", text):
        return [Field(((text.split("=", 1)[1], a.dynamic),)), a]
    if text.startswith("-"):
        return []
    if "=@" in text or "=<" in text:
        named = re.split(r"=[@<]", text, maxsplit=1)[1]
        return [Field(((named, a.dynamic),)), a]
    return [a]
