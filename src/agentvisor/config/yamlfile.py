"""The one YAML reader for every file agentvisor reads: configs (and the rules in them),
Wasm tool manifests and lock files, and Hermes configs.

PyYAML's safe loader, with two additions: a key written twice in one mapping is an error
naming both lines (PyYAML silently keeps the last, so a second ``rules:`` would drop the
first list without a word), and the line of each key and list entry is kept so that
schema errors can name it. Text that is not UTF-8 is an error naming the line, not a
traceback. A document whose aliases expand beyond `MAX_VALUES` values, or a file larger
than `MAX_BYTES`, is refused.
"""

from __future__ import annotations

import os
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from ..errors import ConfigError
from ..records import Declared

Path_ = tuple[str | int, ...]  # a key path: mapping keys and list positions
# Values a document may stand for with its aliases written out: every reader walks (and the
# config reader serialises) the expanded tree, so nine lines of aliases of aliases (a
# "billion laughs" file planted in a workspace) would hang every later run there.
MAX_VALUES = 1_000_000
# Bytes a YAML file may have: a config, manifest or lock file is a few KiB, and a planted
# large one (an `app/agentvisor.yaml` of 8 MB took a minute and 800 MB to refuse) would
# stall every later run in that directory; a sparse one of terabytes is never read whole.
MAX_BYTES = 1 << 20


def read_limited(path: str | os.PathLike[str]) -> bytes:
    """At most `MAX_BYTES` + 1 bytes of ``path``: enough for `load_yaml` to refuse more."""
    with open(path, "rb") as f:
        return f.read(MAX_BYTES + 1)


class Document(Declared):
    data: Any  # {} for an empty file
    lines: dict[Path_, int]  # 1-based line of each key and list entry

    def line_of(self, loc: tuple[object, ...]) -> int | None:
        """The line of the deepest part of ``loc`` (a pydantic error location) that the
        file has: a missing key is reported at the mapping that lacks it."""
        for end in range(len(loc), 0, -1):
            line = self.lines.get(loc[:end])  # type: ignore[arg-type]
            if line is not None:
                return line
        return None


class DuplicateKey(yaml.YAMLError):
    """A mapping key written twice (the message names both lines)."""


class _Loader(yaml.SafeLoader):
    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        # Before `<<` merges are flattened in: a key written here may override a merged one.
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: PyYAML's own error says so below
                break
            line = key_node.start_mark.line + 1
            if first is not None:
                raise DuplicateKey(
                    f"the key {key!r} is written twice, on line {first} and on line {line} "
                    "(only one can apply)"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(content: bytes, source: object, error: type[Exception] = ConfigError) -> Document:
    """Parse ``content`` read from ``source``; problems raise ``error`` naming it."""
    if len(content) > MAX_BYTES:
        raise error(
            f"{source}: larger than {MAX_BYTES // 1024} KiB, the most a YAML file agentvisor "
            "reads may have"
        )
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = content[: exc.start].count(b"\n") + 1
        raise error(
            f"{source}: not UTF-8 text (line {line}, byte {exc.start}); save it as UTF-8"
        ) from None
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is not None and _expanded_size(node, {}) > MAX_VALUES:
            raise error(
                f"{source}: its aliases expand to more than {MAX_VALUES} values "
                "(a file that small cannot need that many); write the values out"
            )
        data = loader.construct_document(node) if node is not None else None
    except DuplicateKey as exc:
        raise error(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        raise error(f"{source}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    lines: dict[Path_, int] = {}
    if node is not None:
        _collect_lines(node, (), lines)
    return Document({} if data is None else data, lines)


def _expanded_size(node: Node, sizes: dict[int, int]) -> int:
    """How many values ``node`` stands for once every alias is written out; each node is
    counted once (``sizes``), so a file of aliases of aliases costs its own length."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    sizes[id(node)] = MAX_VALUES + 1  # a node inside itself stands for endless values
    size = 1
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            size += _expanded_size(key_node, sizes) + _expanded_size(value_node, sizes)
    elif isinstance(node, SequenceNode):
        size += sum(_expanded_size(item, sizes) for item in node.value)
    sizes[id(node)] = size
    return size


def _collect_lines(node: Node, path: Path_, lines: dict[Path_, int]) -> None:
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node.value, str) else str(key_node.value)
            lines[(*path, key)] = key_node.start_mark.line + 1
            _collect_lines(value_node, (*path, key), lines)
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            _collect_lines(item, (*path, index), lines)
