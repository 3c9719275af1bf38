"""Inline interpreter code (``python -c``, ``perl -e``, ``node -e``, ``ruby -e``,
``php -r``, awk programs, ...): does it start processes, delete files or run code
built at run time? Python is parsed with `ast`; the others are scanned as tokens with
their string literals set aside, so a word inside a string is not taken for a call.

Literal command strings handed to a spawning call are returned so the shell analyser
can judge them like any other command line.
"""

from __future__ import annotations

import ast
import re

from .facts import CodeFacts

# Python: calls by their full dotted name once imports are resolved.
_PY_SPAWN = re.compile(
    r"^(os\.(system|popen|exec\w*|spawn\w*|posix_spawn\w*|fork|forkpty)|"
    r"subprocess\.\w+|pty\.spawn|commands\.\w+|"
    r"asyncio\.create_subprocess_(exec|shell)|multiprocessing\.\w+)$"
)
_PY_DELETE = re.compile(r"^(os\.(remove|unlink|rmdir|removedirs|truncate)|shutil\.(rmtree|move))$")
_PY_DYNAMIC = re.compile(
    r"^(eval|exec|compile|__import__|importlib\.\w+|ctypes\.\w+|"
    r"marshal\.loads|pickle\.loads?|runpy\.\w+|code\.\w+)$"
)
# Method names that spawn or delete whatever object they are called on.
_PY_REFLECTION = frozenset({"getattr", "globals", "locals", "vars", "__builtins__"})
_PY_SPAWN_METHODS = frozenset(
    {
        "system",
        "popen",
        "Popen",
        "check_output",
        "check_call",
        "spawn",
        "execv",
        "execvp",
        "execve",
        "execl",
        "execlp",
        "fork",
        "getoutput",
        "getstatusoutput",
    }
)
_PY_DELETE_METHODS = frozenset({"unlink", "rmdir", "rmtree", "removedirs"})
_SHELL_TAKING = re.compile(
    r"^(os\.(system|popen)|commands\.\w+|subprocess\.(getoutput|"
    r"getstatusoutput)|asyncio\.create_subprocess_shell)$"
)


def analyze_code(lang: str, code: str) -> CodeFacts:
    if lang == "python":
        return _python(code)
    return _TOKEN_SCANNERS.get(lang, _generic)(code)


# --- python ---------------------------------------------------------------------------


def _python(code: str) -> CodeFacts:
    facts = CodeFacts()
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        facts.unparsed = True
        return facts
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        dotted = _dotted(node.func, names)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if (dotted and _PY_SPAWN.match(dotted)) or method in _PY_SPAWN_METHODS:
            facts.spawns.append(dotted or method)
            _python_command(node, dotted or method, facts)
        elif (dotted and _PY_DELETE.match(dotted)) or method in _PY_DELETE_METHODS:
            facts.deletes.append(dotted or method)
            target = _literal_str(node.args[0]) if node.args else None
            if target is not None:
                facts.delete_targets.append((target, "rmtree" in (dotted or method)))
        elif (dotted and _PY_DYNAMIC.match(dotted)) or dotted in _PY_REFLECTION:
            facts.dynamic.append(dotted)
    return facts


def _dotted(node: ast.expr, names: dict[str, str]) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(names.get(node.id, node.id))
    elif isinstance(node, ast.Call) and _dotted(node.func, names) == "__import__" and node.args:
        module = _literal_str(node.args[0])
        if module is None:
            return ""
        parts.append(module)
    else:
        return ""
    return ".".join(reversed(parts))


def _literal_str(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _python_command(call: ast.Call, name: str, facts: CodeFacts) -> None:
    """The command a spawning call runs, when it is written out literally."""
    if not call.args:
        return
    first = call.args[0]
    shell = any(
        k.arg == "shell" and isinstance(k.value, ast.Constant) and k.value.value
        for k in call.keywords
    )
    text = _literal_str(first)
    if text is not None:
        if _SHELL_TAKING.match(name) or shell or name in ("system", "popen"):
            facts.shell_strings.append(text)
        else:
            facts.argvs.append([text])
    elif isinstance(first, (ast.List, ast.Tuple)):
        items = [_literal_str(e) for e in first.elts]
        if items and all(i is not None for i in items):
            facts.argvs.append([i for i in items if i is not None])
    elif name.startswith("os.exec") or name.startswith("os.spawn"):
        items = [_literal_str(a) for a in call.args[1:]]
        if items and all(i is not None for i in items):
            facts.argvs.append([i for i in items if i is not None])


# --- other languages: tokens outside string literals ----------------------------------

_STRING_RE = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"|`(?:\\.|[^`\\])*`", re.S)


def _mask_strings(code: str) -> tuple[str, list[tuple[int, int, str, str]]]:
    """Code with string contents blanked, and the strings (start, end, quote, body)."""
    strings: list[tuple[int, int, str, str]] = []
    out: list[str] = []
    pos = 0
    for m in _STRING_RE.finditer(code):
        out.append(code[pos : m.start()])
        quote = m.group()[0]
        body = m.group()[1:-1]
        strings.append((m.start(), m.end(), quote, body))
        out.append(quote + " " * len(body) + quote)
        pos = m.end()
    out.append(code[pos:])
    return "".join(out), strings


def _unescape(body: str, quote: str) -> str:
    if quote == "'":
        return body.replace("\\'", "'").replace("\\\\", "\\")
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def _strings_after(pos: int, code: str, strings: list[tuple[int, int, str, str]]) -> list[str]:
    """String literals right after ``pos`` (after an optional ``(``), comma-separated."""
    rest = code[pos:]
    m = re.match(r"\s*\(?\s*", rest)
    cursor = pos + (m.end() if m else 0)
    found: list[str] = []
    for start, end, quote, body in strings:
        if start < cursor:
            continue
        if start != cursor:
            break
        if ("$" in body and quote == '"') or "#{" in body or "${" in body:
            return []  # interpolated: not a literal command
        found.append(_unescape(body, quote))
        sep = re.match(r"\s*,\s*", code[end:])
        if not sep:
            break
        cursor = end + sep.end()
    return found


def _scan(
    code: str, spawn: str, delete: str, dynamic: str, backticks: bool, recursive_delete: str = ""
) -> CodeFacts:
    facts = CodeFacts()
    masked, strings = _mask_strings(code)
    for pattern, bucket in (
        (spawn, facts.spawns),
        (delete, facts.deletes),
        (dynamic, facts.dynamic),
    ):
        if not pattern:
            continue
        for m in re.finditer(pattern, masked):
            bucket.append(m.group().strip())
            args = _strings_after(m.end(), code, strings)
            if bucket is facts.spawns and args:
                if len(args) == 1:
                    facts.shell_strings.append(args[0])
                else:
                    facts.argvs.append(args)
            if bucket is facts.deletes and args:
                recursive = bool(recursive_delete and re.search(recursive_delete, m.group()))
                facts.delete_targets.append((args[0], recursive))
    if backticks:
        for _start, _end, quote, body in strings:
            if quote == "`":
                facts.spawns.append("`...`")
                if "$" not in body and "#{" not in body:
                    facts.shell_strings.append(body)
    return facts


def _perl(code: str) -> CodeFacts:
    facts = _scan(
        code,
        r"\b(system|exec|fork|readpipe|qx|syscall)\b|\bopen\s*\(?[^;]*?['\"]\s*\|"
        r"|\bopen\s*\(?[^;]*?\|\s*['\"]",
        r"\b(unlink|rmdir|rmtree|remove_tree|File::Path::\w+)\b",
        r"\beval\s*(?!\{)|\b(do|require)\s+\$|\bsub\s*\{.*\}\s*->",
        True,
        r"rmtree|remove_tree",
    )
    if re.search(r"\bqx\s*[{(/|'\"]", code):
        facts.spawns.append("qx")
    return facts


def _ruby(code: str) -> CodeFacts:
    return _scan(
        code,
        r"\b(system|exec|spawn|fork|syscall)\b|\bIO\.popen\b|\bOpen3\.\w+|%x\s*[{(\[]"
        r"|\bProcess\.(spawn|exec|fork)\b|\bKernel\.(system|exec|spawn)\b",
        r"\bFileUtils\.(rm\w*|remove\w*)|\bFile\.(delete|unlink)\b|\bDir\.(rmdir|delete"
        r"|unlink)\b",
        r"\b(eval|instance_eval|class_eval|module_eval|send|public_send)\b",
        True,
        r"rm_r|rm_rf|remove_dir|remove_entry",
    )


def _js(code: str) -> CodeFacts:
    return _scan(
        code,
        r"\bchild_process\b|\b(execSync|execFileSync|spawnSync|execFile|spawn|exec|"
        r"fork)\s*(?=\()|\bDeno\.(run|Command)\b|\bBun\.(spawn\w*|\$)",
        r"\b(rmSync|rmdirSync|unlinkSync|rm|rmdir|unlink)\s*(?=\()|\bDeno\.remove\b",
        r"\beval\s*\(|\bnew\s+Function\b|\bFunction\s*\(|\bvm\.\w+|\brequire\s*\(\s*[^'\"`\s]"
        r"|\bimport\s*\(\s*[^'\"`\s]|\bprocess\.binding\b",
        False,
        r"rmSync|rm\b",
    )


def _php(code: str) -> CodeFacts:
    return _scan(
        code,
        r"\b(system|exec|shell_exec|passthru|popen|proc_open|pcntl_exec|pcntl_fork)"
        r"\s*(?=\()",
        r"\b(unlink|rmdir)\s*(?=\()",
        r"\b(eval|assert|create_function|preg_replace_callback_array)\s*(?=\()|"
        r"\b(include|require)(_once)?\s*\(?\s*\$",
        True,
    )


def _awk(code: str) -> CodeFacts:
    facts = _scan(code, r"\bsystem\s*(?=\()", "", "", False)
    masked, strings = _mask_strings(code)
    # A single | (not ||) pipes output to, or reads from, a command.
    for m in re.finditer(r"(?<!\|)\|(?!\|)&?", masked):
        facts.spawns.append("|")
        before = [s for s in strings if s[1] <= m.start() and not masked[s[1] : m.start()].strip()]
        after = _strings_after(m.end(), code, strings)
        if "getline" in masked[m.end() : m.end() + 12] and before:
            facts.shell_strings.append(_unescape(before[-1][3], before[-1][2]))
        elif after:
            facts.shell_strings.append(after[0])
    return facts


def _lua(code: str) -> CodeFacts:
    return _scan(
        code,
        r"\bos\.execute\b|\bio\.popen\b",
        r"\bos\.remove\b",
        r"\b(loadstring|load|dofile)\s*\(",
        False,
    )


def _r(code: str) -> CodeFacts:
    return _scan(
        code,
        r"\b(system2?|shell|pipe)\s*(?=\()",
        r"\b(unlink|file\.remove)\s*(?=\()",
        r"\beval\s*\(",
        False,
    )


def _generic(code: str) -> CodeFacts:
    facts = CodeFacts()
    facts.unparsed = True
    return facts


_TOKEN_SCANNERS = {
    "perl": _perl,
    "ruby": _ruby,
    "js": _js,
    "php": _php,
    "awk": _awk,
    "lua": _lua,
    "r": _r,
}
