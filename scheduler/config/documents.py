"""Reading a YAML document so that no input can crash, hang or flood an error message.

PyYAML builds nested documents by recursion (a few thousand levels end in a
``RecursionError``), keeps aliases as shared objects (nine levels of ten
aliases each stand for a billion values, which any walk over the document
would visit), allows an alias to refer to its own ancestor (a cycle), and
rejects integers of more than 4300 digits with a ``ValueError``.
:func:`load_yaml` turns each of these into a :class:`ConfigError` before
anything else sees the document:

- nesting deeper than :data:`MAX_DEPTH` levels;
- more than :data:`MAX_VALUES` values once aliases are expanded;
- a value that contains itself.

kube-scheduler's decoder (sigs.k8s.io/yaml over go-yaml) refuses the same
shapes: go-yaml limits nesting and "excessive aliasing".
"""

from __future__ import annotations

from typing import Any

import yaml

from scheduler.config.errors import ConfigError

MAX_DEPTH = 100
MAX_VALUES = 100_000


def load_yaml(text: str, file: str | None, loader: type = yaml.SafeLoader) -> list[Any]:
    """The documents of ``text`` (``load_all``), each checked by :func:`check_shape`.

    YAML errors are raised as they are (callers word them); the shapes above as ConfigError."""
    try:
        docs = list(yaml.load_all(text, Loader=loader))  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise ConfigError(file, "", f"the document nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        raise ConfigError(file, "", f"invalid YAML value: {str(e)[:200]}") from None
    for doc in docs:
        check_shape(doc, file)
    return docs


def check_shape(doc: Any, file: str | None) -> None:
    """Refuse a document too deep, too large once its aliases are expanded, or cyclic."""
    sizes: dict[int, tuple[int, int]] = {}
    """id(container) -> (values in it, expanded; its depth)."""
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(doc, False)]
    while stack:
        obj, done = stack.pop()
        if not isinstance(obj, dict | list):
            continue
        key = id(obj)
        if done:
            on_path.discard(key)
            size, depth = 1, 1
            for child in _children(obj):
                if isinstance(child, dict | list):
                    s, d = sizes[id(child)]
                    size += s
                    depth = max(depth, d + 1)
                else:
                    size += 1
            if depth > MAX_DEPTH:
                raise ConfigError(file, "", f"the document nests deeper than {MAX_DEPTH} levels")
            if size > MAX_VALUES:
                raise ConfigError(
                    file, "", f"the document holds more than {MAX_VALUES} values (counting YAML aliases)"
                )
            sizes[key] = (size, depth)
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise ConfigError(file, "", "the document contains itself (a YAML alias to an enclosing value)")
        if len(on_path) >= MAX_DEPTH:
            raise ConfigError(file, "", f"the document nests deeper than {MAX_DEPTH} levels")
        on_path.add(key)
        stack.append((obj, True))
        for child in _children(obj):
            if isinstance(child, dict | list) and id(child) not in sizes:
                stack.append((child, False))


def _children(obj: dict[Any, Any] | list[Any]) -> list[Any]:
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    return obj
