"""Label and field selectors, parsed and matched as kube-apiserver does.

Owns: :class:`LabelSelector` (the ``labelSelector=`` string grammar of
``k8s.io/apimachinery/pkg/labels`` and the ``metav1.LabelSelector`` object
form), :class:`FieldSelector` (the ``fieldSelector=`` grammar of
``k8s.io/apimachinery/pkg/fields``), and the label key/value validators they
share with metadata validation (:func:`validate_label_key`,
:func:`validate_label_value`).

Semantics: requirements are ANDed; ``!=``/``notin`` match objects lacking
the label; ``gt``/``lt`` (``a>1``) compare integers. An empty selector has
``is_empty`` true and matches everything; ``LabelSelector.from_dict(None)``
additionally sets ``is_null`` (Kubernetes' "nil selector selects nothing"
is for the caller to apply). Which fields a field selector may name is for
the caller too (``fields()``). Error messages follow Kubernetes' wording.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


class SelectorError(ValueError):
    """A selector that cannot be parsed (the server answers 400 BadRequest)."""


# -- label key / value validation (k8s.io/apimachinery/pkg/util/validation) ---

_QNAME_CHAR = "[A-Za-z0-9]"
_QNAME_EXT = "[-A-Za-z0-9_.]"
_QUALIFIED_NAME_FMT = f"({_QNAME_CHAR}{_QNAME_EXT}*)?{_QNAME_CHAR}"
_QUALIFIED_NAME = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_LABEL_VALUE_FMT = f"(({_QNAME_CHAR}{_QNAME_EXT}*)?{_QNAME_CHAR})?"
_LABEL_VALUE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")

_QNAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
              "with an alphanumeric character")
_NAME_PART_MSG = (f"name part {_QNAME_MSG} (e.g. 'MyName',  or 'my.name',  or '123-abc', "
                  f"regex used for validation is '{_QUALIFIED_NAME_FMT}')")
_QUALIFIED_MSG = (f"a qualified name {_QNAME_MSG} (e.g. 'MyName',  or 'my.name',  or "
                  f"'123-abc', regex used for validation is '{_QUALIFIED_NAME_FMT}') with an "
                  "optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                  "characters, '-' or '.', and must start and end with an alphanumeric "
                  f"character (e.g. 'example.com', regex used for validation is "
                  f"'{_DNS1123_SUBDOMAIN_FMT}')")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                    "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
                    f"validation is '{_LABEL_VALUE_FMT}')")


def validate_dns1123_subdomain(value: str) -> list[str]:
    """Kubernetes ``IsDNS1123Subdomain``: problems, empty when valid."""
    errs: list[str] = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append(_SUBDOMAIN_MSG)
    return errs


def validate_label_key(key: str) -> list[str]:
    """Kubernetes ``IsQualifiedName``: problems with a label key, empty when valid."""
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
        errs: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs = ["prefix part must be non-empty"]
        else:
            errs = ["prefix part " + e for e in validate_dns1123_subdomain(prefix)]
    else:
        return [_QUALIFIED_MSG]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if name and not _QUALIFIED_NAME.match(name):
        errs.append(_NAME_PART_MSG)
    return errs


def validate_label_value(value: str) -> list[str]:
    """Kubernetes ``IsValidLabelValue``: problems with a label value, empty when valid."""
    errs: list[str] = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _LABEL_VALUE.match(value):
        errs.append(_LABEL_VALUE_MSG)
    return errs


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- label selector ---------------------------------------------------------------

EXISTS = "exists"
DOES_NOT_EXIST = "!"
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
IN = "in"
NOT_IN = "notin"
GREATER_THAN = "gt"
LESS_THAN = "lt"


@dataclass(frozen=True)
class Requirement:
    """One ANDed term: ``key op values`` (values sorted, as Kubernetes keeps them)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @classmethod
    def new(cls, key: str, operator: str, values: list[str] | tuple[str, ...]) -> Requirement:
        """Validate like ``labels.NewRequirement``; raises :class:`SelectorError`."""
        errs = validate_label_key(key)
        if errs:
            raise SelectorError(f"key: Invalid value: {_quote(key)}: {'; '.join(errs)}")
        vals = sorted(set(values))
        if operator in (IN, NOT_IN):
            if not vals:
                raise SelectorError(
                    "values: Invalid value: []: for 'in', 'notin' operators, values set "
                    "can't be empty")
        elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
            if len(vals) != 1:
                raise SelectorError(
                    "values: Invalid value: []: exact-match compatibility requires one single "
                    "value")
        elif operator in (EXISTS, DOES_NOT_EXIST):
            if vals:
                raise SelectorError(
                    "values: Invalid value: []: values set must be empty for exists and does "
                    "not exist")
        elif operator in (GREATER_THAN, LESS_THAN):
            if len(vals) != 1:
                raise SelectorError(
                    "values: Invalid value: []: for 'Gt', 'Lt' operators, exactly one value "
                    "is required")
            if not re.fullmatch(r"[+-]?[0-9]+", vals[0]):
                raise SelectorError(
                    f"values[0]: Invalid value: {_quote(vals[0])}: for 'Gt', 'Lt' operators, "
                    "the value must be an integer")
            return cls(key, operator, tuple(vals))
        else:
            raise SelectorError(f"operator: Unsupported value: {_quote(operator)}")
        for i, v in enumerate(vals):
            verrs = validate_label_value(v)
            if verrs:
                raise SelectorError(
                    f"values[{i}][{key}]: Invalid value: {_quote(v)}: {'; '.join(verrs)}")
        return cls(key, operator, tuple(vals))

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (NOT_IN, NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GREATER_THAN, LESS_THAN):
            if self.key not in labels:
                return False
            try:
                have = int(labels[self.key])
            except ValueError:
                return False
            want = int(self.values[0])
            return have > want if op == GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        op = self.operator
        if op == EXISTS:
            return self.key
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        if op in (IN, NOT_IN):
            # a lone empty value renders as "(,)": "()" would parse as an empty set
            joined = "," if self.values == ("",) else ",".join(self.values)
            return f"{self.key} {op} ({joined})"
        if op == GREATER_THAN:
            return f"{self.key}>{self.values[0]}"
        if op == LESS_THAN:
            return f"{self.key}<{self.values[0]}"
        return f"{self.key}{op}{self.values[0]}"


# lexer tokens
_END, _IDENT, _NOT, _NEQ, _EQ, _DEQ, _COMMA, _OPEN, _CLOSE, _IN, _NOTIN, _GT, _LT = range(13)
_SPECIAL = {"!": _NOT, "!=": _NEQ, "=": _EQ, "==": _DEQ, ",": _COMMA, "(": _OPEN,
            ")": _CLOSE, ">": _GT, "<": _LT}
_SPECIAL_CHARS = set("!=,()<>")


def _lex(text: str) -> list[tuple[int, str]]:
    tokens: list[tuple[int, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in _SPECIAL_CHARS:
            two = text[i:i + 2]
            if two in ("!=", "=="):
                tokens.append((_SPECIAL[two], two))
                i += 2
            else:
                tokens.append((_SPECIAL[c], c))
                i += 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in _SPECIAL_CHARS:
                j += 1
            word = text[i:j]
            tok = _IN if word == "in" else _NOTIN if word == "notin" else _IDENT
            tokens.append((tok, word))
            i = j
    tokens.append((_END, ""))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def peek(self, values: bool = False) -> tuple[int, str]:
        tok, lit = self.tokens[self.pos]
        if values and tok in (_IN, _NOTIN):
            tok = _IDENT
        return tok, lit

    def next(self, values: bool = False) -> tuple[int, str]:
        tok_lit = self.peek(values)
        if self.pos < len(self.tokens) - 1:
            self.pos += 1
        return tok_lit

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self.peek(values=True)
            if tok in (_IDENT, _NOT):
                try:
                    reqs.append(self.requirement())
                except SelectorError as e:
                    raise SelectorError(f"unable to parse requirement: {e}") from None
                tok, lit = self.next(values=True)
                if tok == _END:
                    return reqs
                if tok == _COMMA:
                    t2, l2 = self.peek(values=True)
                    if t2 not in (_IDENT, _NOT):
                        raise SelectorError(f"found '{l2}', expected: identifier after ','")
                    continue
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            if tok == _END:
                return reqs
            raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def requirement(self) -> Requirement:
        key, op = self.key_and_operator()
        if op in (EXISTS, DOES_NOT_EXIST):
            return Requirement.new(key, op, [])
        op = self.operator()
        if op in (IN, NOT_IN):
            values = self.values()
        else:
            values = self.exact_value()
        return Requirement.new(key, op, values)

    def key_and_operator(self) -> tuple[str, str]:
        op = ""
        tok, lit = self.next()
        if tok == _NOT:
            op = DOES_NOT_EXIST
            tok, lit = self.next()
        if tok != _IDENT:
            raise SelectorError(f"found '{lit}', expected: identifier")
        errs = validate_label_key(lit)
        if errs:
            raise SelectorError(f"key: Invalid value: {_quote(lit)}: {'; '.join(errs)}")
        t2, _ = self.peek()
        if t2 in (_END, _COMMA):
            if op != DOES_NOT_EXIST:
                op = EXISTS
        elif op == DOES_NOT_EXIST:
            raise SelectorError(f"found '{self.peek()[1]}', expected: ',' or 'end of string'")
        return lit, op

    def operator(self) -> str:
        tok, lit = self.next()
        ops = {_DEQ: DOUBLE_EQUALS, _EQ: EQUALS, _GT: GREATER_THAN, _LT: LESS_THAN, _IN: IN,
               _NEQ: NOT_EQUALS, _NOTIN: NOT_IN}
        if tok not in ops:
            raise SelectorError(f"found '{lit}', expected: =, !=, ==, in, notin, >, <")
        return ops[tok]

    def values(self) -> list[str]:
        tok, lit = self.next()
        if tok != _OPEN:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.peek(values=True)
        if tok in (_IDENT, _COMMA):
            vals = self.identifiers()
            tok, lit = self.next()
            if tok != _CLOSE:
                raise SelectorError(f"found '{lit}', expected: ')'")
            return vals
        if tok == _CLOSE:
            self.next()
            return []
        raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")

    def identifiers(self) -> list[str]:
        vals: list[str] = []
        while True:
            tok, lit = self.next(values=True)
            if tok == _IDENT:
                vals.append(lit)
                t2, l2 = self.peek(values=True)
                if t2 == _COMMA:
                    continue
                if t2 == _CLOSE:
                    return vals
                raise SelectorError(f"found '{l2}', expected: ',' or ')'")
            if tok == _COMMA:
                if not vals:
                    vals.append("")
                t2, _ = self.peek(values=True)
                if t2 == _CLOSE:
                    vals.append("")
                    return vals
                if t2 == _COMMA:
                    vals.append("")
                    continue
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> list[str]:
        tok, lit = self.peek(values=True)
        if tok in (_END, _COMMA):
            return [""]
        tok, lit = self.next(values=True)
        if tok == _IDENT:
            return [lit]
        raise SelectorError(f"found '{lit}', expected: identifier")


@dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector: requirements ANDed, sorted by key."""

    requirements: tuple[Requirement, ...] = ()
    is_null: bool = False

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """Parse ``labelSelector=`` syntax; raises :class:`SelectorError`."""
        reqs = _Parser(text).parse()
        return cls(tuple(sorted(reqs, key=lambda r: r.key)))

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> LabelSelector:
        """From a ``metav1.LabelSelector`` (``matchLabels``/``matchExpressions``)."""
        if d is None:
            return cls((), is_null=True)
        if not isinstance(d, dict):
            raise SelectorError("a label selector must be an object")
        reqs: list[Requirement] = []
        match_labels = d.get("matchLabels")
        match_labels = {} if match_labels is None else match_labels
        if not isinstance(match_labels, dict):
            raise SelectorError("matchLabels must be an object")
        for k, v in match_labels.items():
            if not isinstance(v, str):
                raise SelectorError(f"matchLabels[{k}] must be a string")
            reqs.append(Requirement.new(str(k), EQUALS, [v]))
        exprs = d.get("matchExpressions")
        exprs = [] if exprs is None else exprs
        if not isinstance(exprs, list):
            raise SelectorError("matchExpressions must be an array")
        ops = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}
        for expr in exprs:
            if not isinstance(expr, dict):
                raise SelectorError("matchExpressions entries must be objects")
            operator = expr.get("operator")
            if operator not in ops:
                raise SelectorError(f"{_quote(str(operator))} is not a valid label selector "
                                    "operator")
            values = expr.get("values")
            values = [] if values is None else values
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise SelectorError("matchExpressions values must be strings")
            reqs.append(Requirement.new(str(expr.get("key", "")), ops[str(operator)], values))
        return cls(tuple(sorted(reqs, key=lambda r: r.key)))

    @property
    def is_empty(self) -> bool:
        """True when there are no requirements (matches everything)."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def needles(self) -> tuple[bytes, ...]:
        """Byte strings the compact JSON (orjson) of every matching object
        contains: ``"key":"value"`` for an equality (or one-value ``in``)
        and ``"key":`` for an ``exists``. A store skips rows lacking one
        without decoding them (a prefilter: ``matches`` still decides). Only
        for keys and values of plain characters, which JSON writes verbatim."""
        out: list[bytes] = []
        for req in self.requirements:
            if not _VERBATIM.fullmatch(req.key):
                continue
            key = b'"' + req.key.encode() + b'":'
            if req.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(req.values) == 1:
                value = req.values[0]
                if _VERBATIM.fullmatch(value):
                    out.append(key + b'"' + value.encode() + b'"')
            elif req.operator in (EXISTS, GREATER_THAN, LESS_THAN):
                out.append(key)
        return tuple(out)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


_VERBATIM = re.compile(r"[A-Za-z0-9._/-]+")
"""Characters JSON encoders write as they are (no escape in any of them)."""


# -- field selector ---------------------------------------------------------------

_FIELD_OPERATORS = ("!=", "==", "=")


def escape_field_value(value: str) -> str:
    """Escape ``\\``, ``,`` and ``=`` as ``fields.EscapeValue`` does."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape(value: str) -> str:
    if not any(c in value for c in "\\,="):
        return value
    out: list[str] = []
    in_slash = False
    for c in value:
        if in_slash:
            if c in "\\,=":
                out.append(c)
            else:
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{c}")
            in_slash = False
            continue
        if c == "\\":
            in_slash = True
        elif c in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {c}")
        else:
            out.append(c)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, c in enumerate(text):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in _FIELD_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


@dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector: ``(field, op, value)`` terms ANDed, op ``=`` or ``!=``."""

    requirements: list[tuple[str, str, str]] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> FieldSelector:
        """Parse ``fieldSelector=`` syntax; raises :class:`SelectorError`."""
        reqs: list[tuple[str, str, str]] = []
        if not text:
            return cls(reqs)
        for part in sorted(_split_terms(text)):
            if not part.strip():
                continue
            split = _split_term(part)
            if split is None:
                raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
            lhs, op, rhs = split
            reqs.append((lhs.strip(), "!=" if op == "!=" else "=", _unescape(rhs)))
        return cls(reqs)

    @property
    def is_empty(self) -> bool:
        return not self.requirements

    def fields(self) -> set[str]:
        return {f for f, _, _ in self.requirements}

    def matches(self, get: Callable[[str], str | None]) -> bool:
        """``get(field)`` gives the object's value (None = absent, compared as "")."""
        for f, op, value in self.requirements:
            have = get(f)
            have = "" if have is None else have
            if (have == value) != (op == "="):
                return False
        return True

    def __str__(self) -> str:
        return ",".join(f"{f}{op}{escape_field_value(v)}" for f, op, v in self.requirements)
