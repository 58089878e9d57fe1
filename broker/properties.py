"""Java properties files (``server.properties``), read as ``java.util.Properties.load`` reads them.

The syntax, line by line:

* a line is ended by ``\\n``, ``\\r`` or ``\\r\\n``; leading spaces, tabs and form
  feeds are ignored;
* a blank line, or one whose first character is ``#`` or ``!``, is a comment;
* a line ending in an odd number of backslashes continues on the next line (the
  backslash and the next line's leading white space are dropped); a comment
  line never continues;
* the key runs up to the first unescaped ``=``, ``:``, space, tab or form feed;
  white space, then at most one ``=`` or ``:``, then white space again separate
  it from the value, which runs to the end of the line (trailing white space
  included, as in Java);
* in keys and values ``\\t``, ``\\n``, ``\\r``, ``\\f`` and ``\\uXXXX`` are escapes,
  and a backslash before any other character stands for that character;
* a key given twice keeps its last value.

Java reads the bytes as ISO-8859-1; here a file that is valid UTF-8 is read
as UTF-8 (paths with non-ASCII names written as they look), anything else as
ISO-8859-1. Sans-I/O apart from :func:`read_properties`.
"""

from __future__ import annotations

import re
from pathlib import Path

_WHITE = " \t\f"
_LINE_END = re.compile(r"\r\n|\r|\n")
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """A malformed line; ``str(err)`` names the line."""


def parse_properties(text: str) -> dict[str, str]:
    """Parse the text of a properties file (see the module docstring)."""
    lines = _LINE_END.split(text)
    result: dict[str, str] = {}
    i = 0
    while i < len(lines):
        number = i + 1
        line = lines[i].lstrip(_WHITE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i < len(lines):
                line += lines[i].lstrip(_WHITE)
                i += 1
        key, value = _split(line)
        result[_unescape(key, number)] = _unescape(value, number)
    return result


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split(line: str) -> tuple[str, str]:
    end = 0
    while end < len(line):
        c = line[end]
        if c == "\\":
            end += 2
            continue
        if c in "=:" or c in _WHITE:
            break
        end += 1
    rest = line[end:].lstrip(_WHITE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITE)
    return line[:end], rest


def _unescape(text: str, number: int) -> str:
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        e = text[i + 1]
        if e == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(f"line {number}: malformed \\uxxxx escape")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_SIMPLE_ESCAPES.get(e, e))
        i += 2
    return "".join(out)


def read_properties(path: Path) -> dict[str, str]:
    """Read and parse a properties file; OSError and PropertiesError pass through."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text)
