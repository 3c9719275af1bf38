"""Build agentvisor Wasm tools written in C: ``python examples/wasm/build.py DIR...``.

Each DIR holds ``main.c`` (and any other ``*.c``) and gets ``tool.wasm``. The compiler
is Zig's clang (``zig cc``) from the ``ziglang`` package on PyPI, which carries the WASI
C library, so no system toolchain is needed. ``make wasm-examples`` runs this for every
example; the tests build their probe tool the same way.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

INCLUDE = Path(__file__).resolve().parent / "include"
FLAGS = [
    "--target=wasm32-wasi",
    "-mexec-model=reactor",  # a library with exports, not a program with main()
    "-Os",
    "-s",
    "-Wl,-z,stack-size=262144",  # 256 KiB of stack, not 16 MiB: tools run in small memory
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-function",  # agentvisor.h offers helpers a tool may not use
]


def build(tool_dir: Path) -> Path:
    sources = sorted(str(p) for p in tool_dir.glob("*.c"))
    if not sources:
        raise SystemExit(f"{tool_dir}: no .c sources")
    out = tool_dir / "tool.wasm"
    command = [
        sys.executable,
        "-m",
        "ziglang",
        "cc",
        *FLAGS,
        f"-I{INCLUDE}",
        "-o",
        str(out),
        *sources,
    ]
    subprocess.run(command, check=True)
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    for arg in argv:
        print(f"built {build(Path(arg))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
