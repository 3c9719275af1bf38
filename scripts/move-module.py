"""Move agentvisor modules or packages and rewrite every import that names them.

    .venv/bin/python scripts/move-module.py OLD NEW [OLD NEW ...]

OLD and NEW are dotted module names (``agentvisor.cli`` → ``agentvisor.frontends.cli``).
Files are moved with ``git mv``; imports in src/, tests/ and benchmarks/ are resolved to
absolute names, mapped, and written back in the style they had (relative stays relative,
recomputed from the file's new package). Imports of the form ``from PKG import MODULE``
where MODULE itself moved are reported, not rewritten: fix those by hand. A maintenance
tool for restructuring (no library does this for plain relative imports without a project
model: rope needs a project and rewrites far more than imports).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def module_of(path: Path) -> tuple[str, bool]:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    return ".".join(parts), is_pkg


def path_of(module: str, is_pkg: bool) -> Path:
    base = SRC.joinpath(*module.split("."))
    return base / "__init__.py" if is_pkg else base.with_suffix(".py")


def mapped(name: str, moves: list[tuple[str, str]]) -> str:
    for old, new in moves:
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return name


def resolve(node: ast.ImportFrom, package: str) -> str:
    if node.level == 0:
        return node.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def relative(target: str, package: str) -> tuple[int, str]:
    tparts, pparts = target.split("."), package.split(".")
    common = 0
    while common < min(len(tparts), len(pparts)) and tparts[common] == pparts[common]:
        common += 1
    if common == 0:
        return 0, target
    level = len(pparts) - common + 1
    return level, ".".join(tparts[common:])


def rewrite(
    path: Path, old_mod: str | None, new_mod: str | None, is_pkg: bool, moves: list[tuple[str, str]]
) -> None:
    text = path.read_text()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    lines = text.splitlines(keepends=True)
    old_pkg = None if old_mod is None else (old_mod if is_pkg else old_mod.rpartition(".")[0])
    new_pkg = None if new_mod is None else (new_mod if is_pkg else new_mod.rpartition(".")[0])
    edits: list[tuple[int, int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level and old_pkg is None:
                continue  # relative imports outside src/ (tests' helpers) never name agentvisor
            absolute = resolve(node, old_pkg or "") if node.level else (node.module or "")
            target = mapped(absolute, moves)
            for alias in node.names:
                full = f"{absolute}.{alias.name}"
                if mapped(full, moves) != f"{target}.{alias.name}":
                    print(
                        f"{path}:{node.lineno}: from {absolute} import {alias.name}: "
                        f"{alias.name} moved; fix by hand",
                        file=sys.stderr,
                    )
            if node.level:
                level, rest = relative(target, new_pkg or "")
                spec = target if level == 0 else "." * level + rest
            else:
                spec = target
            original = ("." * node.level) + (node.module or "")
            if spec == original:
                continue
            line = lines[node.lineno - 1]
            start = line.index("from", node.col_offset) + 4
            # the module spec sits between "from" and "import"
            stop = line.index(" import", start)
            edits.append((node.lineno - 1, start, stop, " " + spec))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                new = mapped(alias.name, moves)
                if new != alias.name:
                    line = lines[node.lineno - 1]
                    idx = line.index(alias.name, node.col_offset)
                    edits.append((node.lineno - 1, idx, idx + len(alias.name), new))
    for lineno, start, stop, spec in sorted(edits, reverse=True):
        line = lines[lineno]
        lines[lineno] = line[:start] + spec + line[stop:]
    new_text = "".join(lines)
    # Dotted names in strings (mock targets, -m arguments, entry points).
    for old, new in moves:
        new_text = new_text.replace(f'"{old}"', f'"{new}"').replace(f'"{old}.', f'"{new}.')
        new_text = new_text.replace(f"'{old}'", f"'{new}'").replace(f"'{old}.", f"'{new}.")
    if new_text != text:
        path.write_text(new_text)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or len(argv) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    moves = list(zip(argv[::2], argv[1::2], strict=True))
    files = [p for d in ("src", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py")]
    plan: dict[Path, tuple[str | None, str | None, bool]] = {}
    for path in files:
        if path.is_relative_to(SRC):
            mod, is_pkg = module_of(path)
            plan[path] = (mod, mapped(mod, moves), is_pkg)
        else:
            plan[path] = (None, None, False)
    for path, (old_mod, new_mod, is_pkg) in plan.items():
        rewrite(path, old_mod, new_mod, is_pkg, moves)
    for old, new in moves:
        old_path = SRC.joinpath(*old.split("."))
        new_path = SRC.joinpath(*new.split("."))
        if old_path.is_dir():
            src_p, dst_p = old_path, new_path
        else:
            src_p, dst_p = old_path.with_suffix(".py"), new_path.with_suffix(".py")
        dst_p.parent.mkdir(parents=True, exist_ok=True)
        init = dst_p.parent / "__init__.py"
        if not init.exists() and dst_p.parent != SRC:
            init.write_text("")
            subprocess.run(["git", "add", str(init)], cwd=ROOT, check=True)
        subprocess.run(["git", "mv", str(src_p), str(dst_p)], cwd=ROOT, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
