"""YAML request bodies as JSON values, with bounded work.

Owns: turning a YAML body into what the JSON decoder would have produced
(kube-apiserver converts YAML to JSON first, sigs.k8s.io/yaml):

* scalars keep JSON's types only: YAML 1.1 timestamps stay strings (no
  ``datetime``), and so do YAML 1.1's base-60 numbers (go-yaml has none:
  an unquoted MAC address such as ``52:54:00:12:34:56`` is a string),
  ``!!binary`` and other non-JSON tags are refused;
* map keys become strings (``1: a`` → ``{"1": "a"}``, ``true`` →
  ``"true"``), as YAMLToJSON does; a key that is itself a map or a list is
  refused;
* **alias expansion is bounded**: anchors and aliases are legal, but a
  document whose expanded size is both over :data:`MAX_EXPANDED_NODES` and
  more than :data:`MAX_ALIAS_RATIO` times its written size is refused with
  ``yaml: document contains excessive aliasing`` (go-yaml's message) --
  the "billion laughs" document of a few hundred bytes that expands to
  billions of nodes costs a linear walk of its distinct nodes, not the
  expansion. An accepted document is returned as a tree (shared nodes
  copied), so later steps may change one place without changing another.

Errors raise :class:`YamlBodyError` with a one-line message; the caller
maps it to a 400 Status.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

MAX_EXPANDED_NODES = 100_000
"""Expanded node counts up to this are always accepted."""
MAX_ALIAS_RATIO = 10
"""Above MAX_EXPANDED_NODES, the expansion may be at most this many times the
number of distinct nodes."""

_BASE: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlBodyError(ValueError):
    """A YAML body that cannot be turned into a JSON value."""


class _Loader(_BASE):  # type: ignore[misc,valid-type]
    """SafeLoader without the YAML-1.1-only types JSON has no word for."""


_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"

# Timestamps stay strings (kube's YAML → JSON keeps them as text); ints and
# floats are resolved again below, without YAML 1.1's base-60 forms.
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_TIMESTAMP, _INT, _FLOAT)]
    for first, resolvers in _BASE.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(_INT, re.compile(
    r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
    list("-+0123456789"))
_Loader.add_implicit_resolver(_FLOAT, re.compile(
    r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+0123456789."))


def _refuse(_loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    raise YamlBodyError(f"error converting YAML to JSON: unsupported YAML tag {node.tag}")


for _tag in ("tag:yaml.org,2002:binary", "tag:yaml.org,2002:timestamp",
             "tag:yaml.org,2002:set", "tag:yaml.org,2002:omap", "tag:yaml.org,2002:pairs"):
    _Loader.add_constructor(_tag, _refuse)


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        if math.isnan(key):
            return ".nan"
        if math.isinf(key):
            return "+Inf" if key > 0 else "-Inf"
        return repr(key)
    raise YamlBodyError("error converting YAML to JSON: a map key must be a scalar")


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[str, Any]:
    loader.flatten_mapping(node)
    out: dict[str, Any] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise YamlBodyError("error converting YAML to JSON: a map key must be a scalar")
        key = _key_text(loader.construct_object(key_node, deep=True))
        out[key] = loader.construct_object(value_node, deep=False)
    return out


def _construct_map_node(loader: yaml.SafeLoader, node: yaml.MappingNode) -> Any:
    data: dict[str, Any] = {}
    yield data
    data.update(_construct_mapping(loader, node))


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map_node)


def _expanded_size(value: Any) -> tuple[int, int]:
    """(expanded nodes, distinct nodes) of a value that may share children,
    computed once per distinct node (no expansion)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        node, done = stack.pop()
        if not isinstance(node, dict | list):
            continue
        ident = id(node)
        if done:
            children = node.values() if isinstance(node, dict) else node
            total = 1
            for child in children:
                total += sizes.get(id(child), 1) if isinstance(child, dict | list) else 1
            sizes[ident] = total
            continue
        if ident in sizes:
            continue
        sizes[ident] = 1  # a cycle (a recursive alias) counts once; refused below
        stack.append((node, True))
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, False) for child in children if isinstance(child, dict | list)
                     and id(child) not in sizes)
    root = sizes.get(id(value), 1) if isinstance(value, dict | list) else 1
    return root, max(1, len(sizes))


def _is_cyclic(value: Any) -> bool:
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(value, False)]
    finished: set[int] = set()
    while stack:
        node, leaving = stack.pop()
        if not isinstance(node, dict | list):
            continue
        ident = id(node)
        if leaving:
            on_path.discard(ident)
            finished.add(ident)
            continue
        if ident in on_path:
            return True
        if ident in finished:
            continue
        on_path.add(ident)
        stack.append((node, True))
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, dict | list):
                if id(child) in on_path:
                    return True
                stack.append((child, False))
    return False


def _as_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _as_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_tree(v) for v in value]
    return value


def load(body: bytes) -> Any:
    """The JSON value of a single YAML document (see the module docstring)."""
    try:
        value = yaml.load(body, Loader=_Loader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise YamlBodyError(f"error decoding YAML: {' '.join(str(exc).split())}") from None
    return _bounded(value)


def load_all(text: str) -> list[Any]:
    """The JSON value of every document of ``text`` (each bounded as ``load``)."""
    try:
        values = list(yaml.load_all(text, Loader=_Loader))  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise YamlBodyError(f"error decoding YAML: {' '.join(str(exc).split())}") from None
    return [_bounded(v) for v in values]


def _bounded(value: Any) -> Any:
    if not isinstance(value, dict | list):
        return value
    if _is_cyclic(value):
        raise YamlBodyError("yaml: document contains excessive aliasing")
    expanded, distinct = _expanded_size(value)
    if expanded > MAX_EXPANDED_NODES and expanded > MAX_ALIAS_RATIO * distinct:
        raise YamlBodyError("yaml: document contains excessive aliasing")
    if expanded == distinct:
        return value
    return _as_tree(value)
