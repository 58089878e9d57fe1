"""Reading Java ``.properties`` files, the format of Kafka's own config files: the broker's
``server.properties`` (``python -m broker --config``) and the client config files
(kafkactl's ``--command-config``, ``--consumer.config``, ``client.properties``).
Sans-I/O apart from :func:`load`.

The format, as ``java.util.Properties.load`` reads it:

- A logical line is one line of the file, or several when a line ends in an
  odd number of backslashes (the backslash joins it to the next line, whose
  leading white space is dropped).
- Lines that are blank, or whose first non-blank character is ``#`` or ``!``,
  are comments.
- The key runs to the first unescaped ``=``, ``:`` or white space; white space
  around one ``=`` or ``:`` separator is skipped; the rest of the line is the
  value (possibly empty). ``a=1``, ``a: 1`` and ``a 1`` are the same.
- Escapes in keys and values: ``\\t \\n \\r \\f``, ``\\uXXXX``, and a backslash
  before any other character stands for that character (``\\=``, ``\\:``,
  ``\\ ``, ``\\\\``).
- A key given twice: the later value wins.

Kafka's files are ISO-8859-1 in Java; we read UTF-8 (what editors write
today), which agrees on ASCII.
"""

from __future__ import annotations

from pathlib import Path

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITE = " \t\f"


class PropertiesError(ValueError):
    """A file that is not a readable properties file; the message names the file and line."""


def load(path: Path) -> dict[str, tuple[int, str]]:
    """``{key: (line number, value)}`` of the properties file at ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PropertiesError(f"cannot read {path}: no such file") from None
    except IsADirectoryError:
        raise PropertiesError(f"cannot read {path}: is a directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PropertiesError(f"cannot read {path}: {exc}") from None
    return parse(text, str(path))


def parse(text: str, source: str = "<text>") -> dict[str, tuple[int, str]]:
    """The properties in ``text`` (see the module docstring); ``source`` names it in errors."""
    out: dict[str, tuple[int, str]] = {}
    for number, line in _logical_lines(text):
        key, value = _split(line, source, number)
        out[key] = (number, value)
    return out


def _logical_lines(text: str):
    """``(first line number, logical line)`` for every line that is not blank or a comment."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i].lstrip(_WHITE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(_WHITE)
            i += 1
        if _continues(line):  # a backslash on the last line of the file joins nothing
            line = line[:-1]
        yield number, line


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split(line: str, source: str, number: int) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n and line[i] not in "=:" + _WHITE:
        i += 2 if line[i] == "\\" else 1
    key_end = min(i, n)
    while i < n and line[i] in _WHITE:
        i += 1
    if i < n and line[i] in "=:":
        i += 1
        while i < n and line[i] in _WHITE:
            i += 1
    return _unescape(line[:key_end], source, number), _unescape(line[i:], source, number)


def _unescape(text: str, source: str, number: int) -> str:
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            try:
                if len(digits) != 4:
                    raise ValueError
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise PropertiesError(f"{source} line {number}: malformed \\uXXXX escape") from None
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
