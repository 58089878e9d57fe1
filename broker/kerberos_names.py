"""Kerberos principals to short names: ``sasl.kerberos.principal.to.local.rules``, as Kafka 2.7 maps them.

A client that authenticates with GSSAPI (Kerberos) is known by its principal, ``alice@EXAMPLE.COM`` or
``kafka/broker1.example.com@EXAMPLE.COM``; its Kafka principal is ``User:<short name>``, the short name
made by the rules of ``sasl.kerberos.principal.to.local.rules`` (Kafka's ``KerberosShortNamer``, which
copies Hadoop's ``hadoop.security.auth_to_local``). :class:`ShortNamer` is built once from the setting;
:meth:`ShortNamer.short_name` maps one principal.

Principals (:class:`KerberosName`) are read as Kafka reads them: ``service/host@REALM`` (two
components), ``name@REALM`` (one), or a bare ``name`` without realm. A component or realm cannot
contain ``/`` or ``@`` and there is no escape (``\\`` is an ordinary character, as in Kafka); text with
an ``@`` that is not of those forms (``a/b/c@R``, ``a@b@R``) is malformed; text without ``@`` is one bare
name, ``/`` and all. Empty parts are allowed (``@R``, ``a/@R``).

The setting is a list: comma-separated (whitespace around a comma ignored, as Kafka's list settings;
whitespace alone does not separate two rules), empty meaning no rules; Kafka's default is ``DEFAULT``.
Each item is one of::

    DEFAULT
    RULE:[n:format]
    RULE:[n:format](match)
    RULE:[n:format](match)s/from/to/
    RULE:[n:format](match)s/from/to/g
    ... any of those followed by /L (lower case) or /U (upper case), e.g. RULE:[1:$1]/L, s/a/b//U, s/a/b/g/L

``DEFAULT``
    applies when the principal's realm is the default realm (:func:`default_realm`; ``""`` when none is
    configured, as Kafka): the short name is the first component (``kafka/host@R`` -> ``kafka``).
``RULE:[n:format]``
    applies only to principals of ``n`` components. ``format`` makes a string from ``$0`` (the realm),
    ``$1`` and ``$2`` (the components) and literal text (it cannot hold ``]``; a ``$`` must be followed
    by a number). With ``(match)``, a regular expression that must match that whole string (it cannot
    hold ``)``), the rule applies only when it does. ``s/from/to/`` then replaces the first match of the
    regular expression ``from`` by ``to`` (every match with ``g``); neither can hold ``/``; in ``to``,
    ``$1`` is a group of ``from`` and ``\\`` makes the next character literal (Java's replacement syntax;
    the longest group number that exists is taken, so with one group ``$12`` is group 1 then ``2``).
    ``/L`` or ``/U`` lower- or upper-cases the result.

Invariants (each Kafka 2.7's):

* A bare name (no realm) is its own short name; no rule is consulted, so it never fails.
* The rules are tried in order; the first that applies gives the short name, the later ones are ignored.
* A result holding ``/`` or ``@`` is an error (:class:`NoMatchingRule`), not a reason to try the next
  rule; the check comes before ``/L`` or ``/U``.
* When no rule applies, :class:`NoMatchingRule`: the authentication fails.
* A rule that cannot be read, or whose ``(match)`` or ``from`` does not compile, is refused when the
  setting is read (:class:`KerberosNameError` naming the property and the rule). A ``format`` with a bad
  ``$`` or an index out of range, or a ``to`` with a bad group reference, is found only when the rule is
  tried on a principal of its ``n`` components (for ``to``: when ``from`` matches), as in Kafka:
  :class:`KerberosNameError` from :meth:`ShortNamer.short_name`.

Kafka's regular expressions are Java's (``java.util.regex``); they are compiled here by Python's
:mod:`re` with ASCII classes (``\\d``, ``\\w``, ``\\s`` and case-insensitive matching ASCII only, as
Java's by default; ``\\b`` knows Unicode letters, as Java's), which reads the constructs rules use
(literals, ``.``, classes, ``*``, ``+``, ``?``, ``{m,n}``, lazy and possessive repetitions, groups,
alternation, anchors, look-arounds, back-references) as Java does. A rule Java would read otherwise is
refused when the setting is read rather than read differently: Java-only syntax (``\\p{Alpha}``,
``\\Q...\\E``, ``(?<name>...)``, ``\\z``, a ``(?i)`` after the start, a repeated anchor such as ``^*``),
nested classes and ``&&`` in a class, ``(?P...)``, a ``{`` that is not a repetition. Java's
``replaceFirst``/``replaceAll`` are reproduced, including where empty matches fall. One difference is
left: ``/L`` turns a capital sigma into ``ς`` or ``σ`` by Unicode's final-sigma rule, Java by its
word-break rules, which sometimes choose the other.
"""

from __future__ import annotations

import ctypes
import re
import warnings
from dataclasses import dataclass
from typing import Sequence, Union

__all__ = ["KerberosNameError", "NoMatchingRule", "KerberosName", "ShortNamer", "default_realm",
           "PROPERTY", "DEFAULT_RULES"]

#: The Kafka property the rules come from.
PROPERTY = "sasl.kerberos.principal.to.local.rules"
#: Kafka's default value of :data:`PROPERTY`.
DEFAULT_RULES = "DEFAULT"

_INT_MAX = 2**31 - 1


class KerberosNameError(ValueError):
    """A principal or a rule that cannot be read or used; ``str(err)`` is one line naming it."""


class NoMatchingRule(KerberosNameError):
    """No rule applies to a principal (or the one that applies makes a name holding ``/`` or ``@``)."""


# -- principals --------------------------------------------------------------------------------------

_NAME = re.compile(r"([^/@]*)(/([^/@]*))?@([^/@]*)")


@dataclass(frozen=True)
class KerberosName:
    """A Kerberos principal: ``service_name[/host_name][@realm]``."""

    service_name: str
    host_name: str | None = None
    realm: str | None = None

    @classmethod
    def parse(cls, text: str) -> KerberosName:
        """Read ``service/host@REALM``, ``name@REALM`` or a bare ``name`` (Kafka's ``KerberosName.parse``)."""
        match = _NAME.fullmatch(text)
        if match is None:
            if "@" in text:
                raise KerberosNameError(f"malformed Kerberos name {text!r}")
            return cls(text)
        return cls(match.group(1), match.group(3), match.group(4))

    def __str__(self) -> str:
        host = "" if self.host_name is None else "/" + self.host_name
        realm = "" if self.realm is None else "@" + self.realm
        return self.service_name + host + realm


# -- rules -------------------------------------------------------------------------------------------

# Kafka's RULE_PARSER, with \d as Java reads it (ASCII digits only).
_RULE = re.compile(r"((DEFAULT)|((RULE:\[([0-9]*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?)))")
_PARAMETER = re.compile(r"([^$]*)(\$([0-9]*))?")
_NON_SIMPLE = re.compile(r"[/@]")
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")  # Java's \s*,\s*
_JAVA_TRIM = "".join(map(chr, range(33)))  # what Java's String.trim() removes

# A replacement: literal text and group numbers, or why Java would refuse it (when it is used).
_Replacement = Union[tuple[Union[str, int], ...], str]


def _compile(regex: str, what: str, rule: str, prop: str) -> re.Pattern[str]:
    def refuse(why: str) -> KerberosNameError:
        return KerberosNameError(f"{prop}: the {what} regular expression {regex!r} of rule {rule!r} {why}")

    translated, why = _from_java(regex)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "possible nested set": _from_java has said
        try:
            pattern = re.compile(translated, re.ASCII)
        except (re.error, ValueError, OverflowError, RecursionError) as err:
            raise refuse(f"cannot be compiled ({err})") from None
    if why is None and pattern.groupindex:
        why = "uses (?P...), which Java does not accept"
    if why is not None:
        raise refuse(why)
    return pattern


_REPETITION = re.compile(r"\{[0-9]+(,[0-9]*)?\}")


def _from_java(regex: str) -> tuple[str, str | None]:
    """``regex`` for Python's :mod:`re` (with ``re.ASCII``), and why it cannot be used if it cannot.

    ``\\b`` and ``\\B`` become ``(?u:\\b)`` and ``(?u:\\B)``: Java's word boundaries know Unicode letters
    where its ``\\w`` does not. Refused: a ``[`` or ``&&`` inside a class (Java's nested classes and
    intersections), ``\\b`` inside a class, a ``{`` that is not a repetition (Java refuses it)."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(regex):
        char = regex[i]
        if char == "\\":
            pair = regex[i:i + 2]
            if pair in ("\\b", "\\B"):
                if in_class:
                    return regex, f"has {pair} inside a class, which Java does not accept"
                pair = f"(?u:{pair})"
            out.append(pair)
            i += 2
            continue
        out.append(char)
        i += 1
        if in_class:
            if char == "[" or (char == "&" and regex[i:i + 1] == "&"):
                op = "[" if char == "[" else "&&"
                return regex, f"has {op} inside a class, which Java reads as a class operation"
            in_class = char != "]"
        elif char == "[":
            in_class = True
            for literal in ("^", "]"):  # [^...], and a first ']' is a literal, for both
                if regex[i:i + 1] == literal:
                    out.append(literal)
                    i += 1
        elif char == "{" and not _REPETITION.match(regex, i - 1):
            return regex, "has a '{' that does not begin a repetition {n}, {n,} or {n,m}, which Java does not accept"
    return "".join(out), None


def _parse_replacement(to: str, groups: int) -> _Replacement:
    """Java's ``Matcher.appendReplacement`` syntax, read once: pieces, or Java's complaint as a string."""
    pieces: list[str | int] = []
    literal: list[str] = []
    i = 0
    while i < len(to):
        char = to[i]
        if char == "\\":
            i += 1
            if i == len(to):
                return "character to be escaped is missing"
            literal.append(to[i])
            i += 1
        elif char == "$":
            i += 1
            if i == len(to):
                return "illegal group reference: group index is missing"
            if to[i] == "{":
                return "named group references are not supported (the regular expression has no named groups)"
            if not "0" <= to[i] <= "9":
                return f"illegal group reference ${to[i]}"
            number = ord(to[i]) - ord("0")
            i += 1
            while i < len(to) and "0" <= to[i] <= "9" and number * 10 + ord(to[i]) - ord("0") <= groups:
                number = number * 10 + ord(to[i]) - ord("0")
                i += 1
            if number > groups:
                return f"no group {number}"
            if literal:
                pieces.append("".join(literal))
                literal = []
            pieces.append(number)
        else:
            literal.append(char)
            i += 1
    if literal:
        pieces.append("".join(literal))
    return tuple(pieces)


@dataclass(frozen=True)
class _Rule:
    text: str  # as written in the setting
    is_default: bool
    components: int = 0
    format: str = ""
    match: re.Pattern[str] | None = None
    sub_from: re.Pattern[str] | None = None
    sub_to: _Replacement = ()
    repeat: bool = False
    lower: bool = False
    upper: bool = False

    @classmethod
    def parse(cls, text: str, prop: str) -> _Rule:
        found = _RULE.match(text)
        if found is None:
            raise KerberosNameError(f"{prop}: invalid rule {text!r} (expected DEFAULT or RULE:[n:format]...)")
        if found.end() != len(text):
            raise KerberosNameError(f"{prop}: invalid rule {text!r} (cannot read {text[found.end():]!r})")
        if found.group(2) is not None:
            return cls(text, True)
        if not found.group(5) or int(found.group(5)) > _INT_MAX:
            raise KerberosNameError(f"{prop}: invalid rule {text!r} (the number of components "
                                    f"{found.group(5)!r} is not a number)")
        match = None if found.group(8) is None else _compile(found.group(8), "match", text, prop)
        sub_from, sub_to = None, ()
        if found.group(10) is not None:
            sub_from = _compile(found.group(10), "substitution", text, prop)
            sub_to = _parse_replacement(found.group(11), sub_from.groups)
        return cls(text, False, int(found.group(5)), found.group(6), match, sub_from, sub_to,
                   found.group(12) == "g", found.group(13) == "L", found.group(13) == "U")

    def _format(self, params: list[str]) -> str:
        """Kafka's ``KerberosRule.replaceParameters``."""
        out: list[str] = []
        start = 0
        while start < len(self.format):
            found = _PARAMETER.match(self.format, start)
            assert found is not None  # the pattern matches anywhere
            out.append(found.group(1))
            digits = found.group(3)
            if digits is not None:
                if not digits or int(digits) > _INT_MAX:
                    raise KerberosNameError(f"rule {self.text!r}: bad parameter ${digits} in {self.format!r}")
                index = int(digits)
                if index >= len(params):
                    raise KerberosNameError(f"rule {self.text!r}: index {index} in {self.format!r} is outside "
                                            f"the valid range 0 to {len(params) - 1}")
                out.append(params[index])
            start = found.end()
        return "".join(out)

    def _substitute(self, base: str) -> str:
        """Java's ``Matcher.replaceFirst``/``replaceAll``: after an empty match the search moves on by one."""
        assert self.sub_from is not None
        out: list[str] = []
        tail = search = 0
        while search <= len(base):
            found = self.sub_from.search(base, search)
            if found is None:
                break
            if isinstance(self.sub_to, str):
                raise KerberosNameError(f"rule {self.text!r}: cannot use the replacement of its substitution "
                                        f"({self.sub_to})")
            out.append(base[tail:found.start()])
            out.extend(p if isinstance(p, str) else found.group(p) or "" for p in self.sub_to)
            tail = found.end()
            if not self.repeat:
                break
            search = found.end() + (1 if found.end() == found.start() else 0)
        out.append(base[tail:])
        return "".join(out)

    def apply(self, params: list[str], in_default_realm: bool, prop: str) -> str | None:
        """The short name, or None when this rule does not apply (Kafka's ``KerberosRule.apply``);
        ``params`` are the realm and the components."""
        result = None
        if self.is_default:
            if in_default_realm:
                result = params[1]
        elif len(params) - 1 == self.components:
            base = self._format(params)
            if self.match is None or self.match.fullmatch(base):
                result = base if self.sub_from is None else self._substitute(base)
        if result is None:
            return None
        if _NON_SIMPLE.search(result):
            raise NoMatchingRule(f"rule {self.text!r} of {prop} makes {result!r}, which holds '/' or '@'")
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result


def _split(rules: Sequence[str] | str) -> list[str]:
    """A list setting as Kafka reads one: trimmed, split at commas (and the whitespace around them)."""
    if isinstance(rules, str):
        trimmed = rules.strip(_JAVA_TRIM)
        return _LIST_SEPARATOR.split(trimmed) if trimmed else []
    return list(rules)


class ShortNamer:
    """The rules of :data:`PROPERTY`, read once; :meth:`short_name` maps a principal."""

    def __init__(self, rules: list[_Rule], default_realm: str | None, prop: str = PROPERTY) -> None:
        self._rules = tuple(rules)
        self._default_realm = default_realm or ""  # Kafka uses "" when no default realm is found
        self._prop = prop

    @classmethod
    def from_rules(cls, rules: Sequence[str] | str, default_realm: str | None, prop: str = PROPERTY) -> ShortNamer:
        """Read the rules (the setting's text, or its items); raises :class:`KerberosNameError` naming
        ``prop`` and the first rule that cannot be read."""
        return cls([_Rule.parse(text, prop) for text in _split(rules)], default_realm, prop)

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(rule.text for rule in self._rules)

    def short_name(self, principal: str | KerberosName) -> str:
        """The short name of ``principal`` (``User:<it>`` is its Kafka principal).

        Raises :class:`NoMatchingRule` when no rule applies (or the rule that applies makes a name holding
        ``/`` or ``@``), :class:`KerberosNameError` when the principal is malformed or the rule that is
        tried cannot be used (a bad ``$`` in its format or its replacement)."""
        name = KerberosName.parse(principal) if isinstance(principal, str) else principal
        if name.host_name is None:
            if name.realm is None:
                return name.service_name
            params = [name.realm, name.service_name]
        else:
            # a host without realm is only made by hand; Java's "null" is what its format would show
            params = ["null" if name.realm is None else name.realm, name.service_name, name.host_name]
        in_default_realm = name.realm == self._default_realm
        for rule in self._rules:
            result = rule.apply(params, in_default_realm, self._prop)
            if result is not None:
                return result
        rules = ", ".join(self.rules) or "none"
        raise NoMatchingRule(f"no rule of {self._prop} applies to {str(name)!r} (rules: {rules})")

    def __repr__(self) -> str:
        return f"ShortNamer(rules={list(self.rules)!r}, default_realm={self._default_realm!r})"


# -- the local Kerberos configuration ----------------------------------------------------------------

def default_realm() -> str | None:
    """The default realm of the local Kerberos configuration (``default_realm`` of ``[libdefaults]`` in
    ``$KRB5_CONFIG`` or ``/etc/krb5.conf``, as libkrb5 finds it), or None when there is none or libkrb5
    (``libkrb5.so.3``, MIT Kerberos) is not installed."""
    try:
        lib = ctypes.CDLL("libkrb5.so.3")
    except OSError:
        return None
    init, get_realm = lib.krb5_init_context, lib.krb5_get_default_realm
    free_realm, free_context = lib.krb5_free_default_realm, lib.krb5_free_context
    init.argtypes, init.restype = [ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int32
    get_realm.argtypes, get_realm.restype = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int32
    free_realm.argtypes, free_realm.restype = [ctypes.c_void_p, ctypes.c_void_p], None
    free_context.argtypes, free_context.restype = [ctypes.c_void_p], None
    context = ctypes.c_void_p()
    if init(ctypes.byref(context)) != 0 or not context.value:
        return None
    try:
        realm = ctypes.c_void_p()
        if get_realm(context, ctypes.byref(realm)) != 0 or not realm.value:
            return None
        try:
            return ctypes.string_at(realm.value).decode("utf-8", "replace") or None
        finally:
            free_realm(context, realm)
    finally:
        free_context(context)
