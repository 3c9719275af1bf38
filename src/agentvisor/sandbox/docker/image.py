"""Build a small local sandbox image from this machine's own files, with no registry.

    python -I -m agentvisor.sandbox.docker.image [--tag agentvisor-sandbox:latest] [--force]

The image holds ``/bin/sh``, a handful of coreutils, ``python3`` with its standard
library (so the egress relay and ordinary scripts run), the shared libraries those
need (found with ``ldd``), the CA bundle, and ``/etc/passwd`` with an unprivileged
``agent`` user. It is imported with the Engine API (``docker import``), labelled with
a hash of its contents so an unchanged host does not rebuild it. Any other local image
works too: see docs/docker.md for what a good sandbox image contains.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import hostprogs
from ...errors import SandboxUnavailable

if TYPE_CHECKING:
    import docker

DEFAULT_TAG = "agentvisor-sandbox:latest"
HASH_LABEL = "agentvisor.image-hash"

# Programs a shell user expects; missing ones are skipped (the host decides what exists).
PROGRAMS = (
    "sh",
    "dash",
    "bash",
    "python3",
    "env",
    "cat",
    "ls",
    "echo",
    "true",
    "false",
    "sleep",
    "id",
    "mkdir",
    "rm",
    "rmdir",
    "cp",
    "mv",
    "touch",
    "head",
    "tail",
    "wc",
    "sort",
    "uniq",
    "cut",
    "tr",
    "tee",
    "uname",
    "nohup",
    "date",
    "stat",
    "chmod",
    "ln",
    "pwd",
    "readlink",
    "dirname",
    "basename",
    "printf",
    "test",
    "grep",
    "sed",
    "find",
    "xargs",
    "setsid",
    "kill",
    "ps",
    "pgrep",
    "timeout",
    "du",
    "df",
    "whoami",
    "hostname",
    "mktemp",
    "sha256sum",
    "git",
    "diff",
    "patch",
    "tar",
    "gzip",
    "make",
)
# Parts of the standard library a sandbox has no use for (GUI, self-tests, installers).
STDLIB_SKIP = {
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "config-3.11-x86_64-linux-gnu",
    "dist-packages",
    "site-packages",
}
ETC_FILES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/nsswitch.conf", "/etc/localtime")
PASSWD = (
    "root:x:0:0:root:/root:/bin/sh\n"
    "agent:x:1000:1000:agent:/home/agent:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
GROUP = "root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n"


def host_files() -> list[Path]:
    """Every host file the image needs, before shared libraries are added."""
    files: list[Path] = []
    for name in PROGRAMS:
        path = _which(name)
        if path is not None:
            files.append(path)
    python = _which("python3")
    if python is not None:
        files += _stdlib_files(python)
    files += [Path(p) for p in ETC_FILES if os.path.exists(p)]
    return files


def _which(name: str) -> Path | None:
    for directory in ("/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        path = Path(directory) / name
        if path.exists() and os.access(path, os.X_OK):
            return path
    return None


def _stdlib_files(python: Path) -> list[Path]:
    """The standard library of that interpreter (not necessarily the one running this)."""
    out = subprocess.run(
        [
            str(python),
            "-I",
            "-S",
            "-c",
            "import sysconfig; p = sysconfig.get_paths(); "
            "print(p['stdlib']); print(p['platstdlib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    files = []
    for top in dict.fromkeys(out.split()):
        for root, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if d not in STDLIB_SKIP]
            files += [Path(root) / n for n in names]
    return files


def shared_libraries(files: Iterable[Path]) -> set[Path]:
    """The libraries (and the loader) that the ELF files among ``files`` link against."""
    libs: set[Path] = set()
    elves = [f for f in files if f.is_file() and _is_elf(f)]
    # The system's ldd, never one on the caller's PATH (a workspace's .venv/bin): this
    # runs on the host, as root when the caller is (agentvisor.hostprogs).
    ldd = hostprogs.find("ldd")
    if ldd is None:
        raise SandboxUnavailable(f"ldd not found in {', '.join(hostprogs.PROGRAM_DIRS)}")
    for start in range(0, len(elves), 50):
        batch = elves[start : start + 50]
        out = subprocess.run(
            [ldd, *map(str, batch)], capture_output=True, text=True, cwd="/", check=False
        ).stdout
        for match in re.finditer(r"(/\S+\.so[^\s:]*)(?: \(0x[0-9a-f]+\))?$", out, re.M):
            libs.add(Path(match.group(1)))
    return libs


def _is_elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def build_tar(out: io.BufferedIOBase) -> str:
    """Write the root filesystem as a tar stream; returns the hash of what went in."""
    files = host_files()
    files += sorted(shared_libraries(files))
    digest = hashlib.sha256()
    with tarfile.open(fileobj=out, mode="w|") as tar:
        for top in ("bin", "lib", "lib64", "sbin"):  # the merged-/usr layout
            _add_symlink(tar, top, f"usr/{top}")
        for directory, mode in (
            ("tmp", 0o1777),
            ("var/tmp", 0o1777),
            ("run", 0o755),
            ("root", 0o700),
            ("home/agent", 0o755),
            ("proc", 0o555),
            ("sys", 0o555),
            ("dev", 0o755),
            ("etc", 0o755),
            ("usr/local/bin", 0o755),
            ("workspace", 0o755),
        ):
            _add_dir(tar, directory, mode)
        _add_text(tar, "etc/passwd", PASSWD)
        _add_text(tar, "etc/group", GROUP)
        seen: set[str] = set()
        for path in sorted(set(files)):
            for name, member_path in _members(path):
                if name in seen:
                    continue
                seen.add(name)
                info = tar.gettarinfo(member_path, arcname=name)
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                digest.update(name.encode())
                if info.isreg():
                    data = Path(member_path).read_bytes()
                    digest.update(hashlib.sha256(data).digest())
                    tar.addfile(info, io.BytesIO(data))
                else:
                    digest.update(info.linkname.encode())
                    tar.addfile(info)
    return digest.hexdigest()[:16]


def _members(path: Path) -> list[tuple[str, str]]:
    """Archive names for a host path under /usr; symlinks keep their target too."""
    real = Path(os.path.realpath(path))
    name = _usr_name(path)
    if path.is_symlink():
        return [(name, str(path)), (_usr_name(real), str(real))]
    return [(name, str(path))]


def _usr_name(path: Path) -> str:
    """The path inside the image: /bin/x and /lib/x live under /usr (merged /usr)."""
    text = str(path)
    for top in ("/bin/", "/lib/", "/lib64/", "/sbin/"):
        if text.startswith(top):
            text = "/usr" + text
    return text.lstrip("/")


def _add_dir(tar: tarfile.TarFile, name: str, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    tar.addfile(info)


def _add_symlink(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    tar.addfile(info)


def _add_text(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def ensure_image(api: docker.APIClient, tag: str = DEFAULT_TAG, *, force: bool = False) -> str:
    """Build ``tag`` unless an image with the same content hash exists; returns its id."""
    import docker.errors

    with tempfile.TemporaryFile() as tmp:
        content = build_tar(tmp)
        if not force:
            try:
                image = inspect_image(api, tag)
                if (image["Config"].get("Labels") or {}).get(HASH_LABEL) == content:
                    return str(image["Id"])
            except docker.errors.ImageNotFound:
                pass
        tmp.seek(0)
        repository, _, version = tag.rpartition(":") if ":" in tag else (tag, "", "latest")
        changes = [
            f"LABEL {HASH_LABEL}={content}",
            'CMD ["/bin/sh"]',
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "WORKDIR /workspace",
        ]
        # A generator, so the body goes out chunked as the API's import endpoint expects.
        chunks = iter(lambda: tmp.read(1 << 20), b"")
        api.import_image_from_stream(chunks, repository=repository, tag=version, changes=changes)
    return str(inspect_image(api, tag)["Id"])


def inspect_image(api: docker.APIClient, tag: str) -> dict[str, Any]:
    """The engine's description of an image (typed: the SDK's stubs leave it untyped)."""
    info: dict[str, Any] = api.inspect_image(tag)  # type: ignore[no-untyped-call, unused-ignore]
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Build agentvisor's default sandbox image "
        "from this machine's own files (no registry needed)."
    )
    parser.add_argument("--tag", default=DEFAULT_TAG, help=f"image name (default {DEFAULT_TAG})")
    parser.add_argument("--force", action="store_true", help="rebuild even when unchanged")
    args = parser.parse_args(argv)
    from docker.utils import kwargs_from_env

    import docker

    image_id = ensure_image(docker.APIClient(**kwargs_from_env()), args.tag, force=args.force)
    print(f"{args.tag} {image_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
