"""Bash source → `ir` statements, with tree-sitter-bash as the grammar.

This is the only module that imports tree_sitter (lazily, on first use). It does no
judging and no expansion: it records structure, quoting and substitutions exactly, and
marks what it could not parse as `Unparsed` so the judge can refuse to guess.
"""

from __future__ import annotations

import re
import threading
import time
from functools import lru_cache

from . import ir
from .lazyre import regex
from .limits import SMALL_SOURCE, Budget, TooComplex
from .words import brace_expand

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from typing import Any

    Node = Any  # tree_sitter.Node; not imported at module level (start-up time)

_STATEMENTS = {
    "command",
    "pipeline",
    "list",
    "subshell",
    "compound_statement",
    "redirected_statement",
    "if_statement",
    "while_statement",
    "for_statement",
    "c_style_for_statement",
    "case_statement",
    "function_definition",
    "variable_assignment",
    "variable_assignments",
    "declaration_command",
    "unset_command",
    "negated_command",
    "test_command",
    "do_group",
    "program",
    "ERROR",
}
_PARAM_RE = re.compile(r"^\$\{(#?)([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!\-])(.*)\}$", re.S)
_BACKTICK_RE = r"`((?:\\.|[^`\\])*)`"
# Loop conditions that never end the loop, by keyword.
_ENDLESS = {
    "while": ("true", ":", "[ 1 ]", "[[ 1 ]]", "((1))", "/bin/true"),
    "until": ("false", "! true", "/bin/false"),
}
_DQ_ESCAPES = {"\\": "\\", '"': '"', "$": "$", "`": "`"}


_CHUNK = 64 * 1024
_local = threading.local()  # a tree-sitter parser is not safe to share between threads


@lru_cache(maxsize=1)
def _language() -> Any:
    import tree_sitter_bash
    from tree_sitter import Language

    return Language(tree_sitter_bash.language())


def _parser() -> Any:
    parser = getattr(_local, "parser", None)
    if parser is None:
        from tree_sitter import Parser

        parser = _local.parser = Parser(_language())
    return parser


def _parse_tree(parser: Any, data: bytes, budget: Budget) -> Any:
    """The syntax tree of ``data``, halted when the budget's time is up (tree-sitter
    itself takes tens of milliseconds on some inputs of a few kilobytes)."""

    def halt(*_: Any) -> bool:
        return len(data) > SMALL_SOURCE and time.monotonic() > budget.deadline

    try:
        return parser.parse(
            lambda offset, _: data[offset : offset + _CHUNK], progress_callback=halt
        )
    except ValueError:  # tree-sitter's "Parsing failed": halted by the callback
        parser.reset()  # else the next parse would resume this one
        raise TooComplex(f"parsing it takes longer than {budget.seconds * 1000:.0f} ms") from None


class ParseResult:
    __slots__ = ("errors", "seq")

    def __init__(self, seq: ir.Seq, errors: bool) -> None:
        self.seq = seq
        self.errors = errors


def parse(source: str, budget: Budget | None = None) -> ParseResult:
    """Parse ``source``; on a syntax error retry once with brace expansion done as text
    (tree-sitter reads ``{rm,-rf,/}`` as a broken group), else keep what parsed.
    Raises `TooComplex` when the conversion goes over ``budget`` (a fresh one if None)."""
    budget = budget or Budget()
    started = time.monotonic()
    parser = _parser()
    budget.deadline += time.monotonic() - started  # loading the grammar is not the command's
    tree = _parse_tree(parser, source.encode("utf-8", "surrogateescape"), budget)
    if tree.root_node.has_error:
        expanded = brace_expand_source(source)
        if expanded != source:
            retry = _parse_tree(parser, expanded.encode("utf-8", "surrogateescape"), budget)
            if not retry.root_node.has_error:
                tree = retry
    conv = _Converter(budget)
    seq = conv.seq(tree.root_node)
    return ParseResult(seq, tree.root_node.has_error)


def brace_expand_source(source: str) -> str:
    """Expand unquoted brace groups in each blank-separated word of ``source``."""
    out: list[str] = []
    for token, is_word in _split_source_words(source):
        if is_word and "{" in token and ("," in token or ".." in token):
            out.append(" ".join(brace_expand(token)))
        else:
            out.append(token)
    return "".join(out)


def _split_source_words(source: str) -> list[tuple[str, bool]]:
    """Cut source into words and separators, keeping quoted text inside its word."""
    parts: list[tuple[str, bool]] = []
    i, n, start = 0, len(source), 0
    quote = ""
    while i < n:
        c = source[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c == "\\":
            i += 2
            continue
        elif c in "'\"":
            quote = c
        elif c in " \t\n;&|()<>":
            if start < i:
                parts.append((source[start:i], True))
            parts.append((c, False))
            start = i + 1
        i += 1
    if start < n:
        parts.append((source[start:], True))
    return parts


class _Words:
    """Words and redirects: parts with their quoting, substitutions parsed as programs
    (by `seq`, which the statement converter provides)."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    def seq(self, node: Node) -> ir.Seq:
        raise NotImplementedError

    # --- redirects --------------------------------------------------------------------

    def spilled(self, node: Node) -> list[ir.Word]:
        """Words tree-sitter hangs on a redirect after its target (``cat > out FILE``):
        bash passes them to the command. A number right before the next redirect is that
        redirect's descriptor (``>& /dev/tcp/h/p 0>&1``) and is left out."""
        dests = [
            c
            for i, c in enumerate(node.children)
            if node.field_name_for_child(i) == "destination" and node.type == "file_redirect"
        ]
        after = node.next_sibling
        return [
            self.word(c)
            for c in dests[1:]
            if not (c.type == "number" and after is not None and c.end_byte == after.start_byte)
        ]

    def redirect(self, node: Node) -> ir.Redirect:
        fd: int | None = None
        op = ""
        target: ir.Word | None = None
        heredoc: ir.Word | None = None
        for index, child in enumerate(node.children):
            field = node.field_name_for_child(index)
            t = child.type
            if t == "file_descriptor":
                fd = int(_text(child)) if _text(child).isdigit() else None
            elif not child.is_named and t not in ("(", ")"):
                op = op or t
            elif field == "destination" or (node.type == "herestring_redirect" and child.is_named):
                target = target or self.word(child)
            elif t == "heredoc_body":
                heredoc = self._heredoc_body(child, node)
        if node.type == "heredoc_redirect" and heredoc is None:
            heredoc = ir.Word((ir.Lit("", True),), "")
        return ir.Redirect(op, fd, target, heredoc)

    def _heredoc_body(self, body: Node, redirect: Node) -> ir.Word:
        start = next((c for c in redirect.children if c.type == "heredoc_start"), None)
        quoted = start is not None and any(q in _text(start) for q in "'\"\\")
        if quoted:
            return ir.Word((ir.Lit(_text(body), True),), _text(body))
        parts: list[ir.Part] = []
        raw, base, pos = body.text, body.start_byte, body.start_byte
        for child in [*body.named_children, None]:
            start = child.start_byte if child is not None else body.end_byte
            if child is not None and child.type == "heredoc_content":
                continue  # literal text: taken from the gaps below
            if start > pos:
                text = _decode(raw[pos - base : start - base])
                if "`" in text or "$(" in text:
                    parts.append(ir.Arith(True, text))  # text an expansion produces: unknown
                else:
                    parts.append(ir.Lit(_unescape_dq(text), True))
            if child is None:
                break
            parts.extend(_quote_all(self.word(child).parts))
            pos = child.end_byte
        return ir.Word(tuple(parts), _text(body))

    # --- words ------------------------------------------------------------------------

    def word(self, node: Node) -> ir.Word:
        self.budget.node()
        parts = self._parts(node, quoted=False)
        parts = _split_tilde(parts)
        return ir.Word(tuple(parts), _text(node))

    def _parts(self, node: Node, quoted: bool) -> list[ir.Part]:
        self.budget.tick()
        t = node.type
        if t == "concatenation":
            out: list[ir.Part] = []
            for child in node.children:
                out.extend(self._parts(child, quoted))
            return out
        if t == "command_name":
            out = []
            for child in node.named_children:
                out.extend(self._parts(child, quoted))
            return out
        # The text only below: concatenations nest (``{a,{a,...}}``), and the text of
        # every level would copy the whole word again.
        text = _text(node)
        if t == "word":
            return [ir.Lit(text, True)] if quoted else _unescape_word(text, self.budget)
        if t in ("raw_string", "string_content", "heredoc_content") and quoted:
            return [ir.Lit(_unescape_dq(text) if t != "raw_string" else text, True)]
        if t == "raw_string":
            return [ir.Lit(text[1:-1], True)]
        if t == "ansi_c_string":
            from .words import decode_ansi_c

            return [ir.Lit(decode_ansi_c(text[2:-1], self.budget.tick), True)]
        if t in ("string", "translated_string"):
            return self._string_parts(node)
        if t == "simple_expansion":
            name = text[1:]
            return [ir.Param(name, quoted, "", text)]
        if t == "expansion":
            subs = self._substitutions(node) + self._backticks(node)
            match = _PARAM_RE.match(text)
            if match is None:
                return [ir.Param("?", quoted, "dynamic", text, subs)]
            length, name, rest = match.groups()
            op = ("#" if length else "") + rest
            return [ir.Param(name, quoted, op, text, subs)]
        if t == "command_substitution":
            if text.startswith("`") and "\\`" in text:
                # Backquotes inside backquotes: bash reads the inner ones once unescaped.
                inner = re.sub(r"\\([`\\$])", r"\1", text[1:-1])
                return [ir.CmdSub(parse(inner, self.budget).seq, quoted, text)]
            return [ir.CmdSub(self.seq(node), quoted, text)]
        if t == "process_substitution":
            return [ir.ProcSub(self.seq(node), "<" if text.startswith("<") else ">", text)]
        if t == "arithmetic_expansion":
            return [ir.Arith(quoted, text, self._substitutions(node))]
        # number, brace_expression, extglob_pattern, regex, stray tokens: literal text.
        return [ir.Lit(text, quoted)] if quoted else _unescape_word(text, self.budget)

    def _string_parts(self, node: Node) -> list[ir.Part]:
        """Double-quoted string: children plus the literal gaps between them."""
        raw = node.text
        base = node.start_byte
        open_len = 2 if node.type == "translated_string" else 1
        pos = base + open_len
        end = node.end_byte - 1
        out: list[ir.Part] = []
        for child in node.children:
            if not child.is_named:
                continue
            if child.start_byte > pos:
                out.append(
                    ir.Lit(_unescape_dq(_decode(raw[pos - base : child.start_byte - base])), True)
                )
            out.extend(self._parts(child, quoted=True))
            pos = child.end_byte
        if end > pos:
            out.append(ir.Lit(_unescape_dq(_decode(raw[pos - base : end - base])), True))
        return out

    def _backticks(self, node: Node) -> tuple[ir.Word, ...]:
        """Backquoted commands in the words of a ``${...}``: tree-sitter leaves them as
        text there, bash runs them."""
        found: list[ir.Word] = []
        stack = list(node.children)
        while stack:
            self.budget.tick()
            n = stack.pop()
            if n.type == "word" and "`" in _text(n):
                for inner in regex(_BACKTICK_RE).findall(_text(n)):
                    body = parse(inner.replace("\\`", "`"), self.budget).seq
                    found.append(ir.Word((ir.CmdSub(body, True, f"`{inner}`"),), inner))
            else:
                stack.extend(n.children)
        return tuple(found)

    def _substitutions(self, node: Node, skip: Node | None = None) -> tuple[ir.Word, ...]:
        """Command/process substitutions anywhere below ``node``, as words to evaluate."""
        found: list[ir.Word] = []
        stack = [node]
        while stack:
            self.budget.tick()  # `[[ -n x && -n x && ... ]]`: 40,000 nodes in one test
            n = stack.pop()
            if skip is not None and n.id == skip.id:
                continue
            if n.type in ("command_substitution", "process_substitution"):
                found.append(self.word(n))
                continue
            stack.extend(reversed(n.children))
        return tuple(found)


class _Converter(_Words):
    """tree-sitter's bash syntax tree → `ir` statements (one method per node type)."""

    def seq(self, node: Node) -> ir.Seq:
        """A node holding a list of statements (program, compound, do_group, subshell)."""
        items: list[ir.Stmt] = []
        children = node.children
        for index, child in enumerate(children):
            if not child.is_named or child.type in ("comment", "heredoc_body"):
                continue
            stmt = self.stmt(child)
            if stmt is None:
                continue
            nxt = children[index + 1] if index + 1 < len(children) else None
            if nxt is not None and nxt.type == "&":
                stmt = ir.Background(stmt)
            items.append(stmt)
        return ir.Seq(tuple(items))

    def stmt(self, node: Node) -> ir.Stmt | None:
        self.budget.node()
        self.budget.enter()
        try:
            return self._stmt(node)
        finally:
            self.budget.leave()

    def _stmt(self, node: Node) -> ir.Stmt | None:
        t = node.type
        method = getattr(self, "_" + t, None)
        if method is not None:
            return method(node)
        if t in ("comment", "heredoc_body", "heredoc_start", "heredoc_end"):
            return None
        # Anything else (ERROR, arithmetic, ...): keep what can be read, mark the rest.
        inner = self.seq(node)
        subs = self._substitutions(node)
        parts: list[ir.Stmt] = [ir.Unparsed(_text(node))] if t == "ERROR" else []
        parts.extend(inner.items)
        if subs:
            parts.append(ir.Evaluate(subs))
        return ir.Seq(tuple(parts))

    # --- statements -------------------------------------------------------------------

    def _program(self, node: Node) -> ir.Stmt:
        return self.seq(node)

    _compound_statement = _program
    _do_group = _program

    def _subshell(self, node: Node) -> ir.Stmt:
        return ir.Block(self.seq(node), subshell=True)

    def _command(
        self, node: Node, extra: tuple[ir.Redirect, ...] = (), spill: tuple[ir.Word, ...] = ()
    ) -> ir.Command:
        assigns: list[tuple[str, ir.Word | None]] = []
        words: list[ir.Word] = []
        redirects: list[ir.Redirect] = []
        for child in node.named_children:
            t = child.type
            if t == "variable_assignment":
                name, value, _ = self._assignment(child)
                assigns.append((name, value))
            elif t == "command_name":
                words.extend(self.word(c) for c in child.named_children)
            elif t.endswith("redirect"):
                redirects.append(self.redirect(child))
                words.extend(self.spilled(child))
            elif t == "comment":
                continue
            else:
                words.append(self.word(child))
        return ir.Command(tuple(assigns), (*words, *spill), tuple(redirects) + extra, _text(node))

    def _redirected_statement(self, node: Node) -> ir.Stmt | None:
        body = node.child_by_field_name("body")
        redirects: list[ir.Redirect] = []
        spill: list[ir.Word] = []
        tail: list[tuple[str, Node]] = []  # tree-sitter hangs what follows a here-doc on it
        for child in node.named_children:
            if child.type.endswith("redirect"):
                redirects.append(self.redirect(child))
                spill.extend(self.spilled(child))
                if child.type == "heredoc_redirect":
                    tail.extend(self._heredoc_tail(child))
        if body is None:
            stmt: ir.Stmt | None = ir.Command((), (), tuple(redirects), _text(node))
        elif body.type == "command":
            stmt = self._command(body, tuple(redirects), tuple(spill))
        else:
            inner = self.stmt(body)
            stmt = ir.Block(ir.Seq((inner,) if inner else ()), tuple(redirects))
        for kind, tail_node in tail:
            rest = self.stmt(tail_node)
            if rest is None or stmt is None:
                continue
            stmt = _join_pipe(stmt, rest) if kind == "pipe" else ir.Seq((stmt, rest))
        return stmt

    def _heredoc_tail(self, node: Node) -> list[tuple[str, Node]]:
        tail: list[tuple[str, Node]] = []
        for index, child in enumerate(node.children):
            if child.type == "pipeline":
                tail.append(("pipe", child))
            elif node.field_name_for_child(index) == "right":
                tail.append(("seq", child))
        return tail

    def _pipeline(self, node: Node) -> ir.Stmt:
        stages = [s for s in (self.stmt(c) for c in node.named_children) if s is not None]
        if len(stages) == 1:
            return stages[0]
        return ir.Pipeline(tuple(stages))

    def _list(self, node: Node) -> ir.Stmt:
        # ``a && b || c`` nests to the left, one level per operator: flattened here, a
        # long chain stays one level deep.
        chain: list[Node] = []
        current: Node | None = node
        while current is not None and current.type == "list":
            kids = current.named_children
            chain.extend(reversed(kids[1:]))
            current = kids[0] if kids else None
        if current is not None:
            chain.append(current)
        items = [s for s in (self.stmt(c) for c in reversed(chain)) if s is not None]
        return ir.Seq(tuple(items))

    def _negated_command(self, node: Node) -> ir.Stmt:
        items = [s for s in (self.stmt(c) for c in node.named_children) if s is not None]
        return ir.Seq(tuple(items))

    def _if_statement(self, node: Node) -> ir.Stmt:
        return ir.Block(self._flatten(node))

    def _while_statement(self, node: Node) -> ir.Stmt:
        block = ir.Block(self._flatten(node))
        condition = " ".join(
            _text(c)
            for i, c in enumerate(node.children)
            if node.field_name_for_child(i) == "condition" and c.type != ";"
        )
        endless = _ENDLESS.get(_text(node.children[0]) if node.children else "", ())
        if condition.strip() in endless and _backgrounds(block.body):
            return ir.Block(block.body, endless_forks=True)
        return block

    _elif_clause = _if_statement
    _else_clause = _if_statement
    _case_item = _if_statement

    def _case_statement(self, node: Node) -> ir.Stmt:
        value = node.child_by_field_name("value")
        items: list[ir.Stmt] = []
        if value is not None:
            items.append(ir.Evaluate((self.word(value),)))
        for child in node.named_children:
            if child.type == "case_item":
                items.append(self._case_item(child))
        return ir.Block(ir.Seq(tuple(items)))

    def _flatten(self, node: Node) -> ir.Seq:
        items: list[ir.Stmt] = []
        for child in node.named_children:
            if child.type in _STATEMENTS or child.type in ("elif_clause", "else_clause"):
                stmt = self.stmt(child)
                if stmt is not None:
                    items.append(stmt)
        return ir.Seq(tuple(items))

    def _for_statement(self, node: Node) -> ir.Stmt:
        var = node.child_by_field_name("variable")
        values = [self.word(c) for c in node.children_by_field_name("value")]
        has_in = any(c.type == "in" for c in node.children)
        body = node.child_by_field_name("body")
        return ir.For(
            _text(var) if var is not None else None,
            tuple(values) if has_in else None,
            self.seq(body) if body is not None else ir.Seq(()),
        )

    def _c_style_for_statement(self, node: Node) -> ir.Stmt:
        body = node.child_by_field_name("body")
        subs = self._substitutions(node, skip=body)
        items: list[ir.Stmt] = [ir.Evaluate(subs)] if subs else []
        if body is not None:
            items.append(ir.For(None, None, self.seq(body)))
        return ir.Seq(tuple(items))

    def _function_definition(self, node: Node) -> ir.Stmt:
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        inner = self.stmt(body) if body is not None else None
        return ir.FuncDef(_text(name) if name is not None else "", inner or ir.Seq(()))

    def _variable_assignment(self, node: Node) -> ir.Stmt:
        name, value, dynamic = self._assignment(node)
        array = node.child_by_field_name("value")
        if array is not None and array.type == "array" and "[" not in name:
            items = tuple(self.word(c) for c in array.named_children)
            return ir.Assign(name, None, True, items)
        assign = ir.Assign(name, value, dynamic)
        subs = self._substitutions(node) if value is None else ()
        if subs:  # a subscript or an array: what is substituted in it still runs
            return ir.Seq((ir.Evaluate(subs), assign))
        return assign

    def _variable_assignments(self, node: Node) -> ir.Stmt:
        return ir.Seq(
            tuple(
                self._variable_assignment(c)
                for c in node.named_children
                if c.type == "variable_assignment"
            )
        )

    def _declaration_command(self, node: Node) -> ir.Stmt:
        items: list[ir.Stmt] = []
        words: list[ir.Word] = []
        for child in node.named_children:
            if child.type == "variable_assignment":
                items.append(self._variable_assignment(child))
            elif child.type == "variable_name":
                items.append(ir.Assign(_text(child), None, dynamic=True))
            else:
                words.append(self.word(child))
        if words:
            items.append(ir.Evaluate(tuple(words)))
        return ir.Seq(tuple(items))

    def _unset_command(self, node: Node) -> ir.Stmt:
        return ir.Seq(
            tuple(
                ir.Assign(_text(c), None, dynamic=True)
                for c in node.named_children
                if c.type == "variable_name"
            )
        )

    def _test_command(self, node: Node) -> ir.Stmt:
        return ir.Evaluate(self._substitutions(node))

    def _assignment(self, node: Node) -> tuple[str, ir.Word | None, bool]:
        name_node = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        name = _text(name_node) if name_node is not None else ""
        if name_node is not None and name_node.type == "subscript":
            return name.split("[", 1)[0], None, True
        if value is None:
            return name, ir.Word((ir.Lit("", True),), ""), False
        if value.type == "array":
            return name, None, True
        return name, self.word(value), False


def _backgrounds(stmt: ir.Stmt) -> bool:
    """Does ``stmt`` start something in the background (``cmd &``) anywhere inside?"""
    stack = [stmt]
    while stack:
        s = stack.pop()
        if isinstance(s, ir.Background):
            return True
        if isinstance(s, ir.Seq):
            stack.extend(s.items)
        elif isinstance(s, ir.Pipeline):
            stack.extend(s.stages)
        elif isinstance(s, ir.Block | ir.For):
            stack.append(s.body)
    return False


def _join_pipe(left: ir.Stmt, rest: ir.Stmt) -> ir.Stmt:
    """``left | rest``: when ``rest`` is a list, only its first item is piped into."""
    if isinstance(rest, ir.Seq) and rest.items:
        first = _join_pipe(left, rest.items[0])
        return ir.Seq((first, *rest.items[1:]))
    if isinstance(rest, ir.Pipeline):
        return ir.Pipeline((left, *rest.stages))
    return ir.Pipeline((left, rest))


def _text(node: Node) -> str:
    return _decode(node.text)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


# Runs of backslash-escaped characters, runs of plain text, and a backslash at the end.
_ESCAPE_RUNS = re.compile(r"((?:\\.)+)|([^\\]+)|\\", re.DOTALL)


def _unescape_word(text: str, budget: Budget) -> list[ir.Part]:
    """Unquoted word text: a backslash quotes the next character (a backslash-newline is
    removed). A run of escaped characters is one quoted part; the loop goes by runs, and
    looks at the budget, because a word can hold 100,000 of them."""
    if "\\" not in text:
        return [ir.Lit(text, False)]
    out: list[ir.Part] = []
    plain = ""  # unquoted text not yet added, so a final backslash joins it
    for match in _ESCAPE_RUNS.finditer(text):
        budget.tick()
        escaped, run = match.groups()
        if escaped is None:
            plain += run if run is not None else "\\"
            continue
        if plain:
            out.append(ir.Lit(plain, False))
            plain = ""
        chars = escaped[1::2].replace("\n", "")
        if chars:
            out.append(ir.Lit(chars, True))
    if plain:
        out.append(ir.Lit(plain, False))
    return out


def _unescape_dq(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in _DQ_ESCAPES:
                out.append(nxt)
                i += 2
                continue
            if nxt == "\n":
                i += 2
                continue
        out.append(c)
        i += 1
    return "".join(out)


def _quote_all(parts: tuple[ir.Part, ...]) -> list[ir.Part]:
    out: list[ir.Part] = []
    for p in parts:
        if isinstance(p, ir.Lit):
            out.append(ir.Lit(p.text, True))
        elif isinstance(p, ir.Param):
            out.append(ir.Param(p.name, True, p.op, p.text))
        elif isinstance(p, ir.CmdSub):
            out.append(ir.CmdSub(p.body, True, p.text))
        else:
            out.append(p)
    return out


def _split_tilde(parts: list[ir.Part]) -> list[ir.Part]:
    """A leading unquoted ``~`` or ``~user`` (up to the first ``/``) is a tilde prefix."""
    if not parts:
        return parts
    first = parts[0]
    if not isinstance(first, ir.Lit) or first.quoted or not first.text.startswith("~"):
        return parts
    text = first.text
    slash = text.find("/")
    prefix = text[1:] if slash < 0 else text[1:slash]
    if slash < 0 and len(parts) > 1:
        return parts  # ~$x and similar: not a tilde prefix bash would expand
    if prefix and not re.fullmatch(r"[A-Za-z0-9._-]+", prefix):
        return parts
    rest = [] if slash < 0 else [ir.Lit(text[slash:], False)]
    return [ir.Tilde(prefix), *rest, *parts[1:]]
