"""What agentvisor knows about programs and paths, as data.

The analyser uses it to see through wrappers, shells and interpreters; the categories
use it to judge. Nothing here is a list of bad command lines: it describes how
programs take their arguments and which files matter.
"""

from __future__ import annotations

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
