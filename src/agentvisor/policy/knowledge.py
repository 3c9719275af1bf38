"""What agentvisor knows about programs and paths, as data.

The analyser uses it to see through wrappers, shells and interpreters; the categories
use it to judge. Nothing here is a list of bad command lines: it describes how
programs take their arguments and which files matter.
"""

from __future__ import annotations

import fnmatch
import re

from ..records import Declared
from .lazyre import regex

SHELLS = frozenset(
    {
        "sh",
        "bash",
        "dash",
        "zsh",
        "ksh",
        "ksh93",
        "mksh",
        "ash",
        "yash",
        "posh",
        "rbash",
        "fish",
        "tcsh",
        "csh",
        "busybox-sh",
    }
)
# Shell options that take the next argument.
SHELL_OPTS_WITH_ARG = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


class Interpreter(Declared):
    lang: str
    code_opts: frozenset[str] = frozenset()  # options whose argument is program text
    opts_with_arg: frozenset[str] = frozenset()  # other options that take an argument
    stop_opts: frozenset[str] = frozenset()  # e.g. python -m: the rest belongs to a module
    program_is_first_arg: bool = False  # awk: the first operand is the program
    script_opts: frozenset[str] = frozenset()  # awk -f, php -f: a program file


_PY = Interpreter("python", frozenset({"-c"}), frozenset({"-W", "-X", "-Q"}), frozenset({"-m"}))
_AWK = Interpreter(
    "awk",
    frozenset({"-e", "--source"}),
    frozenset({"-v", "-F", "--assign", "--field-separator", "-i", "--include", "-l", "--load"}),
    program_is_first_arg=True,
    script_opts=frozenset({"-f", "--file"}),
)
INTERPRETERS: dict[str, Interpreter] = {
    "perl": Interpreter("perl", frozenset({"-e", "-E"}), frozenset({"-I", "-M", "-m", "-x"})),
    "node": Interpreter(
        "js",
        frozenset({"-e", "--eval", "-p", "--print"}),
        frozenset({"-r", "--require", "--import", "--loader", "-C"}),
    ),
    "nodejs": Interpreter(
        "js", frozenset({"-e", "--eval", "-p", "--print"}), frozenset({"-r", "--require"})
    ),
    "bun": Interpreter("js", frozenset({"-e", "--eval", "-p", "--print"})),
    "ruby": Interpreter("ruby", frozenset({"-e"}), frozenset({"-C", "-E", "-F", "-I", "-r"})),
    "php": Interpreter(
        "php",
        frozenset({"-r", "-B", "-R", "-E"}),
        frozenset({"-c", "-d", "-z"}),
        script_opts=frozenset({"-f"}),
    ),
    "lua": Interpreter("lua", frozenset({"-e"}), frozenset({"-l"})),
    "luajit": Interpreter("lua", frozenset({"-e"}), frozenset({"-l"})),
    "Rscript": Interpreter("r", frozenset({"-e"})),
    "awk": _AWK,
    "gawk": _AWK,
    "mawk": _AWK,
    "nawk": _AWK,
}
_PYTHON_RE = re.compile(r"^(python|pypy)[0-9.]*$")
_PERL_RE = re.compile(r"^perl[0-9.]*$")


def interpreter(program: str) -> Interpreter | None:
    if _PYTHON_RE.match(program):
        return _PY
    if _PERL_RE.match(program):
        return INTERPRETERS["perl"]
    return INTERPRETERS.get(program)


class Wrapper(Declared):
    """A program that runs another program given in its arguments; how it takes them."""

    opts_with_arg: frozenset[str] = frozenset()
    skip: int = 0  # operands before the command (timeout's DURATION, chroot's NEWROOT)
    no_command_opts: frozenset[str] = frozenset()  # options that mean nothing is run
    shell_string_opts: frozenset[str] = frozenset()  # su -c STRING: the string is shell code
    split_string_opts: frozenset[str] = frozenset()  # env -S STRING: split into a command
    assignments: bool = False  # NAME=VALUE operands before the command (env, sudo)
    default: tuple[str, ...] = ()  # what runs with no command (chroot: a shell)
    joins_to_shell: bool = False  # watch: the operands are joined and run by sh -c
    exec_opts: frozenset[str] = frozenset()  # watch -x: the operands run as they are
    clustered_arg_opts: frozenset[str] = frozenset()  # -oL, -n10: value glued to the option
    login_dash: bool = False  # su -: a lone "-" is an option
    numeric_opts: bool = False  # nice -10: "-N" is an option
    user_operand: bool = False  # su USER ARGS: ARGS go to the user's shell
    options_after_skip: bool = False  # flock FILE -c CMD: options may follow those operands


def _w(opts: str = "", **kw: object) -> Wrapper:
    return Wrapper(opts_with_arg=frozenset(opts.split()), **kw)  # type: ignore[arg-type]


WRAPPERS: dict[str, Wrapper] = {
    "sudo": _w(
        "-u -g -C -h -p -r -t -U -D -R -T --user --group --close-from --host --prompt "
        "--role --type --other-user --chdir --chroot --command-timeout",
        no_command_opts=frozenset(
            {"-l", "--list", "-v", "--validate", "-K", "-V", "--remove-timestamp", "--version"}
        ),
        assignments=True,
        default=("$SHELL",),
    ),
    "doas": _w("-u -C", default=("$SHELL",)),
    "pkexec": _w("--user", default=("$SHELL",)),
    "run0": _w(
        "-u --user -g --group -D --chdir --description --property --nice --setenv "
        "--slice --unit --machine",
        default=("$SHELL",),
    ),
    "su": _w(
        "-s --shell -g --group -G --supp-group -w --whitelist-environment",
        shell_string_opts=frozenset({"-c", "--command", "--session-command"}),
        default=("$SHELL",),
        login_dash=True,
        user_operand=True,
    ),
    "runuser": _w(
        "-u --user -s --shell -g --group -G --supp-group -w",
        shell_string_opts=frozenset({"-c", "--command", "--session-command"}),
        user_operand=True,
    ),
    "env": _w(
        "-u --unset -C --chdir -a --argv0",
        assignments=True,
        split_string_opts=frozenset({"-S", "--split-string"}),
    ),
    "nice": _w("-n --adjustment", numeric_opts=True),
    "ionice": _w(
        "-c -n --class --classdata -u --uid -P --pgid", no_command_opts=frozenset({"-p", "--pid"})
    ),
    "timeout": _w("-s --signal -k --kill-after", skip=1),
    "nohup": _w(),
    "setsid": _w(),
    "stdbuf": _w(
        "-i -o -e --input --output --error", clustered_arg_opts=frozenset({"-i", "-o", "-e"})
    ),
    "time": _w("-f --format -o --output"),
    "watch": _w(
        "-n --interval -d -g --chgexit -q --equexit -c --color -s --shell",
        joins_to_shell=True,
        exec_opts=frozenset({"-x", "--exec"}),
    ),
    "command": _w(no_command_opts=frozenset({"-v", "-V"})),
    "builtin": _w(),
    "exec": _w("-a"),
    "busybox": _w(no_command_opts=frozenset({"--list", "--help", "--list-full"})),
    "toybox": _w(),
    "chroot": _w("--userspec --groups", skip=1, default=("/bin/sh", "-i")),
    "flock": _w(
        "-w --timeout -E --conflict-exit-code",
        skip=1,
        shell_string_opts=frozenset({"-c", "--command"}),
        options_after_skip=True,
    ),
    "unshare": _w(
        "--map-user --map-group --setuid --setgid --root --wd -R -w --propagation "
        "-S -G --map-users --map-groups",
        default=("$SHELL",),
    ),
    "nsenter": _w("-t --target -S --setuid -G --setgid --wd -w -R --root", default=("$SHELL",)),
    "taskset": _w(skip=1, no_command_opts=frozenset({"-p", "--pid"})),
    "chrt": _w(skip=1, no_command_opts=frozenset({"-p", "--pid"})),
    "numactl": _w("--cpunodebind -N --membind -m --physcpubind -C --interleave -i --preferred -p"),
    "systemd-run": _w(
        "-u --unit -p --property --description --slice -E --setenv -M "
        "--machine --uid --gid --nice -H --host --working-directory "
        "--on-active --on-boot --on-calendar --timer-property"
    ),
    "strace": _w("-o -e -s -u -E -a -b -I -O -P -S -X -U", no_command_opts=frozenset({"-p"})),
    "ltrace": _w("-o -e -s -u -n -a -A -D -l -F -x", no_command_opts=frozenset({"-p"})),
    "valgrind": _w(),
    "firejail": _w(),
    "proxychains": _w("-f"),
    "proxychains4": _w("-f"),
    "torsocks": _w("-u -p -a -P"),
    "nocache": _w(),
    "eatmydata": _w(),
    "fakeroot": _w("-l --lib --faked -s -i"),
    "faketime": _w(skip=1),
    "unbuffer": _w(),
    "rlwrap": _w("-a -b -C -D -f -H -I -l -m -o -O -p -P -q -s -S -t -w -z"),
    "catchsegv": _w(),
    "dbus-launch": _w(),
    "xvfb-run": _w(
        "-n --server-num -s --server-args -f --auth-file -e --error-file -p "
        "--xauth-protocol -w --wait"
    ),
    "setarch": _w(skip=1),
    "linux32": _w(),
    "linux64": _w(),
    "prlimit": _w(no_command_opts=frozenset({"-p", "--pid"})),
    "cgexec": _w("-g"),
    "ssh-agent": _w("-a -E -P -t"),
    "script": _w(
        "-E --echo -I --log-in -O --log-out -B --log-io -T --log-timing -m --logging-format",
        shell_string_opts=frozenset({"-c", "--command"}),
    ),
    "sg": _w(skip=1, shell_string_opts=frozenset({"-c"}), joins_to_shell=True),
    "screen": _w(
        "-S -c -p -t -T -e -h -Logfile -r -x -R",
        no_command_opts=frozenset({"-ls", "-list", "-X", "-Q", "-wipe", "-v", "--version"}),
    ),
    "entr": _w(shell_string_opts=frozenset({"-s"})),
    "dtach": _w("-e -r", skip=1),
    "doas-nopass": _w(),
}

# ssh runs its operands after the destination as a shell command on the remote host.
SSH_OPTS_WITH_ARG = frozenset(
    {
        "-b",
        "-c",
        "-D",
        "-E",
        "-e",
        "-F",
        "-I",
        "-i",
        "-J",
        "-L",
        "-l",
        "-m",
        "-O",
        "-o",
        "-p",
        "-Q",
        "-R",
        "-S",
        "-W",
        "-w",
        "-B",
    }
)
XARGS_OPTS_WITH_ARG = frozenset(
    {
        "-a",
        "--arg-file",
        "-d",
        "--delimiter",
        "-E",
        "-I",
        "-L",
        "-n",
        "--max-args",
        "-P",
        "--max-procs",
        "-s",
        "--max-chars",
        "--process-slot-var",
        "--max-lines",
        "--replace",
    }
)
PARALLEL_OPTS_WITH_ARG = frozenset(
    {
        *("-j", "--jobs", "-S", "--sshlogin", "-a", "--arg-file", "-d", "--delimiter", "-I"),
        *("-N", "-n", "--max-args", "--colsep", "-C", "--results", "--joblog", "--tmpdir"),
        *("--workdir", "--wd", "-E", "--env", "--delay", "--timeout", "--retries", "--tag"),
    }
)
# Options naming a file the program writes (besides its operands).
WRITE_OPTS: dict[str, frozenset[str]] = {
    "find": frozenset({"-fprint", "-fprint0", "-fprintf", "-fls"}),
    "sort": frozenset({"-o", "--output"}),
    "tar": frozenset({"-f", "--file"}),
}
FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})

# Programs whose output is a download (when not told to write it to a file).
DOWNLOADERS = frozenset(
    {
        "curl",
        "wget",
        "fetch",
        "aria2c",
        "http",
        "https",
        "xh",
        "xhs",
        "curlie",
        "lwp-request",
        "GET",
        "lynx",
        "w3m",
        "links",
        "elinks",
        "axel",
        "httpie",
    }
)
# Filters that turn data into other data: what comes out of them is not what went in.
DECODERS = frozenset(
    {
        "base64",
        "base32",
        "basenc",
        "xxd",
        "uudecode",
        "openssl",
        "gunzip",
        "zcat",
        "gzip",
        "bzip2",
        "bzcat",
        "xz",
        "xzcat",
        "unxz",
        "zstd",
        "zstdcat",
        "rev",
        "tr",
        "od",
        "hexdump",
        "iconv",
        "gpg",
        "sed",
        "awk",
        "perl",
        "python",
        "python3",
        "unzip",
        "funzip",
        "lzma",
        "brotli",
    }
)
# Programs that send their input or files to another host.
NET_SENDERS = frozenset(
    {
        "nc",
        "ncat",
        "netcat",
        "socat",
        "telnet",
        "openssl",
        "ssh",
        "sendmail",
        "mail",
        "mailx",
        "mutt",
        "ftp",
        "tftp",
        "smbclient",
    }
)
REMOTE_COPY = frozenset({"scp", "rsync", "sftp", "rclone"})
SCANNERS = frozenset(
    {
        "nmap",
        "masscan",
        "zmap",
        "arp-scan",
        "fping",
        "nbtscan",
        "unicornscan",
        "hping3",
        "nping",
        "rustscan",
        "naabu",
        "zgrab",
        "zgrab2",
        "netdiscover",
    }
)
NET_CLIENTS = (
    DOWNLOADERS
    | NET_SENDERS
    | REMOTE_COPY
    | SCANNERS
    | frozenset(
        {
            "ping",
            "ping6",
            "traceroute",
            "tracepath",
            "mtr",
            "dig",
            "nslookup",
            "host",
            "grpcurl",
            "websocat",
            "redis-cli",
            "psql",
            "mysql",
            "mongosh",
            "mongo",
            "ab",
            "wrk",
            "hey",
            "siege",
            "ws",
            "wscat",
            "arping",
            "git",
            "pandoc",
            "yt-dlp",
        }
    )
)
PRIVILEGE = frozenset(
    {"sudo", "su", "doas", "pkexec", "run0", "sudoedit", "runuser", "machinectl", "newgrp", "sg"}
)
POWER_VERBS = frozenset({"poweroff", "reboot", "halt", "kexec", "soft-reboot"})
POWER_RUNLEVELS = frozenset({"0", "6"})
# Programs that create, wipe or discard filesystems on the device they are given.
DISK_WRITERS = re.compile(
    r"^(mkfs(\..+)?|mke2fs|mkswap|mkntfs|mkdosfs|mkexfatfs|mkfs_\w+|"
    r"wipefs|blkdiscard|shred|badblocks|sgdisk|sfdisk|cryptsetup|"
    r"hdparm|zpool|fdisk|parted|gdisk|cfdisk|nvme|sg_format)$"
)
# Of these, the ones that only change something with certain options or verbs.
DISK_WRITE_WHEN = {
    "badblocks": frozenset({"-w"}),
    "sgdisk": frozenset(
        {"-Z", "--zap-all", "-o", "--clear", "-z", "--zap", "-n", "--new", "-d", "--delete"}
    ),
    "sfdisk": frozenset({"--delete", "--wipe", "-w", "--wipe-partitions", "-"}),
    "cryptsetup": frozenset({"luksFormat", "erase", "luksErase", "format", "reencrypt"}),
    "hdparm": frozenset(
        {
            "--security-erase",
            "--security-erase-enhanced",
            "--trim-sector-ranges",
            "--write-sector",
            "--fwdownload",
        }
    ),
    "zpool": frozenset({"create", "destroy", "labelclear"}),
    "fdisk": frozenset({"*"}),
    "parted": frozenset({"mklabel", "mkpart", "rm", "resizepart", "mkfs"}),
    "gdisk": frozenset({"*"}),
    "cfdisk": frozenset({"*"}),
    "nvme": frozenset({"format", "sanitize", "write-zeroes"}),
}
# Listing a table changes nothing.
DISK_READ_ONLY_OPTS = frozenset(
    {"-l", "--list", "-p", "--print", "--help", "-h", "-V", "--version", "-s", "--show", "print"}
)

_BLOCK_RE = (
    r"^/dev/(sd[a-z]+\d*|hd[a-z]+\d*|vd[a-z]+\d*|xvd[a-z]+\d*|nvme\d+(n\d+)?(p\d+)?|"
    r"mmcblk\d+(p\d+|boot\d+)?|loop\d+|dm-\d+|md\d+|md/.+|sr\d+|nbd\d+(p\d+)?|zram\d+|"
    r"rbd\d+|mtdblock\d+|mtd\d+|ram\d+|bcache\d+|root|mapper/.+|disk/.+|"
    r"(?!(pts|shm|fd|mqueue|hugepages|net|snd|input|dri|char|cpu|bus|usb|tty|vfio|v4l|"
    r"serial|block)/)[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)$"
)


def is_block_device(path: str) -> bool:
    return bool(regex(_BLOCK_RE).match(path))


# Parents of home directories: a direct child of these is someone's home.
HOME_PARENTS = frozenset({"/home", "/Users"})

# Files whose contents are key material or credentials (gitignore patterns; ``~/`` is the
# home directory, a leading ``/`` the filesystem root, anything else matches in any
# directory). A ``!`` line exempts what carries no secret.
CREDENTIAL_PATTERNS: tuple[str, ...] = (
    "~/.ssh/",
    "!~/.ssh/*.pub",
    "!~/.ssh/known_hosts*",
    "!~/.ssh/config",
    "!~/.ssh/authorized_keys*",
    "~/.aws/",
    "~/.gnupg/",
    "~/.kube/",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.config/gh/hosts.yml",
    "~/.config/gcloud/",
    "~/.azure/",
    "~/.npmrc",
    "~/.pypirc",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.vault-token",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.cargo/credentials*",
    "~/.gem/credentials",
    "~/.local/share/keyrings/",
    "~/.password-store/",
    "~/.config/agentvisor/",
    "~/.local/state/agentvisor/",
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d/",
    "/etc/ssh/*_key",
    "/etc/ssl/private/",
    "/proc/*/environ",
    "/proc/*/mem",
    "/var/run/secrets/",
    "/run/secrets/",
    ".env",
    ".env.*",
    ".envrc",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "id_ecdsa_sk",
    "id_ed25519_sk",
    "*.p12",
    "*.pfx",
)

# Files that make someone run code later: shell start-up files, keys that let someone
# in, schedulers, service units, PATH directories, git's code-running config, editors'
# start-up files, and agentvisor's own policy.
PERSISTENCE_PATTERNS: tuple[str, ...] = (
    "~/.bashrc",
    "~/.bash_profile",
    "~/.bash_login",
    "~/.bash_logout",
    "~/.profile",
    "~/.zshrc",
    "~/.zprofile",
    "~/.zshenv",
    "~/.zlogin",
    "~/.zlogout",
    "~/.kshrc",
    "~/.mkshrc",
    "~/.cshrc",
    "~/.tcshrc",
    "~/.config/fish/",
    "~/.xinitrc",
    "~/.xprofile",
    "~/.xsession",
    "~/.xsessionrc",
    "~/.pam_environment",
    "~/.config/environment.d/",
    "~/.config/autostart/",
    "~/.config/systemd/",
    "~/.local/share/systemd/",
    "~/.ssh/authorized_keys*",
    "~/.ssh/rc",
    "~/.ssh/config",
    "~/.ssh/environment",
    "~/.gitconfig",
    "~/.config/git/",
    "~/.vimrc",
    "~/.config/nvim/",
    "~/.emacs",
    "~/.emacs.d/init.el",
    "~/.local/bin/",
    "~/bin/",
    "~/Library/LaunchAgents/",
    "~/.config/agentvisor/",
    "/etc/profile",
    "/etc/profile.d/",
    "/etc/bash.bashrc",
    "/etc/bashrc",
    "/etc/zsh/",
    "/etc/zshrc",
    "/etc/environment",
    "/etc/cron*",
    "/etc/crontab",
    "/etc/anacrontab",
    "/var/spool/cron/",
    "/etc/systemd/",
    "/lib/systemd/",
    "/usr/lib/systemd/",
    "/etc/init.d/",
    "/etc/rc.local",
    "/etc/ld.so.preload",
    "/etc/sudoers",
    "/etc/sudoers.d/",
    "/etc/passwd",
    "/etc/shadow",
    "/etc/group",
    "/etc/pam.d/",
    "/etc/security/",
    "/etc/udev/rules.d/",
    "/etc/xdg/autostart/",
    "/etc/apt/apt.conf.d/",
    "/etc/update-motd.d/",
    "/Library/LaunchAgents/",
    "/Library/LaunchDaemons/",
    # In the workspace: files the host's tools run code from later (see protected.py).
    ".git/hooks/",
    ".git/config",
    ".git/info/attributes",
    ".gitmodules",
    ".envrc",
    ".vscode/settings.json",
    ".vscode/tasks.json",
    ".idea/workspace.xml",
    "agentvisor.yaml",
)

# git config keys whose value is a command git runs later (lower-case; * is one part).
GIT_CODE_KEYS: tuple[str, ...] = (
    "core.hookspath",
    "core.fsmonitor",
    "core.pager",
    "core.editor",
    "core.sshcommand",
    "core.askpass",
    "core.gitproxy",
    "core.worktree",
    "sequence.editor",
    "diff.external",
    "diff.*.textconv",
    "diff.*.command",
    "merge.*.driver",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "credential.helper",
    "credential.*.helper",
    "gpg.program",
    "gpg.*.program",
    "pager.*",
    "uploadpack.packobjectshook",
    "remote.*.uploadpack",
    "remote.*.receivepack",
    "include.path",
    "includeif.*.path",
    "web.browser",
    "browser.*.cmd",
    "man.*.cmd",
    "alias.*",
    "init.templatedir",
)

# Options whose value is a key or certificate the program uses without printing it.
KEY_OPTS: dict[str, frozenset[str]] = {
    "ssh": frozenset({"-i"}),
    "scp": frozenset({"-i"}),
    "sftp": frozenset({"-i"}),
    "rsync": frozenset(),
    "ssh-add": frozenset(),
    "curl": frozenset({"--cert", "-E", "--key"}),
}
# Commands that name a path without reading what is in it.
METADATA_ONLY = frozenset(
    {
        "ls",
        "stat",
        "test",
        "[",
        "[[",
        "file",
        "mkdir",
        "chmod",
        "chown",
        "chgrp",
        "touch",
        "rm",
        "rmdir",
        "realpath",
        "readlink",
        "dirname",
        "basename",
        "which",
        "echo",
        "printf",
        "du",
        "cd",
        "pushd",
        "type",
        "command",
        "true",
        "false",
        "exa",
        "eza",
        "lsd",
        "tree",
        "getfacl",
        "lsattr",
        "namei",
        "ssh-keygen",
        "ssh-add",
        "find",
        "fd",
    }
)

# git subcommands that run a command given in their arguments are not wrappers we unwrap;
# git -c KEY=VALUE is one-off and runs inside the sandbox like the command itself.
GIT_GLOBAL_OPTS_WITH_ARG = frozenset(
    {
        "-C",
        "-c",
        "--git-dir",
        "--work-tree",
        "--namespace",
        "--exec-path",
        "--config-env",
        "--super-prefix",
    }
)


# --- tools that act outside the sandbox --------------------------------------------------


class Destroys(Declared):
    """A destructive verb of an ops tool: the operand words that start the command (globs
    allowed: ``delete-*``; a leading ``...``: after up to three other words, as in
    ``gcloud compute instances delete``) and what it destroys, in words."""

    verbs: tuple[str, ...]
    what: str


def _d(verbs: str, what: str) -> Destroys:
    return Destroys(tuple(verbs.split()), what)


# Container engines, clusters, clouds and infrastructure tools reach what they change
# through a socket, an API or a network: the sandbox does not contain it.
OPS: dict[str, tuple[Destroys, ...]] = {
    "docker": (
        _d("rm", "removes containers"),
        _d("rmi", "removes images"),
        _d("kill", "kills containers"),
        _d("container rm", "removes containers"),
        _d("container prune", "removes all stopped containers"),
        _d("image rm", "removes images"),
        _d("image prune", "removes images"),
        _d("volume rm", "removes volumes and the data in them"),
        _d("volume prune", "removes volumes and the data in them"),
        _d("network rm", "removes networks"),
        _d("network prune", "removes networks"),
        _d("system prune", "removes containers, networks, images (and volumes with --volumes)"),
        _d("compose down", "removes the compose project's containers and networks"),
        _d("compose rm", "removes the compose project's containers"),
        _d("stack rm", "removes a swarm stack"),
        _d("service rm", "removes swarm services"),
        _d("secret rm", "removes swarm secrets"),
    ),
    "kubectl": (
        _d("delete", "deletes Kubernetes resources"),
        _d("drain", "evicts every pod from a node"),
        _d("replace --force", "deletes and re-creates Kubernetes resources"),
        _d("scale", "changes the number of running replicas"),
    ),
    "helm": (
        _d("uninstall", "uninstalls a Helm release"),
        _d("delete", "uninstalls a Helm release"),
        _d("rollback", "rolls a Helm release back"),
    ),
    "aws": (
        _d("s3 rb", "removes S3 buckets"),
        _d("s3 rm", "deletes S3 objects"),
        _d("s3api delete-*", "deletes S3 resources"),
        _d("* delete-*", "deletes AWS resources"),
        _d("* terminate-*", "terminates AWS resources"),
        _d("* remove-*", "removes AWS resources"),
        _d("* deregister-*", "deregisters AWS resources"),
        _d("* purge-*", "purges AWS resources"),
    ),
    "gcloud": (_d("... delete", "deletes Google Cloud resources"),),
    "gsutil": (
        _d("rm", "deletes Cloud Storage objects"),
        _d("rb", "removes Cloud Storage buckets"),
    ),
    "az": (_d("... delete", "deletes Azure resources"),),
    "doctl": (_d("... delete", "deletes DigitalOcean resources"),),
    "terraform": (_d("destroy", "destroys the managed infrastructure"),),
    "tofu": (_d("destroy", "destroys the managed infrastructure"),),
    "pulumi": (_d("destroy", "destroys the stack's resources"), _d("stack rm", "removes a stack")),
    "heroku": (_d("apps:destroy", "destroys a Heroku app"),),
    "flyctl": (_d("destroy", "destroys an app"), _d("apps destroy", "destroys an app")),
}
OPS["podman"] = OPS["nerdctl"] = OPS["docker"]
OPS["docker-compose"] = OPS["podman-compose"] = (
    _d("down", "removes the compose project's containers and networks"),
    _d("rm", "removes the compose project's containers"),
)
OPS["oc"] = OPS["kubectl"]
# Options of these tools that take a value (so the value is not read as a verb).
OPS_OPTS_WITH_ARG = frozenset(
    {
        *("-n", "--namespace", "--context", "--kubeconfig", "-c", "--cluster", "-H", "--host"),
        *("--profile", "--region", "--project", "-f", "--file", "-p", "--project-name"),
        *("--output", "-o", "--subscription", "-g", "--resource-group", "--config"),
    }
)
# Flags that turn a constructive verb into a destructive one.
OPS_DESTROY_FLAGS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "terraform": (("apply", "-destroy", "destroys the managed infrastructure"),),
    "tofu": (("apply", "-destroy", "destroys the managed infrastructure"),),
}
# Database clients: options whose value is a query, and what in a query destroys data.
QUERY_OPTS: dict[str, frozenset[str]] = {
    "psql": frozenset({"-c", "--command"}),
    "mysql": frozenset({"-e", "--execute"}),
    "mariadb": frozenset({"-e", "--execute"}),
    "sqlcmd": frozenset({"-Q", "-q"}),
    "clickhouse-client": frozenset({"-q", "--query"}),
    "cqlsh": frozenset({"-e", "--execute"}),
    "mongosh": frozenset({"--eval"}),
    "mongo": frozenset({"--eval"}),
    "redis-cli": frozenset(),  # the command is the operands
    "valkey-cli": frozenset(),
}
DESTRUCTIVE_QUERY = (
    r"\b(drop\s+(database|schema|table|index|view|user|role|keyspace|collection)\b"
    r"|truncate\b|delete\s+from\b|flushall\b|flushdb\b|dropdatabase\s*\("
    r"|\.drop\s*\(|\.deletemany\s*\(|\.remove\s*\(|unlink\b|^\s*del\b)"
)


# --- programs that run a command given in an argument -----------------------------------


class CommandArg(Declared):
    """Where a program takes a command line it will run, and how it is written there.

    ``names``: options (``-P``, ``--pager``; a value may follow, or be glued: ``-oX=Y``,
    ``--pager=X``), ``NAME=`` operands (make's ``SHELL=``), ``+`` (an argument ``+CMD``),
    ``@first`` (the first operand, when none of the options is given), ``@stdin`` (what
    the program reads), ``@operands`` (the operands after one of ``keys``, a subcommand),
    ``@any`` (every argument). ``form`` names how the command sits in the value (see
    `analysis.commandargs.FORMS`); ``keys`` are the keys of ``keyed`` values (globs,
    lower case) or the subcommands of ``@operands``."""

    names: frozenset[str]
    form: str = "shell"
    keys: tuple[str, ...] = ()
    opts_with_arg: frozenset[str] = frozenset()


def _c(names: str, form: str = "shell", keys: str = "", opts: str = "") -> CommandArg:
    return CommandArg(frozenset(names.split()), form, tuple(keys.split()), frozenset(opts.split()))


_VIM = (_c("-c --cmd +", "bang"),)
_SSH = (_c("-o", "keyed", "proxycommand localcommand knownhostscommand"),)
_APT = (_c("-o --option", "keyed", "*pre-invoke* *post-invoke* *pre-install-pkgs*"),)
COMMAND_ARGS: dict[str, tuple[CommandArg, ...]] = {
    "sed": (_c("-e --expression @first", "sed"),),
    "tar": (
        _c(
            "--to-command -I --use-compress-program --info-script -F --new-volume-script "
            "--rsh-command"
        ),
        _c("--checkpoint-action", "keyed", "exec"),
    ),
    "zip": (_c("-TT --unzip-command"),),
    "git": (
        _c("-c --config", "gitconfig"),
        _c("--config-env", "gitconfig-env"),
        _c("@any", "ext-url"),
    ),
    "vim": _VIM,
    "vi": _VIM,
    "nvim": _VIM,
    "view": _VIM,
    "vimdiff": _VIM,
    "ex": (*_VIM, _c("@stdin", "bang-lines")),
    "ed": (_c("@stdin", "bang-lines"),),
    "less": (_c("+", "bang"),),
    "more": (_c("+", "bang"),),
    "gdb": (_c("-ex -iex --eval-command --init-eval-command", "bang"),),
    "emacs": (_c("--eval -eval", "lisp"),),
    "man": (_c("-P --pager"),),
    "ssh": _SSH,
    "scp": _SSH,
    "sftp": _SSH,
    "rsync": (_c("-e --rsh"),),
    "make": (
        _c("SHELL="),
        _c("--eval", "make-eval"),
        _c("-f --file --makefile", "makefile"),
    ),
    "expect": (_c("-c", "expect"),),
    "tmux": (
        _c(
            "@operands",
            keys="new-session new new-window neww split-window splitw run-shell run "
            "respawn-pane respawnp respawn-window respawnw display-popup popup",
            opts="-c -e -F -n -s -t -x -y -l -w -T",
        ),
    ),
    "at": (_c("@stdin"), _c("-f", "script")),
    "batch": (_c("@stdin"), _c("-f", "script")),
    "crontab": (_c("@stdin", "crontab"),),
    "apt-get": _APT,
    "apt": _APT,
    "aptitude": _APT,
}
COMMAND_ARGS["gsed"] = COMMAND_ARGS["sed"]
COMMAND_ARGS["gtar"] = COMMAND_ARGS["bsdtar"] = COMMAND_ARGS["tar"]
COMMAND_ARGS["gmake"] = COMMAND_ARGS["make"]
# Programs a glob in a command's name may stand for (`/bin/r? -rf /` runs rm): what the
# checks know as dangerous. The command is judged as each of them it can match.
GLOB_CANDIDATES = (
    *("rm", "mv", "dd", "shred", "chmod", "chown", "chgrp", "mkfs", "wipefs", "truncate"),
    *("sh", "bash", "dash", "zsh", "python", "python3", "perl", "ruby", "node", "php"),
    *("curl", "wget", "nc", "ncat", "socat", "ssh", "scp", "sudo", "su", "kill", "pkill"),
    *("shutdown", "reboot", "poweroff", "halt", "crontab", "find", "xargs", "eval", "tar"),
)
# Environment variables whose value is a command some program runs.
COMMAND_ENV = frozenset(
    {
        *("GIT_SSH_COMMAND", "GIT_SSH", "GIT_PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR"),
        *("GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "GIT_PROXY_COMMAND", "SSH_ASKPASS"),
        *("SUDO_ASKPASS", "PAGER", "MANPAGER", "SYSTEMD_PAGER", "EDITOR", "VISUAL", "FCEDIT"),
        *("LESSOPEN", "LESSCLOSE", "BROWSER", "PROMPT_COMMAND", "BASH_ENV", "ENV", "RSYNC_RSH"),
    }
)


def git_code_key(key: str, value: str) -> bool:
    """Does git config ``key`` (set to ``value``) name a command git will run?"""
    parts = key.split(".")
    if len(parts) < 2:
        return False
    lowered = ".".join([parts[0].lower(), *parts[1:-1], parts[-1].lower()])
    for pattern in GIT_CODE_KEYS:
        p_parts = pattern.split(".")
        if len(p_parts) != len(lowered.split(".")) and not (
            len(p_parts) == 2 and p_parts[1] == "*"
        ):
            continue
        if fnmatch.fnmatchcase(lowered.lower(), pattern):
            return not pattern.startswith("alias.") or value.lstrip().startswith("!")
    return False


# --- covering tracks ---------------------------------------------------------------------

# Logs and shell histories (gitignore patterns, as the other path lists): rewriting,
# truncating or deleting them hides what was done.
TRACK_PATTERNS: tuple[str, ...] = (
    "/var/log/**",
    "/var/log",
    "/var/run/utmp",
    "/run/utmp",
    "/var/account/**",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.zhistory",
    "~/.history",
    "~/.sh_history",
    "~/.ash_history",
    "~/.local/share/fish/fish_history",
    "~/.python_history",
    "~/.node_repl_history",
    "~/.mysql_history",
    "~/.psql_history",
    "~/.sqlite_history",
    "~/.rediscli_history",
    "~/.lesshst",
    "~/.viminfo",
)
# Programs that delete the files they are given (not only recursively).
DELETERS = frozenset({"rm", "shred", "unlink", "srm", "wipe", "truncate"})
# Commands that switch history off or erase it: program → arguments that do it.
TRACK_COMMANDS: dict[str, tuple[str, ...]] = {
    "history": ("-c", "-w", "-d"),
    "set": ("+o",),
}
# Variables that stop the shell from keeping its history: HISTFILE set elsewhere or unset,
# the sizes set to 0 or unset.
HISTORY_VARS = frozenset({"HISTFILE", "HISTSIZE", "HISTFILESIZE", "SAVEHIST"})
# What in a command substitution picks a disk (a write there is to a block device).
DEVICE_HINT = r"/dev/|\blsblk\b|\bfindmnt\b|\bblkid\b|\bfdisk\b|\bparted\b|\bdf\b|\bmount\b"


# --- exfiltration by code and by URL ---------------------------------------------------

# Inline interpreter code that talks to the network, and code that reads the environment
# or files: together they send something out.
CODE_SENDS = (
    r"urllib\.request|urlopen|\brequests\.\w+\(|http\.client|\bhttpx\.|aiohttp|urllib3"
    r"|socket\.(create_connection|socket)|\.connect\(|\bfetch\(|XMLHttpRequest|axios"
    r"|require\(\s*['\"](https?|net|dgram|tls|axios|node-fetch)['\"]\s*\)"
    r"|Net::HTTP|LWP::|HTTP::Tiny|IO::Socket|\bopen-uri|URI\.open|\bcurl_exec|fsockopen"
    r"|TCPSocket|Socket\.new|file_get_contents\(\s*['\"]https?:|\bwget\b|\bcurl\b"
)
CODE_READS = (
    r"os\.environ|getenv|process\.env|\$ENV\{|\bENV(\[|\.)|%ENV|\bopen\(|readFileSync|readFile\("
    r"|File\.read|IO\.read|file_get_contents|\bslurp|\.ssh\b|\.aws\b|\.env\b|id_rsa"
    r"|/etc/(shadow|passwd)|\.netrc|\.git-credentials|\.kube/config"
    # or hands the process to the other end: a reverse shell
    r"|dup2|pty\.spawn|/bin/(ba)?sh\b|child_process|subprocess"
)
# A variable whose name says it holds a secret.
SECRET_VAR = (
    r"\$\{?[A-Za-z0-9_]*(TOKEN|SECRET|PASSWORD|PASSWD|PASS|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY"
    r"|CREDENTIALS?|AUTH|COOKIE|SESSION)[A-Za-z0-9_]*\}?"
)
# What in a command substitution reads secrets or the environment.
SECRET_SOURCE = (
    r"\b(env|printenv|set|export)\b|\.ssh|\.aws|\.env\b|id_rsa|\.netrc|\.git-credentials"
    r"|/etc/(shadow|passwd)|history|\.kube|credentials|\bcat\b"
)
# Clients that put their operands in a request (an argument there is a URL).
URL_CLIENTS = frozenset({"curl", "wget", "http", "https", "xh", "xhs", "httpie", "curlie"})
# Container options that give the container the host: its root or system directories
# mounted, the engine's socket, privileges or the host's namespaces.
CONTAINER_RUN_VERBS = frozenset({"run", "create", "exec"})
CONTAINER_HOST_VOLUMES = (
    r"^(/|/etc|/root|/home|/usr|/var|/boot|/dev|/proc|/sys|/run|~)(/[^:]*)?"
    r"(?<!/project):|docker\.sock|podman\.sock"
)
CONTAINER_HOST_FLAGS = frozenset(
    {"--privileged", "--pid=host", "--ipc=host", "--uts=host", "--userns=host"}
)
# Options of network programs whose value is not a destination (a count, a time, a port,
# a file, a forwarding spec): `ping -i 0.5` does not reach 0.0.0.5, `ssh -L 8080:localhost:80`
# does not reach this machine's loopback.
NET_VALUE_OPTS: dict[str, frozenset[str]] = {
    "ssh": SSH_OPTS_WITH_ARG - {"-J", "-W"},
    "scp": frozenset({"-P", "-i", "-o", "-F", "-l", "-S", "-c", "-D"}),
    "sftp": frozenset({"-P", "-i", "-o", "-F", "-l", "-S", "-c", "-D", "-b", "-B", "-R"}),
    "ping": frozenset({"-c", "-i", "-W", "-w", "-s", "-t", "-l", "-Q", "-p", "-M", "-S"}),
    "ping6": frozenset({"-c", "-i", "-W", "-w", "-s", "-t", "-l", "-Q", "-p"}),
    "nc": frozenset({"-w", "-p", "-q", "-i", "-s", "-T", "-O", "-I"}),
    "curl": frozenset(
        {
            *("-m", "--max-time", "--connect-timeout", "-o", "--output", "-w", "--write-out"),
            *("-r", "--range", "--limit-rate", "-u", "--user", "-H", "--header", "-A"),
            *("--user-agent", "-e", "--referer", "-X", "--request", "--retry", "-C"),
            *("-y", "-Y", "-z", "-b", "--cookie", "-c", "--cookie-jar", "--cacert", "-E"),
            *("--cert", "--key", "-K", "--config"),
        }
    ),
    "wget": frozenset({"-t", "--tries", "-T", "--timeout", "-O", "-o", "-P", "-U", "-w"}),
    "git": frozenset({"-n", "-L", "--depth", "-C", "-c", "--max-count", "-m", "-S", "-G"}),
}
