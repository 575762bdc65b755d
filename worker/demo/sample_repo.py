"""Write a small Python library's git history, for demos and tests without a network.

The library is `textkit` (slugs, whitespace, word wrap, an LRU cache, semantic
versions, durations, a CSV-ish parser, number helpers). Its history is a
script: a table of commits, each a few file changes plus who committed it,
what kind of commit it is, and what the mining filters should say about it.

The bugs are real. Every commit with `fail_to_pass` tests has tests that fail
on the parent once the commit's test files are applied, and pass on the
commit; `pass_to_fail` names tests (in files the commit does not touch) that
the commit breaks; `flaky` names tests that fail about half the time.

    python -m worker.demo.sample_repo PATH   # writes the repository, prints the commits

Standard library only; no Django.
"""

from __future__ import annotations

import struct
import sys
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional, Union

from worker.demo.history import Author, author_env, change_apply, edit, git, git_env, history_main, write


@dataclass(frozen=True)
class SampleCommit:
    sha: str
    subject: str  # first line of the message (decoded as latin-1 where it is not UTF-8)
    kind: str
    # None if the default mining filters keep the commit, else the first filter that drops it.
    expected_drop_reason: Optional[str]
    # pytest node ids: fail on parent + the commit's test files, pass on the commit.
    fail_to_pass: tuple[str, ...] = ()
    # pytest node ids in files the commit does not touch: pass on the parent, fail on the commit.
    pass_to_fail: tuple[str, ...] = ()
    # pytest node ids that fail about half the time on the commit.
    flaky: tuple[str, ...] = ()


_AUTHORS = {
    "ada": Author("Ada Brennan", "ada.brennan@example.org", "+0000"),
    "tomas": Author("Tomás Ferreira", "tomas.ferreira@example.org", "+0100"),
    "priya": Author("Priya Raman", "priya.raman@example.net", "+0530"),
    "jonas": Author("Jonas Keller", "jkeller@example.com", "-0500"),
}


@dataclass(frozen=True)
class _Step:
    author: str
    kind: str
    message: Union[str, bytes]
    changes: tuple
    expected_drop_reason: Optional[str] = None
    fail_to_pass: tuple[str, ...] = ()
    pass_to_fail: tuple[str, ...] = ()
    flaky: tuple[str, ...] = ()


def _tiny_png() -> bytes:
    """A valid 1x1 PNG (it contains NUL bytes, so git sees a binary file)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    pixels = zlib.compress(b"\x00\x2b\x6c\xb0\xff")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


# ---------------------------------------------------------------- the initial files

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "textkit"
version = "0.1.0"
description = "Small, dependency-free helpers for text and numbers."
readme = "README.md"
requires-python = ">=3.9"
license = {text = "MIT"}
dependencies = []

[project.optional-dependencies]
test = ["pytest>=7"]

[tool.setuptools]
packages = ["textkit"]

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["."]
"""

README = """\
# textkit

Small, dependency-free helpers for text and numbers.

```python
>>> from textkit import slugify, wrap_text
>>> slugify("Hello, World!")
'hello-world'
>>> wrap_text("the quick brown fox", 10)
['the quick', 'brown fox']
```

## Development

    python -m pip install -e ".[test]"
    python -m pytest
"""

GITIGNORE = """\
__pycache__/
*.egg-info/
.pytest_cache/
build/
dist/
"""

LICENSE = """\
MIT License

Copyright (c) the textkit authors

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, subject to the following conditions:
the above copyright notice and this permission notice shall be included in
all copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.
"""

INIT = '''\
"""textkit: small, dependency-free helpers for text and numbers."""

from textkit.slug import slugify
from textkit.text import normalize_space
from textkit.wrap import wrap_text

__version__ = "0.1.0"
__all__ = ["normalize_space", "slugify", "wrap_text"]
'''

# Bugs: accents are dropped instead of transliterated; the ends are stripped of
# "-" whatever the separator; max_length can leave a trailing separator.
SLUG = '''\
"""Turn arbitrary titles into URL-friendly slugs."""

import re

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(text, separator="-", max_length=None):
    """Return a lowercase slug of `text`, words joined by `separator`.

    >>> slugify("Hello, World!")
    'hello-world'
    """
    text = text.encode("ascii", "ignore").decode("ascii")
    text = _NON_ALNUM.sub(separator, text.lower())
    text = text.strip("-")
    if max_length is not None:
        text = text[:max_length]
    return text
'''

TEXT = '''\
"""Whitespace helpers."""


def normalize_space(text):
    """Collapse whitespace."""
    return " ".join(text.split())
'''

# Bug: the space between words is not counted, so lines can be one too long.
WRAP = '''\
"""Greedy word wrapping."""

from textkit.text import normalize_space


def wrap_text(text, width=70):
    """Split `text` into lines of at most `width` characters.

    Words longer than `width` get a line of their own.
    """
    if width < 1:
        raise ValueError("width must be at least 1")
    lines = []
    current = ""
    for word in normalize_space(text).split(" "):
        if not word:
            continue
        if not current:
            current = word
        elif len(current) + len(word) <= width:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines
'''

TEST_SLUG = '''\
from textkit.slug import slugify


def test_slugify_basic():
    assert slugify("Hello, World!") == "hello-world"


def test_slugify_collapses_punctuation():
    assert slugify("a -- b ... c") == "a-b-c"


def test_slugify_max_length():
    assert slugify("hello world", max_length=5) == "hello"
'''

TEST_TEXT = '''\
from textkit.text import normalize_space


def test_normalize_space_collapses_runs():
    assert normalize_space("a  b\\t c") == "a b c"


def test_normalize_space_trims():
    assert normalize_space("  padded  ") == "padded"
'''

TEST_WRAP = '''\
import pytest

from textkit.wrap import wrap_text


def test_wrap_short_text_is_one_line():
    assert wrap_text("hello world", 20) == ["hello world"]


def test_wrap_splits_on_words():
    assert wrap_text("the quick brown fox", 10) == ["the quick", "brown fox"]


def test_wrap_reflows_paragraphs():
    assert wrap_text("one two\\n\\nthree   four", 40) == ["one two three four"]


def test_wrap_rejects_zero_width():
    with pytest.raises(ValueError):
        wrap_text("text", 0)
'''

DOCS_INDEX = """\
# textkit documentation

textkit collects small helpers that keep turning up in scripts and web apps:

- `slugify(text, separator="-", max_length=None)`: URL-friendly slugs.
- `normalize_space(text)`: collapse runs of whitespace.
- `wrap_text(text, width=70)`: greedy word wrapping.

Everything is plain Python with no dependencies, tested on Python 3.9 and later.
"""

DOCS_SLUG = """\
# Slugs

`slugify` lowercases its input, replaces every run of characters other than
ASCII letters and digits with the separator, and trims separators from both
ends.

    >>> slugify("Hello, World!")
    'hello-world'
    >>> slugify("Hello, World!", separator="_")
    'hello_world'

`max_length` cuts the slug to at most that many characters.
"""

# ---------------------------------------------------------------- the LRU cache

# Bugs: get() does not mark the entry as recently used; put() of an existing key
# evicts another entry when full; the repr misses its closing parenthesis.
CACHE = '''\
"""A least-recently-used cache with a fixed capacity."""

from collections import OrderedDict

_MISSING = object()


class LRUCache:
    """Map keys to values, forgetting the least recently used entry when full."""

    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._data = OrderedDict()

    def __len__(self):
        return len(self._data)

    def __contains__(self, key):
        return key in self._data

    def __repr__(self):
        return f"LRUCache(capacity={self.capacity}, size={len(self)}"

    def get(self, key, default=None):
        """Return the value for `key`, or `default` if it is not cached."""
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            return default
        return value

    def put(self, key, value):
        """Cache `value` under `key`, evicting the least recently used entry if full."""
        if len(self._data) >= self.capacity:
            self._data.popitem(last=False)
        self._data[key] = value
        self._data.move_to_end(key)

    def clear(self):
        self._data.clear()
'''

TEST_CACHE = '''\
import pytest

from textkit.cache import LRUCache


def test_put_then_get():
    cache = LRUCache(2)
    cache.put("a", 1)
    assert cache.get("a") == 1
    assert cache.get("missing", 0) == 0


def test_evicts_oldest_when_full():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    assert "a" not in cache
    assert len(cache) == 2


def test_capacity_must_be_positive():
    with pytest.raises(ValueError):
        LRUCache(0)
'''

DOCS_CACHE = """\
# LRU cache

`LRUCache(capacity)` maps keys to values and remembers at most `capacity`
entries. When it is full, adding a new key forgets the entry that was used
least recently.

    >>> cache = LRUCache(2)
    >>> cache.put("a", 1)
    >>> cache.put("b", 2)
    >>> cache.get("a")
    1
    >>> cache.put("c", 3)   # forgets "b", the least recently used
    >>> "b" in cache
    False

Methods:

- `get(key, default=None)`: the cached value, or `default`.
- `put(key, value)`: cache a value.
- `clear()`: forget everything.
- `len(cache)` and `key in cache` work as for a dict.

The cache is not thread-safe; guard it with a lock if threads share it.
"""

# ---------------------------------------------------------------- semantic versions

# Bugs: the parts are compared as strings ("1.10.0" < "1.9.0"); pre-releases are
# ignored; a leading "v" is rejected.
SEMVER = '''\
"""Parse and compare semantic version strings such as "1.4.2" or "2.0.0-rc.1"."""

import re

_VERSION = re.compile(r"^(\\d+)\\.(\\d+)\\.(\\d+)(?:-([0-9A-Za-z.-]+))?$")


def parse_version(text):
    """Split "MAJOR.MINOR.PATCH[-PRERELEASE]" into its four parts."""
    match = _VERSION.match(text.strip())
    if not match:
        raise ValueError(f"not a semantic version: {text!r}")
    major, minor, patch, prerelease = match.groups()
    return major, minor, patch, prerelease


def _sort_key(version):
    major, minor, patch, _prerelease = parse_version(version)
    return (major, minor, patch)


def compare_versions(a, b):
    """Return -1 if version `a` comes before `b`, 1 if after, 0 if they are equal."""
    key_a, key_b = _sort_key(a), _sort_key(b)
    if key_a == key_b:
        return 0
    return -1 if key_a < key_b else 1
'''

TEST_SEMVER = '''\
import pytest

from textkit.semver import compare_versions, parse_version


def test_compare_patch_versions():
    assert compare_versions("1.2.3", "1.2.4") == -1
    assert compare_versions("1.2.4", "1.2.3") == 1


def test_compare_equal_versions():
    assert compare_versions("2.0.0", "2.0.0") == 0


def test_parse_rejects_garbage():
    with pytest.raises(ValueError):
        parse_version("one.two.three")
'''

DOCS_SEMVER = """\
# Semantic versions

`compare_versions(a, b)` returns -1, 0 or 1 like the old `cmp`:

    >>> compare_versions("1.2.3", "1.2.4")
    -1

`parse_version(text)` splits a version into major, minor, patch and the
optional pre-release label, and raises `ValueError` for anything else.

    >>> parse_version("2.0.0-rc.1")
    ('2', '0', '0', 'rc.1')

## What counts as a version

Exactly three dot-separated numbers, optionally followed by a hyphen and a
pre-release label made of letters, digits, dots and hyphens. Build metadata
(`+build.5`) is not supported yet, and neither are leading zeros checks:
`01.2.3` is accepted and means the same as `1.2.3`.

## Sorting

Use `functools.cmp_to_key` to sort a list of versions:

    >>> from functools import cmp_to_key
    >>> sorted(["1.2.10", "1.2.9"], key=cmp_to_key(compare_versions))
    ['1.2.9', '1.2.10']
"""

# ---------------------------------------------------------------- durations

# Bugs: decimal amounts ("1.5h") raise; format_duration writes zero units ("1h0m0s").
DURATIONS = '''\
"""Parse and format durations such as "1h30m" or "45s"."""

import re

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\\d+(?:\\.\\d+)?)([dhms])")


def parse_duration(text):
    """Return the number of seconds in `text`, e.g. "1h30m" -> 5400."""
    compact = text.replace(" ", "").lower()
    if not compact:
        raise ValueError("empty duration")
    total = 0
    position = 0
    for match in _PART.finditer(compact):
        if match.start() != position:
            raise ValueError(f"invalid duration: {text!r}")
        amount, unit = match.groups()
        total += int(amount) * UNITS[unit]
        position = match.end()
    if position != len(compact):
        raise ValueError(f"invalid duration: {text!r}")
    return total


def format_duration(seconds):
    """Format a number of seconds as "1h30m", the inverse of parse_duration."""
    seconds = int(seconds)
    if seconds < 0:
        raise ValueError("duration must not be negative")
    parts = []
    for unit, size in UNITS.items():
        amount, seconds = divmod(seconds, size)
        if amount or parts:
            parts.append(f"{amount}{unit}")
    return "".join(parts) or "0s"
'''

TEST_DURATIONS = '''\
import pytest

from textkit.durations import format_duration, parse_duration


def test_parse_simple_units():
    assert parse_duration("45s") == 45
    assert parse_duration("2m") == 120


def test_parse_combined_units():
    assert parse_duration("1h30m") == 5400
    assert parse_duration("1d 2h") == 93600


def test_parse_rejects_garbage():
    with pytest.raises(ValueError):
        parse_duration("soon")


def test_format_small_durations():
    assert format_duration(0) == "0s"
    assert format_duration(45) == "45s"
    assert format_duration(90) == "1m30s"
'''

DOCS_DURATIONS = """\
# Durations

`parse_duration` reads a duration written as amounts followed by units and
returns whole seconds:

| unit | meaning |
|------|---------|
| `d`  | days    |
| `h`  | hours   |
| `m`  | minutes |
| `s`  | seconds |

    >>> parse_duration("1h30m")
    5400
    >>> parse_duration("1d 2h")
    93600

Spaces between parts are ignored; anything else raises `ValueError`.

`format_duration` goes the other way:

    >>> format_duration(5400)
    '1h30m'
"""

README_DURATIONS = """\
## Durations

Configuration files often say how long to wait in words a person can read:

```python
>>> from textkit import parse_duration, format_duration
>>> parse_duration("1h30m")
5400
>>> parse_duration("2d 4h")
187200
>>> format_duration(90)
'1m30s'
```

Units are `d`, `h`, `m` and `s`; anything else raises `ValueError`.

"""

# ---------------------------------------------------------------- the CSV-ish parser

# Bugs: doubled quotes inside a quoted field are dropped; read_rows ignores its
# encoding argument.
CSVISH = '''\
"""A forgiving parser for delimited lines with optional double quotes."""


def parse_line(line, delimiter=","):
    """Split one line into fields; a field may be wrapped in double quotes."""
    fields = []
    field = []
    quoted = False
    i = 0
    while i < len(line):
        char = line[i]
        if quoted:
            if char == '"':
                quoted = False
            else:
                field.append(char)
        elif char == '"':
            quoted = True
        elif char == delimiter:
            fields.append("".join(field))
            field = []
        else:
            field.append(char)
        i += 1
    fields.append("".join(field))
    return fields


def read_rows(path, delimiter=",", encoding="utf-8"):
    """Parse every non-blank line of the file at `path`."""
    with open(path, encoding="utf-8") as handle:
        return [parse_line(line.rstrip("\\r\\n"), delimiter) for line in handle if line.strip()]
'''

TEST_CSVISH = '''\
from textkit.csvish import parse_line, read_rows


def test_parse_plain_fields():
    assert parse_line("a,b,c") == ["a", "b", "c"]


def test_parse_quoted_delimiter():
    assert parse_line('"a,b",c') == ["a,b", "c"]


def test_parse_other_delimiter():
    assert parse_line("a;b", delimiter=";") == ["a", "b"]


def test_read_rows_skips_blank_lines(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("a,b\\n\\nc,d\\n", encoding="utf-8")
    assert read_rows(path) == [["a", "b"], ["c", "d"]]
'''

DOCS_CSV_INTRO = """\
# Delimited lines

`parse_line(line, delimiter=",")` splits one line into fields. A field can be
wrapped in double quotes to contain the delimiter:

    >>> parse_line('"a,b",c')
    ['a,b', 'c']
    >>> parse_line("a;b", delimiter=";")
    ['a', 'b']

`read_rows(path, delimiter=",", encoding="utf-8")` parses every non-blank line
of a file and returns a list of rows.

The parser is deliberately forgiving: it never raises on a stray quote, it
does not convert fields, and each line is one row. Use the `csv` module when
you need dialects or line breaks inside quoted fields.
"""

# The state-machine rewrite of parse_line (a large refactor, same behaviour).
CSVISH_STATE_MACHINE = '''\
"""A forgiving parser for delimited lines with optional double quotes.

The parser is a small state machine over the characters of one line:

- FIELD: outside quotes; a delimiter ends the field, a quote opens quoting.
- QUOTED: inside quotes; a quote either closes the quoting or, when doubled,
  stands for one literal quote.

Unlike the `csv` module it never raises on stray quotes: a quote in the
middle of a field simply starts quoting there.
"""

FIELD = "field"
QUOTED = "quoted"
QUOTE = '"'


class _LineParser:
    """Parse one line; create a new parser per line."""

    def __init__(self, delimiter):
        if len(delimiter) != 1:
            raise ValueError("delimiter must be a single character")
        self.delimiter = delimiter
        self.state = FIELD
        self.fields = []
        self.current = []

    def parse(self, line):
        position = 0
        while position < len(line):
            position = self._step(line, position)
        self._end_field()
        return self.fields

    def _step(self, line, position):
        char = line[position]
        if self.state == QUOTED:
            return self._step_quoted(line, position, char)
        return self._step_field(position, char)

    def _step_quoted(self, line, position, char):
        if char != QUOTE:
            self.current.append(char)
            return position + 1
        if line[position + 1 : position + 2] == QUOTE:
            self.current.append(QUOTE)
            return position + 2
        self.state = FIELD
        return position + 1

    def _step_field(self, position, char):
        if char == QUOTE:
            self.state = QUOTED
        elif char == self.delimiter:
            self._end_field()
        else:
            self.current.append(char)
        return position + 1

    def _end_field(self):
        self.fields.append("".join(self.current))
        self.current = []


def parse_line(line, delimiter=","):
    """Split one line into fields; a field may be wrapped in double quotes.

    Inside quotes, two double quotes stand for one.
    """
    return _LineParser(delimiter).parse(line)


def iter_rows(lines, delimiter=","):
    """Parse each non-blank line of an iterable of lines."""
    for line in lines:
        if line.strip():
            yield parse_line(line.rstrip("\\r\\n"), delimiter)


def read_rows(path, delimiter=",", encoding="utf-8"):
    """Parse every non-blank line of the file at `path`."""
    with open(path, encoding=encoding) as handle:
        return list(iter_rows(handle, delimiter))
'''

DOCS_CSV = '''\
# Delimited lines

`parse_line(line, delimiter=",")` splits one line into fields. A field can be
wrapped in double quotes to contain the delimiter; inside quotes, two double
quotes stand for one.

    >>> parse_line('"say ""hi""",x')
    ['say "hi"', 'x']

`read_rows(path, delimiter=",", encoding="utf-8")` parses every non-blank line
of a file.

## How the parser works

The parser is a state machine with two states. In the *field* state, a
delimiter ends the current field and a quote switches to the *quoted* state.
In the *quoted* state every character is kept, except a quote: a doubled
quote is kept as one quote, a single quote switches back.

Stray quotes never raise: `a"b,c"d` parses as `['ab,cd']`, which is usually
what a human meant when the file was typed by hand.

## Differences from the csv module

- No dialects, no sniffing: one delimiter, double quotes only.
- Fields are never converted; everything is a string.
- Line breaks inside quoted fields are not supported; each line is a row.
- `iter_rows(lines)` parses any iterable of lines, for example a response
  body that is already split.
'''

# ---------------------------------------------------------------- numbers

# Bugs: byte counts below 1 KiB get a decimal ("500.0 B"); backoff grows
# linearly, not exponentially.
NUMBERS = '''\
"""Number formatting and retry helpers."""

import random

_SIZE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"]


def human_size(num_bytes):
    """Format a byte count with binary prefixes, e.g. 1536 -> "1.5 KiB"."""
    if num_bytes < 0:
        raise ValueError("size must not be negative")
    value = float(num_bytes)
    for unit in _SIZE_UNITS:
        if value < 1024 or unit == _SIZE_UNITS[-1]:
            return f"{value:.1f} {unit}"
        value /= 1024


def backoff(attempt, base=0.5, cap=30.0, jitter=0.0):
    """Seconds to wait before retry number `attempt` (0 for the first retry).

    The delay doubles with each attempt up to `cap`; `jitter` spreads it by up
    to that fraction either way.
    """
    delay = min(cap, base * 2 * attempt)
    if jitter:
        delay *= 1 + random.uniform(-jitter, jitter)
    return delay
'''

TEST_NUMBERS = '''\
import pytest

from textkit.numbers import backoff, human_size


def test_human_size_kib():
    assert human_size(1536) == "1.5 KiB"


def test_human_size_gib():
    assert human_size(3 * 1024**3) == "3.0 GiB"


def test_human_size_rejects_negative():
    with pytest.raises(ValueError):
        human_size(-1)


def test_backoff_is_capped():
    assert backoff(100) == 30.0
'''

INIT_WITH_NUMBERS = '''\
"""textkit: small, dependency-free helpers for text and numbers."""

from textkit.cache import LRUCache
from textkit.csvish import parse_line, read_rows
from textkit.durations import format_duration, parse_duration
from textkit.numbers import backoff, human_size
from textkit.semver import compare_versions, parse_version
from textkit.slug import slugify
from textkit.text import normalize_space
from textkit.wrap import wrap_text

__version__ = "0.1.0"
__all__ = [
    "LRUCache",
    "backoff",
    "compare_versions",
    "format_duration",
    "human_size",
    "normalize_space",
    "parse_duration",
    "parse_line",
    "parse_version",
    "read_rows",
    "slugify",
    "wrap_text",
]
'''

DOCS_NUMBERS = """\
# Numbers

## human_size

`human_size(num_bytes)` formats a byte count with binary prefixes (powers of
1024), one decimal place:

    >>> human_size(1536)
    '1.5 KiB'
    >>> human_size(3 * 1024**3)
    '3.0 GiB'

Sizes past the last unit (TiB) stay in TiB. Negative sizes raise `ValueError`.

## backoff

`backoff(attempt, base=0.5, cap=30.0, jitter=0.0)` is how long to wait before
retry number `attempt`, counting from 0. The delay starts at `base` seconds,
doubles on each attempt and never exceeds `cap`:

    >>> [backoff(n) for n in range(4)]
    [0.5, 1.0, 2.0, 4.0]

With `jitter=0.1` each delay is spread randomly by up to 10% either way, so
that many clients retrying at once do not all come back at the same moment.
"""

LATIN1_MENU = b"dish;price\ncaf\xe9 cr\xe8me;3,50\nth\xe9 glac\xe9;2,80\n"

# ---------------------------------------------------------------- the history

_S = "textkit/slug.py"
_T = "textkit/text.py"
_W = "textkit/wrap.py"
_C = "textkit/cache.py"
_V = "textkit/semver.py"
_D = "textkit/durations.py"
_CSV = "textkit/csvish.py"
_N = "textkit/numbers.py"
_I = "textkit/__init__.py"

_STEPS = [
    _Step(
        "ada",
        "initial",
        "Initial commit: slugify, normalize_space and wrap_text\n",
        (
            write("pyproject.toml", PYPROJECT),
            write("README.md", README),
            write(".gitignore", GITIGNORE),
            write("LICENSE", LICENSE),
            write(_I, INIT),
            write(_S, SLUG),
            write(_T, TEXT),
            write(_W, WRAP),
            write("tests/test_slug.py", TEST_SLUG),
            write("tests/test_text.py", TEST_TEXT),
            write("tests/test_wrap.py", TEST_WRAP),
        ),
        # Diffed against the empty tree: 7 non-test files.
        expected_drop_reason="too_many_files",
    ),
    _Step(
        "ada",
        "docs_only",
        "Add a docs folder\n",
        (write("docs/index.md", DOCS_INDEX), write("docs/slug.md", DOCS_SLUG)),
        expected_drop_reason="no_python_change",
    ),
    _Step(
        "tomas",
        "fix_with_test",
        "slugify: transliterate accented letters\n\n"
        'Accented letters were dropped: "Crème Brûlée" became "crme-brle".\n'
        "Decompose them first so the ASCII base letter survives.\n",
        (
            edit(_S, "import re\n", "import re\nimport unicodedata\n"),
            edit(
                _S,
                '    text = text.encode("ascii"',
                '    text = unicodedata.normalize("NFKD", text)\n    text = text.encode("ascii"',
            ),
            edit(
                "tests/test_slug.py",
                "def test_slugify_max_length",
                'def test_slugify_strips_accents():\n    assert slugify("Crème Brûlée") == "creme-brulee"\n\n\n'
                "def test_slugify_max_length",
            ),
        ),
        fail_to_pass=("tests/test_slug.py::test_slugify_strips_accents",),
    ),
    _Step(
        "jonas",
        "fix_with_test",
        "wrap_text: count the space between words\n\n"
        "Lines could come out one character longer than the width.\n",
        (
            edit(_W, "len(current) + len(word) <= width", "len(current) + 1 + len(word) <= width"),
            edit(
                "tests/test_wrap.py",
                "def test_wrap_reflows_paragraphs",
                "def test_wrap_never_exceeds_width():\n"
                '    assert wrap_text("aaa bbb", 6) == ["aaa", "bbb"]\n'
                '    assert all(len(line) <= 9 for line in wrap_text("lorem ipsum dolor sit amet", 9))\n\n\n'
                "def test_wrap_reflows_paragraphs",
            ),
        ),
        fail_to_pass=("tests/test_wrap.py::test_wrap_never_exceeds_width",),
    ),
    _Step(
        "ada",
        "fix_without_test",
        "slugify: no trailing separator after max_length\n\n"
        'slugify("hello big world", max_length=10) gave "hello-big-".\n',
        (edit(_S, "        text = text[:max_length]\n", "        text = text[:max_length].rstrip(separator)\n"),),
    ),
    _Step(
        "tomas",
        "feature",
        "Add an LRU cache\n",
        (
            write(_C, CACHE),
            write("tests/test_cache.py", TEST_CACHE),
            write("docs/cache.md", DOCS_CACHE),
            edit(_I, "from textkit.slug", "from textkit.cache import LRUCache\nfrom textkit.slug"),
            edit(_I, '__all__ = ["normalize_space"', '__all__ = ["LRUCache", "normalize_space"'),
        ),
        expected_drop_reason="patch_too_long",
    ),
    _Step(
        "priya",
        "docstring_only",
        "Explain what normalize_space does with newlines\n",
        (
            edit(
                _T,
                '    """Collapse whitespace."""\n',
                '    """Collapse every run of whitespace into one space and trim the ends.\n\n'
                "    Newlines and tabs count as whitespace, so the result is a single line.\n"
                '    """\n'
                "    # str.split() without arguments splits on any whitespace run.\n",
            ),
        ),
        expected_drop_reason="no_python_change",
    ),
    _Step(
        "jonas",
        "fix_with_test",
        "LRUCache.get: mark the entry as recently used\n\n"
        "Reading an entry did not protect it from eviction, so the cache evicted\n"
        "hot entries first.\n",
        (
            edit(_C, "            return default\n        return value\n", "            return default\n        self._data.move_to_end(key)\n        return value\n"),
            edit(
                "tests/test_cache.py",
                "def test_capacity_must_be_positive",
                "def test_get_refreshes_recency():\n"
                "    cache = LRUCache(2)\n"
                '    cache.put("a", 1)\n'
                '    cache.put("b", 2)\n'
                '    cache.get("a")\n'
                '    cache.put("c", 3)\n'
                '    assert "a" in cache\n'
                '    assert "b" not in cache\n\n\n'
                "def test_capacity_must_be_positive",
            ),
        ),
        fail_to_pass=("tests/test_cache.py::test_get_refreshes_recency",),
    ),
    _Step(
        "ada",
        "feature",
        "Add semantic version parsing and comparison\n",
        (
            write(_V, SEMVER),
            write("tests/test_semver.py", TEST_SEMVER),
            write("docs/semver.md", DOCS_SEMVER),
            edit(_I, "from textkit.slug", "from textkit.semver import compare_versions, parse_version\nfrom textkit.slug"),
            edit(_I, '"normalize_space", ', '"compare_versions", "normalize_space", "parse_version", '),
        ),
        expected_drop_reason="patch_too_long",
    ),
    _Step(
        "tomas",
        "fix_with_test",
        "compare_versions: compare the numbers as numbers\n\n"
        'The parts were compared as strings, so "1.10.0" sorted before "1.9.0".\n',
        (
            edit(_V, "    return major, minor, patch, prerelease\n", "    return int(major), int(minor), int(patch), prerelease\n"),
            edit(
                "tests/test_semver.py",
                "def test_compare_equal_versions",
                "def test_compare_multi_digit_parts():\n"
                '    assert compare_versions("1.10.0", "1.9.0") == 1\n'
                '    assert compare_versions("0.9.12", "0.9.2") == 1\n\n\n'
                "def test_compare_equal_versions",
            ),
        ),
        fail_to_pass=("tests/test_semver.py::test_compare_multi_digit_parts",),
    ),
    _Step(
        "priya",
        "binary_asset",
        "Add a logo to the docs; close the LRUCache repr\n",
        (
            write("docs/logo.png", _tiny_png()),
            edit(_C, "size={len(self)}\"\n", "size={len(self)})\"\n"),
            edit("docs/index.md", "# textkit documentation\n", "# textkit documentation\n\n![textkit](logo.png)\n"),
        ),
        expected_drop_reason="binary_file",
    ),
    _Step(
        "jonas",
        "feature",
        "Add parse_duration and format_duration\n",
        (
            write(_D, DURATIONS),
            write("tests/test_durations.py", TEST_DURATIONS),
            edit("README.md", "## Development\n", README_DURATIONS + "## Development\n"),
            edit(_I, "from textkit.semver", "from textkit.durations import format_duration, parse_duration\nfrom textkit.semver"),
            edit(_I, '"compare_versions", ', '"compare_versions", "format_duration", '),
            edit(_I, '"normalize_space", ', '"normalize_space", "parse_duration", '),
        ),
        expected_drop_reason="patch_too_long",
    ),
    _Step(
        "ada",
        "weak_oracle_fix",
        "parse_duration: accept decimal amounts\n\n"
        'parse_duration("1.5h") raised ValueError although the pattern accepts it.\n',
        (
            edit(_D, "        total += int(amount) * UNITS[unit]\n", "        total += float(amount) * UNITS[unit]\n"),
            edit(_D, "        raise ValueError(f\"invalid duration: {text!r}\")\n    return total\n", "        raise ValueError(f\"invalid duration: {text!r}\")\n    return int(total)\n"),
            edit(
                "tests/test_durations.py",
                "def test_parse_rejects_garbage",
                "def test_parse_accepts_decimals():\n"
                '    parse_duration("1.5h")  # used to raise ValueError\n\n\n'
                "def test_parse_rejects_garbage",
            ),
        ),
        # The test never looks at the value; int() truncation still makes "1.13h" 4067 instead of 4068.
        fail_to_pass=("tests/test_durations.py::test_parse_accepts_decimals",),
    ),
    _Step(
        "tomas",
        "docs_only",
        "Document the duration syntax\n",
        (
            write("docs/durations.md", DOCS_DURATIONS),
            edit("docs/index.md", "- `wrap_text(", "- `parse_duration(text)` and `format_duration(seconds)`: see durations.md.\n- `wrap_text("),
        ),
        expected_drop_reason="no_python_change",
    ),
    _Step(
        "priya",
        "fix_with_test",
        "format_duration: leave out zero units\n\n"
        'format_duration(3600) returned "1h0m0s" instead of "1h".\n',
        (
            edit(_D, "        if amount or parts:\n", "        if amount:\n"),
            edit(
                "tests/test_durations.py",
                '    assert format_duration(90) == "1m30s"\n',
                '    assert format_duration(90) == "1m30s"\n\n\n'
                "def test_format_skips_zero_units():\n"
                '    assert format_duration(3600) == "1h"\n'
                '    assert format_duration(86400 + 5) == "1d5s"\n',
            ),
        ),
        fail_to_pass=("tests/test_durations.py::test_format_skips_zero_units",),
    ),
    _Step(
        "jonas",
        "refactor_large",
        "Add type hints across the package\n",
        (
            write("textkit/py.typed", ""),
            edit(_S, '"""\n\nimport re\n', '"""\n\nfrom __future__ import annotations\n\nimport re\n'),
            edit(_S, 'def slugify(text, separator="-", max_length=None):', 'def slugify(text: str, separator: str = "-", max_length: int | None = None) -> str:'),
            edit(_T, "def normalize_space(text):", "def normalize_space(text: str) -> str:"),
            edit(_W, '"""\n\nfrom textkit', '"""\n\nfrom __future__ import annotations\n\nfrom textkit'),
            edit(_W, "def wrap_text(text, width=70):", "def wrap_text(text: str, width: int = 70) -> list[str]:"),
            edit(_C, "from collections import OrderedDict\n", "from __future__ import annotations\n\nfrom collections import OrderedDict\nfrom typing import Any, Hashable\n"),
            edit(_C, "def __init__(self, capacity):", "def __init__(self, capacity: int) -> None:"),
            edit(_C, "        self._data = OrderedDict()\n", "        self._data: OrderedDict[Hashable, Any] = OrderedDict()\n"),
            edit(_C, "def get(self, key, default=None):", "def get(self, key: Hashable, default: Any = None) -> Any:"),
            edit(_C, "def put(self, key, value):", "def put(self, key: Hashable, value: Any) -> None:"),
            edit(_V, '"""\n\nimport re\n', '"""\n\nfrom __future__ import annotations\n\nimport re\n'),
            edit(_V, "def parse_version(text):", "def parse_version(text: str) -> tuple[int, int, int, str | None]:"),
            edit(_V, "def compare_versions(a, b):", "def compare_versions(a: str, b: str) -> int:"),
            edit(_D, '"""\n\nimport re\n', '"""\n\nfrom __future__ import annotations\n\nimport re\n'),
            edit(_D, "def parse_duration(text):", "def parse_duration(text: str) -> int:"),
            edit(_D, "def format_duration(seconds):", "def format_duration(seconds: float) -> str:"),
            edit(_D, "    total = 0\n", "    total = 0.0\n"),
        ),
        expected_drop_reason="too_many_files",
    ),
    _Step(
        "ada",
        "feature",
        "Add a forgiving parser for delimited lines\n",
        (
            write(_CSV, CSVISH),
            write("tests/test_csvish.py", TEST_CSVISH),
            write("docs/csv.md", DOCS_CSV_INTRO),
            edit(_I, "from textkit.durations", "from textkit.csvish import parse_line, read_rows\nfrom textkit.durations"),
            edit(_I, '"parse_duration", ', '"parse_duration", "parse_line", '),
            edit(_I, '"parse_version", ', '"parse_version", "read_rows", '),
        ),
        expected_drop_reason="patch_too_long",
    ),
    _Step(
        "tomas",
        "fix_with_test",
        "parse_line: keep doubled quotes inside quoted fields\n\n"
        '"say ""hi""" should give say "hi"; the quotes were dropped.\n',
        (
            edit(
                _CSV,
                "            if char == '\"':\n                quoted = False\n",
                "            if char == '\"' and line[i + 1 : i + 2] == '\"':\n"
                "                field.append(char)\n"
                "                i += 1\n"
                "            elif char == '\"':\n"
                "                quoted = False\n",
            ),
            edit(
                "tests/test_csvish.py",
                "def test_parse_other_delimiter",
                "def test_parse_doubled_quotes():\n"
                "    assert parse_line('\"say \"\"hi\"\"\",x') == ['say \"hi\"', \"x\"]\n\n\n"
                "def test_parse_other_delimiter",
            ),
        ),
        fail_to_pass=("tests/test_csvish.py::test_parse_doubled_quotes",),
    ),
    _Step(
        "priya",
        "non_utf8_fix",
        # The message itself is latin-1, not UTF-8.
        b"read_rows: honour the encoding argument (caf\xe9 menu)\n\n"
        b"read_rows always decoded UTF-8, so latin-1 files such as the caf\xe9 menu failed.\n",
        (
            edit(_CSV, '    with open(path, encoding="utf-8") as handle:\n', "    with open(path, encoding=encoding) as handle:\n"),
            write("tests/data/menu-latin1.csv", LATIN1_MENU),
            edit("tests/test_csvish.py", "from textkit.csvish", "from pathlib import Path\n\nfrom textkit.csvish"),
            edit(
                "tests/test_csvish.py",
                "def test_read_rows_skips_blank_lines",
                "def test_read_rows_latin1():\n"
                '    rows = read_rows(Path(__file__).parent / "data" / "menu-latin1.csv", delimiter=";", encoding="latin-1")\n'
                '    assert rows[1] == ["café crème", "3,50"]\n\n\n'
                "def test_read_rows_skips_blank_lines",
            ),
        ),
        fail_to_pass=("tests/test_csvish.py::test_read_rows_latin1",),
    ),
    _Step(
        "jonas",
        "breaks_other_test",
        "normalize_space: keep paragraph breaks\n\n"
        "A blank line between paragraphs now survives as one blank line.\n",
        (
            edit(_T, '"""\n\n\ndef normalize_space', '"""\n\nfrom __future__ import annotations\n\nimport re\n\n_PARAGRAPH_BREAK = re.compile(r"\\n\\s*\\n")\n\n\ndef normalize_space'),
            edit(
                _T,
                '    # str.split() without arguments splits on any whitespace run.\n    return " ".join(text.split())\n',
                "    Blank lines between paragraphs are kept as one blank line.\n"
                "    \"\"\"\n"
                "    paragraphs = _PARAGRAPH_BREAK.split(text.strip())\n"
                '    return "\\n\\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)\n',
            ),
            edit(_T, '    Newlines and tabs count as whitespace, so the result is a single line.\n    """\n', ""),
            edit(
                "tests/test_text.py",
                "def test_normalize_space_trims",
                "def test_normalize_space_keeps_paragraphs():\n"
                '    assert normalize_space("one\\n  two\\n\\n\\nthree") == "one two\\n\\nthree"\n\n\n'
                "def test_normalize_space_trims",
            ),
        ),
        fail_to_pass=("tests/test_text.py::test_normalize_space_keeps_paragraphs",),
        pass_to_fail=("tests/test_wrap.py::test_wrap_reflows_paragraphs",),
    ),
    _Step(
        "ada",
        "docs_only",
        "Start a changelog\n",
        (
            write(
                "CHANGELOG.md",
                "# Changelog\n\n## Unreleased\n\n- LRU cache, semantic versions, durations, delimited lines.\n"
                "- normalize_space keeps paragraph breaks.\n\n## 0.1.0\n\n- slugify, normalize_space, wrap_text.\n",
            ),
        ),
        expected_drop_reason="no_python_change",
    ),
    _Step(
        "tomas",
        "fix_with_test",
        "wrap_text: wrap each paragraph on its own\n\n"
        "Since normalize_space keeps paragraph breaks, wrap_text glued paragraphs\n"
        'together with a "\\n\\n" inside a line. Wrap them separately and separate\n'
        "them with an empty line.\n",
        (
            edit(_W, "    Words longer than `width` get a line of their own.\n", "    Words longer than `width` get a line of their own. Paragraphs (separated by\n    blank lines) are wrapped separately, with an empty line between them.\n"),
            edit(
                _W,
                '        raise ValueError("width must be at least 1")\n    lines = []\n    current = ""\n    for word in normalize_space(text).split(" "):\n',
                '        raise ValueError("width must be at least 1")\n'
                "    lines: list[str] = []\n"
                '    for number, paragraph in enumerate(normalize_space(text).split("\\n\\n")):\n'
                "        if number:\n"
                '            lines.append("")\n'
                "        lines.extend(_wrap_paragraph(paragraph, width))\n"
                "    return lines\n\n\n"
                "def _wrap_paragraph(paragraph: str, width: int) -> list[str]:\n"
                "    lines = []\n"
                '    current = ""\n'
                '    for word in paragraph.split(" "):\n',
            ),
            edit(
                "tests/test_wrap.py",
                'def test_wrap_reflows_paragraphs():\n    assert wrap_text("one two\\n\\nthree   four", 40) == ["one two three four"]\n',
                'def test_wrap_keeps_paragraphs():\n    assert wrap_text("one two\\n\\nthree   four", 40) == ["one two", "", "three four"]\n',
            ),
        ),
        fail_to_pass=("tests/test_wrap.py::test_wrap_keeps_paragraphs",),
    ),
    _Step(
        "priya",
        "feature",
        "Add human_size and backoff helpers\n",
        (
            write(_N, NUMBERS),
            write("tests/test_numbers.py", TEST_NUMBERS),
            write("docs/numbers.md", DOCS_NUMBERS),
            write(_I, INIT_WITH_NUMBERS),
        ),
        expected_drop_reason="patch_too_long",
    ),
    _Step(
        "jonas",
        "flaky_test",
        "backoff: double the delay on each attempt\n\n"
        "The delay grew linearly (and was 0 for the first retry).\n",
        (
            edit(_N, "    delay = min(cap, base * 2 * attempt)\n", "    delay = min(cap, base * 2**attempt)\n"),
            edit(
                "tests/test_numbers.py",
                "def test_backoff_is_capped",
                "def test_backoff_doubles():\n"
                "    assert [backoff(n) for n in range(4)] == [0.5, 1.0, 2.0, 4.0]\n\n\n"
                "def test_backoff_jitter_never_shortens_the_delay():\n"
                "    assert backoff(2, jitter=0.2) >= backoff(2)\n\n\n"
                "def test_backoff_is_capped",
            ),
        ),
        fail_to_pass=("tests/test_numbers.py::test_backoff_doubles",),
        flaky=("tests/test_numbers.py::test_backoff_jitter_never_shortens_the_delay",),
    ),
    _Step(
        "ada",
        "fix_without_test",
        "LRUCache.put: do not evict when updating an existing key\n",
        (
            edit(_C, "        if len(self._data) >= self.capacity:\n", "        if key not in self._data and len(self._data) >= self.capacity:\n"),
        ),
    ),
    _Step(
        "tomas",
        "refactor_large",
        "Rewrite parse_line as a small state machine\n\n"
        "Same behaviour, easier to extend; also adds iter_rows.\n",
        (write(_CSV, CSVISH_STATE_MACHINE), write("docs/csv.md", DOCS_CSV)),
        expected_drop_reason="too_many_lines",
    ),
    _Step(
        "priya",
        "fix_with_test",
        "human_size: whole bytes need no decimals\n\n"
        'human_size(500) said "500.0 B".\n',
        (
            edit(_N, "    value = float(num_bytes)\n", '    if num_bytes < 1024:\n        return f"{num_bytes} B"\n    value = float(num_bytes)\n'),
            edit(
                "tests/test_numbers.py",
                "def test_human_size_rejects_negative",
                "def test_human_size_bytes():\n"
                '    assert human_size(0) == "0 B"\n'
                '    assert human_size(500) == "500 B"\n\n\n'
                "def test_human_size_rejects_negative",
            ),
        ),
        fail_to_pass=("tests/test_numbers.py::test_human_size_bytes",),
    ),
    _Step(
        "jonas",
        "fix_without_test",
        "parse_duration: round instead of truncating\n\n"
        'Float error made parse_duration("1.13h") 4067 seconds instead of 4068.\n',
        (edit(_D, "    return int(total)\n", "    return round(total)\n"),),
    ),
    _Step(
        "ada",
        "refactor_large",
        "Say what was expected in error messages\n",
        (
            edit(_D, '        raise ValueError("empty duration")\n', '        raise ValueError("empty duration: expected amounts with units such as \'1h30m\', \'90s\' or \'1.5d\'")\n'),
            edit(
                _D,
                '        if match.start() != position:\n            raise ValueError(f"invalid duration: {text!r}")\n',
                '        if match.start() != position:\n            raise ValueError(f"invalid duration {text!r}: expected a number then one of d, h, m, s at {position}")\n',
            ),
            edit(
                _D,
                '    if position != len(compact):\n        raise ValueError(f"invalid duration: {text!r}")\n',
                '    if position != len(compact):\n        raise ValueError(f"invalid duration {text!r}: unexpected text after position {position}")\n',
            ),
            edit(_D, '        raise ValueError("duration must not be negative")\n', '        raise ValueError(f"a duration must not be negative, got {seconds} seconds; pass abs(seconds)")\n'),
            edit(_V, '        raise ValueError(f"not a semantic version: {text!r}")\n', '        raise ValueError(f"not a semantic version: {text!r}; expected MAJOR.MINOR.PATCH such as \'1.4.2\' or \'2.0.0-rc.1\'")\n'),
            edit(_N, '        raise ValueError("size must not be negative")\n', '        raise ValueError(f"a size in bytes must not be negative, got {num_bytes}; sizes count bytes from zero")\n'),
            edit(_W, '        raise ValueError("width must be at least 1")\n', '        raise ValueError(f"width must be at least 1 character, got {width}; wrap_text cannot make empty lines")\n'),
        ),
        expected_drop_reason="patch_too_long",
    ),
    _Step(
        "tomas",
        "tests_only",
        "Make the backoff jitter test deterministic\n\n"
        "It assumed jitter only adds, so it failed about half the time.\n",
        (
            edit(
                "tests/test_numbers.py",
                "def test_backoff_jitter_never_shortens_the_delay():\n    assert backoff(2, jitter=0.2) >= backoff(2)\n",
                "def test_backoff_jitter_stays_within_spread():\n"
                "    for _ in range(100):\n"
                "        assert 1.6 <= backoff(2, jitter=0.2) <= 2.4\n",
            ),
        ),
        expected_drop_reason="no_python_change",
    ),
    _Step(
        "priya",
        "feature",
        "Add truncate\n",
        (
            edit(
                _T,
                '    return "\\n\\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)\n',
                '    return "\\n\\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)\n\n\n'
                'def truncate(text: str, width: int, placeholder: str = "...") -> str:\n'
                '    """Shorten `text` to at most `width` characters, ending with `placeholder`."""\n'
                "    if len(text) <= width:\n"
                "        return text\n"
                "    return text[:width] + placeholder\n",
            ),
            edit("tests/test_text.py", "from textkit.text import normalize_space\n", "from textkit.text import normalize_space, truncate\n"),
            edit(
                "tests/test_text.py",
                '    assert normalize_space("  padded  ") == "padded"\n',
                '    assert normalize_space("  padded  ") == "padded"\n\n\n'
                "def test_truncate_short_text_unchanged():\n"
                '    assert truncate("short", 10) == "short"\n',
            ),
        ),
        fail_to_pass=("tests/test_text.py::test_truncate_short_text_unchanged",),
    ),
    _Step(
        "jonas",
        "fix_with_test",
        "compare_versions: pre-releases come before the release\n\n"
        '"1.0.0-rc.1" compared equal to "1.0.0".\n',
        (
            edit(
                _V,
                "    major, minor, patch, _prerelease = parse_version(version)\n    return (major, minor, patch)\n",
                "    major, minor, patch, prerelease = parse_version(version)\n"
                "    # A pre-release sorts before the release it leads up to.\n"
                '    return (major, minor, patch, prerelease is None, prerelease or "")\n',
            ),
            edit(
                "tests/test_semver.py",
                "def test_parse_rejects_garbage",
                "def test_prerelease_sorts_first():\n"
                '    assert compare_versions("1.0.0-rc.1", "1.0.0") == -1\n'
                '    assert compare_versions("1.0.0-beta", "1.0.0-alpha") == 1\n\n\n'
                "def test_parse_rejects_garbage",
            ),
        ),
        fail_to_pass=("tests/test_semver.py::test_prerelease_sorts_first",),
    ),
    _Step(
        "ada",
        "fix_with_test",
        "slugify: trim the separator actually used\n\n"
        'slugify(" Hello World ", separator="_") gave "_hello_world_".\n',
        (
            edit(_S, '    text = text.strip("-")\n', "    text = text.strip(separator)\n"),
            edit(
                "tests/test_slug.py",
                "def test_slugify_max_length",
                "def test_slugify_custom_separator():\n"
                '    assert slugify(" Hello World ", separator="_") == "hello_world"\n\n\n'
                "def test_slugify_max_length",
            ),
        ),
        fail_to_pass=("tests/test_slug.py::test_slugify_custom_separator",),
    ),
    _Step(
        "tomas",
        "docs_only",
        "Fix typos and examples in the docs\n",
        (
            edit("docs/cache.md", "The cache is not thread-safe; guard it with a lock if threads share it.\n", "The cache is not thread-safe: guard it with a lock when threads share it.\n"),
            edit("docs/durations.md", "returns whole seconds:\n", "returns whole seconds (decimals such as `1.5h` are allowed):\n"),
            edit("docs/slug.md", "ends.\n", "ends. Accented letters keep their base letter.\n"),
        ),
        expected_drop_reason="no_python_change",
    ),
    _Step(
        "priya",
        "fix_with_test",
        "truncate: count the placeholder in the width\n\n"
        'truncate("abcdefghij", 8) returned 11 characters.\n',
        (
            edit(_T, "    return text[:width] + placeholder\n", "    return text[: max(0, width - len(placeholder))] + placeholder\n"),
            edit(
                "tests/test_text.py",
                '    assert truncate("short", 10) == "short"\n',
                '    assert truncate("short", 10) == "short"\n\n\n'
                "def test_truncate_fits_width():\n"
                '    assert truncate("abcdefghij", 8) == "abcde..."\n',
            ),
        ),
        fail_to_pass=("tests/test_text.py::test_truncate_fits_width",),
    ),
    _Step(
        "jonas",
        "fix_without_test",
        "parse_version: accept a leading v\n\n"
        'Tags are usually written "v1.2.3"; parse_version rejected them.\n',
        (
            edit(
                _V,
                "    match = _VERSION.match(text.strip())\n",
                "    text = text.strip()\n"
                '    if text[:1] in ("v", "V"):\n'
                "        text = text[1:]\n"
                "    match = _VERSION.match(text)\n",
            ),
        ),
    ),
    _Step(
        "ada",
        "release",
        "Release 0.2.0\n",
        (
            edit("pyproject.toml", 'version = "0.1.0"', 'version = "0.2.0"'),
            edit(_I, '__version__ = "0.1.0"', '__version__ = "0.2.0"'),
            edit("CHANGELOG.md", "## Unreleased\n", "## 0.2.0\n"),
        ),
    ),
]


# ---------------------------------------------------------------- writing the repository


def _commit_dates(count: int, now: datetime) -> list[int]:
    """Unix times over the ~20 months before `now`, strictly increasing, in working hours."""
    start = now - timedelta(days=600)
    span_days = 590
    times = []
    for index in range(count):
        day = start + timedelta(days=round(index * span_days / max(1, count - 1)))
        moment = day + timedelta(hours=9 + (index * 5) % 9, minutes=(index * 23) % 60)
        times.append(int(moment.timestamp()))
    return times


def _commit_raw(path: Path, message: bytes, author: Author, date: str, *, env: dict[str, str]) -> None:
    """Commit the index with `message` stored byte for byte.

    `git commit` would re-encode a message that is not valid UTF-8 (reading it as
    latin-1); real histories do hold such bytes, without an encoding header.
    """
    tree = git(path, "write-tree", env=env)
    parent = git(path, "rev-parse", "HEAD", env=env)
    person = f"{author.name} <{author.email}> {date}".encode("utf-8")
    body = b"tree %s\nparent %s\nauthor %s\ncommitter %s\n\n" % (tree.encode(), parent.encode(), person, person)
    sha = git(path, "hash-object", "-t", "commit", "-w", "--stdin", env=env, stdin=body + message)
    git(path, "update-ref", "HEAD", sha, parent, env=env)


def _subject(message: Union[str, bytes]) -> str:
    if isinstance(message, bytes):
        try:
            message = message.decode("utf-8")
        except UnicodeDecodeError:
            message = message.decode("latin-1")
    return message.split("\n", 1)[0]


def _default_now() -> datetime:
    return datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)


def sample_repo_write(path: Path, *, now: Optional[datetime] = None) -> list[SampleCommit]:
    """Create a git repository at `path` (absent or empty) with the scripted textkit history."""
    path = Path(path)
    if path.exists() and any(path.iterdir()):
        raise FileExistsError(f"{path} exists and is not empty")
    now = now or _default_now()
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    path.mkdir(parents=True, exist_ok=True)
    env = git_env()
    git(path, "init", "-q", "-b", "main", env=env)
    commits = []
    for step, when in zip(_STEPS, _commit_dates(len(_STEPS), now)):
        for change in step.changes:
            change_apply(path, change)
        author = _AUTHORS[step.author]
        date = f"{when} {author.tz}"
        commit_env = author_env(env, author, date)
        git(path, "add", "-A", env=commit_env)
        if isinstance(step.message, bytes):
            _commit_raw(path, step.message, author, date, env=env)
        else:
            git(path, "commit", "-q", "--no-verify", "-F", "-", env=commit_env, stdin=step.message.encode("utf-8"))
        commits.append(
            SampleCommit(
                sha=git(path, "rev-parse", "HEAD", env=env),
                subject=_subject(step.message),
                kind=step.kind,
                expected_drop_reason=step.expected_drop_reason,
                fail_to_pass=step.fail_to_pass,
                pass_to_fail=step.pass_to_fail,
                flaky=step.flaky,
            )
        )
    return commits


def main(argv: Optional[list[str]] = None) -> int:
    return history_main("worker.demo.sample_repo", sample_repo_write,
                        lambda commit: f"{commit.sha}\t{commit.kind}\t{commit.subject}", argv)


if __name__ == "__main__":
    sys.exit(main())
