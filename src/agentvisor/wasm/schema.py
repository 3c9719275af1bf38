"""A small JSON Schema check of a call's arguments before they reach a tool.

This is a courtesy, not a protection: an agent gets a clear message for a malformed
call instead of whatever the tool makes of it, but every tool must still read its input
as untrusted. The keywords checked are the ones tool schemas use: ``type``,
``properties``, ``required``, ``additionalProperties``, ``items``, ``enum``, ``const``,
``minLength``, ``maxLength``, ``pattern``, ``minimum``, ``maximum``, ``minItems``,
``maxItems``. Other keywords are passed to the agent's client but not checked here.
"""

from __future__ import annotations

import re
from typing import Any

_TYPES: dict[str, Any] = {
    "object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
    "integer": int, "number": (int, float),
}
_SUBSCHEMAS = ("items", "additionalProperties")


def check_schema(schema: Any, where: str = "") -> str | None:
    """The first problem with the keywords this module checks, or None."""
    if isinstance(schema, bool):
        return None
    if not isinstance(schema, dict):
        return f"{where or 'the schema'} must be a mapping"
    types = schema.get("type")
    for name in [types] if isinstance(types, str) else types or []:
        if name not in _TYPES:
            return f"{where}type: unknown type {name!r}"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return f"{where}required: must be a list of property names"
    if "pattern" in schema:
        try:
            re.compile(schema["pattern"])
        except (re.error, TypeError) as exc:
            return f"{where}pattern: {exc}"
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return f"{where}properties: must be a mapping of property names to schemas"
    for name, sub in properties.items():
        problem = check_schema(sub, f"{where}properties.{name}.")
        if problem:
            return problem
    for key in _SUBSCHEMAS:
        if key in schema:
            problem = check_schema(schema[key], f"{where}{key}.")
            if problem:
                return problem
    return None


def validate(value: Any, schema: Any, where: str = "arguments") -> str | None:
    """The first way ``value`` breaks ``schema``, in words an agent can act on, or None."""
    if schema is True or schema == {}:
        return None
    if schema is False:
        return f"{where} is not allowed"
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not any(_is(value, name) for name in names):
            return f"{where} must be {' or '.join(names)}, not {_kind(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} must be one of {schema['enum']}"
    if "const" in schema and value != schema["const"]:
        return f"{where} must be {schema['const']!r}"
    if isinstance(value, str):
        return _string(value, schema, where)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where} must be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where} must be at most {schema['maximum']}"
    if isinstance(value, list):
        return _array(value, schema, where)
    if isinstance(value, dict):
        return _object(value, schema, where)
    return None


def _string(value: str, schema: dict[str, Any], where: str) -> str | None:
    if len(value) < schema.get("minLength", 0):
        return f"{where} must have at least {schema['minLength']} characters"
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return f"{where} must have at most {schema['maxLength']} characters"
    if "pattern" in schema and not re.search(schema["pattern"], value):
        return f"{where} must match {schema['pattern']!r}"
    return None


def _array(value: list[Any], schema: dict[str, Any], where: str) -> str | None:
    if len(value) < schema.get("minItems", 0):
        return f"{where} must have at least {schema['minItems']} items"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return f"{where} must have at most {schema['maxItems']} items"
    if "items" in schema:
        for i, item in enumerate(value):
            problem = validate(item, schema["items"], f"{where}[{i}]")
            if problem:
                return problem
    return None


def _object(value: dict[str, Any], schema: dict[str, Any], where: str) -> str | None:
    for name in schema.get("required", []):
        if name not in value:
            return f"{where}.{name} is required"
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            problem = validate(item, properties[name], f"{where}.{name}")
        elif extra is False:
            known = ", ".join(properties) or "none"
            problem = f"{where}.{name} is not a known argument (known: {known})"
        else:
            problem = validate(item, extra, f"{where}.{name}")
        if problem:
            return problem
    return None


def _is(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, ()))


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(value),
                                                                           "a value")
