"""The built-in categories: the default policy, each one switchable in the config.

`CATEGORIES` is the data (name, level, what it covers); the checks in `judge` look at
what `analysis` worked out a command would do and say which categories it falls in, in
words a person understands. Hardline categories deny and nothing lifts them; the others
ask.
"""

from __future__ import annotations

from ..records import Declared


class Category(Declared):
    name: str
    hardline: bool
    summary: str

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
