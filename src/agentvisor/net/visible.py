"""What a browser would show of an HTML page.

Text a person never sees is a classic hiding place for prompt injections: a page says
one thing on screen and another to the agent that reads its source. `visible_html`
removes, before any text is extracted, what a browser would not render:

- comments, ``<noscript>`` (browsers run scripts), ``<template>``, ``<input type=hidden>``;
- elements with the ``hidden`` attribute or ``aria-hidden="true"``;
- elements hidden by their inline ``style``, or by a rule of the page's own ``<style>``
  with a simple selector (``tag``, ``.class``, ``#id`` and their compounds):
  ``display: none``, ``visibility: hidden``, ``opacity: 0``, ``font-size: 0``, a zero
  width or height with ``overflow: hidden``, ``clip``/``clip-path`` to nothing,
  ``transform: scale(0)``, or placed far off-screen (absolute or fixed position, or a
  large negative ``text-indent``).

What it cannot see (external stylesheets, scripts, text coloured like its background)
stays; the count it returns lets a person or a policy react to what it did see.
Hand-written rather than a CSS engine: no maintained pure-Python library computes styles,
and these rules only need the declarations, not the cascade.
"""

from __future__ import annotations

import re
from typing import Any

from ..records import Declared

# Tags whose content a browser does not render as page text.
_HIDDEN_TAGS = ("noscript", "template")
_LENGTH = re.compile(r"^(-?(?:\d+\.?\d*|\.\d+))(px|pt|em|rem|%|vw|vh|ch|ex|cm|mm|in)?$")
# Distances beyond which a box is off-screen, per unit (a viewport is never this large).
_OFF_SCREEN = {"px": 500.0, "pt": 400.0, "em": 30.0, "rem": 30.0, "ch": 60.0, "ex": 60.0}
_OFF_SCREEN_RELATIVE = 100.0  # %, vw, vh
_SIMPLE_SELECTOR = re.compile(r"^([a-z][a-z0-9-]*)?((?:[.#][a-z0-9_-]+)*)$", re.IGNORECASE)


class Visible(Declared):
    """A page with what a browser would not show removed, and how much that was."""

    html: str
    hidden_chars: int = 0  # characters of text removed (whitespace collapsed)
    hidden_parts: int = 0  # elements and comments removed


def visible_html(html: str) -> Visible:
    """``html`` without the content a browser would not show (see the module docstring)."""
    import lxml.etree  # type: ignore[import-untyped]
    import lxml.html  # type: ignore[import-untyped]

    try:
        tree = lxml.html.document_fromstring(html)
    except ValueError:  # a string with an XML encoding declaration
        tree = lxml.html.document_fromstring(html.encode("utf-8"))
    except lxml.etree.ParserError:  # nothing to parse: nothing hidden either
        return Visible(html)
    hidden = _hidden_elements(tree, _stylesheet_rules(tree))
    chars = parts = 0
    for comment in list(tree.iter(lxml.etree.Comment)):
        chars += len(" ".join((comment.text or "").split()))
        parts += 1
        comment.drop_tree()  # keeps the text after it
    for element in hidden:
        if any(ancestor in hidden for ancestor in element.iterancestors()):
            continue  # removed with its ancestor
        chars += len(" ".join(element.text_content().split()))
        parts += 1
        element.drop_tree()
    if not parts:
        return Visible(html)
    return Visible(lxml.html.tostring(tree, encoding="unicode"), chars, parts)


def _hidden_elements(tree: Any, rules: list[str]) -> set[Any]:
    hidden: set[Any] = set()
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        tag = element.tag.lower()
        if (
            tag in _HIDDEN_TAGS
            or element.get("hidden") is not None
            or (element.get("aria-hidden") or "").strip().lower() == "true"
            or (tag == "input" and (element.get("type") or "").lower() == "hidden")
            or _style_hides(element.get("style") or "")
        ):
            hidden.add(element)
    for xpath in rules:
        hidden.update(tree.xpath(xpath))
    return hidden


def _declarations(style: str) -> dict[str, str]:
    found = {}
    for declaration in style.split(";"):
        name, sep, value = declaration.partition(":")
        if sep:
            value = value.lower().replace("!important", "")
            found[name.strip().lower()] = " ".join(value.split())
    return found


def _style_hides(style: str) -> bool:
    """Whether declarations hide their element: gone, invisible, zero-size or off-screen."""
    if not style:
        return False
    d = _declarations(style)
    if d.get("display") == "none" or d.get("visibility") in ("hidden", "collapse"):
        return True
    if _is_zero(d.get("opacity")) or _is_zero(d.get("font-size")):
        return True
    clip = d.get("clip", "") + " " + d.get("clip-path", "")
    if re.search(
        r"rect\(\s*0[a-z]*[\s,]+0[a-z]*[\s,]+0[a-z]*[\s,]+0|inset\(\s*50%|circle\(\s*0", clip
    ):
        return True
    if re.search(r"scale[xy]?\(\s*0(?:\.0*)?\s*[,)]", d.get("transform", "")):
        return True
    clipped = d.get("overflow", "") in ("hidden", "clip") or d.get("overflow-x") == "hidden"
    sizes = ("width", "height", "max-width", "max-height")
    if clipped and any(_is_zero(d.get(name)) for name in sizes):
        return True
    if d.get("position") in ("absolute", "fixed") and any(
        _off_screen(d.get(name)) for name in ("left", "top", "right", "bottom")
    ):
        return True
    return _off_screen(d.get("text-indent")) or _off_screen(d.get("margin-left"))


def _length(value: str | None) -> tuple[float, str] | None:
    match = _LENGTH.match(value or "")
    if match is None:
        return None
    return float(match.group(1)), match.group(2) or "px"


def _is_zero(value: str | None) -> bool:
    length = _length(value)
    return length is not None and length[0] == 0


def _off_screen(value: str | None) -> bool:
    length = _length(value)
    if length is None:
        return False
    number, unit = length
    limit = _OFF_SCREEN.get(unit, _OFF_SCREEN_RELATIVE)
    return number <= -limit


def _stylesheet_rules(tree: Any) -> list[str]:
    """XPath expressions for the page's own ``<style>`` rules with simple selectors that
    hide what they select; rules inside ``@media`` and other at-rules are left out."""
    xpaths = []
    for style in tree.iter("style"):
        for selectors, body in _top_level_rules(style.text_content()):
            if not _style_hides(body):
                continue
            for selector in selectors.split(","):
                xpath = _selector_xpath(selector.strip())
                if xpath:
                    xpaths.append(xpath)
    return xpaths


def _top_level_rules(css: str) -> list[tuple[str, str]]:
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.DOTALL)
    rules, depth, start, prelude = [], 0, 0, ""
    for index, char in enumerate(css):
        if char == "{":
            if depth == 0:
                prelude, start = css[start:index].strip(), index + 1
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                if not prelude.startswith("@"):
                    rules.append((prelude, css[start:index]))
                start = index + 1
        elif char == ";" and depth == 0:
            start = index + 1  # an @import or @charset statement
    return rules


def _selector_xpath(selector: str) -> str | None:
    """``tag``, ``.class``, ``#id`` and compounds of them as XPath; None for the rest."""
    match = _SIMPLE_SELECTOR.match(selector)
    if match is None or not selector:
        return None
    tag, rest = match.group(1), match.group(2)
    tests = []
    for kind, name in re.findall(r"([.#])([a-z0-9_-]+)", rest, re.IGNORECASE):
        if kind == ".":
            tests.append(f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')")
        else:
            tests.append(f"@id='{name}'")
    condition = "".join(f"[{test}]" for test in tests)
    return f"//{tag.lower() if tag else '*'}{condition}"
