"""Write a small Python library's git history from 2013 to 2026, one packaging style per era.

The library is `eralib` (padding, calendar helpers, "key=value" strings, Roman
numerals). Its code barely changes; its packaging follows the fashion of each
era: a distutils setup.py, setuptools with setup.cfg and six, a bare
requirements.txt, pyproject.toml with setuptools, flit, poetry-core, hatchling
with hatch-vcs in a src layout, and setuptools-scm writing a version file at
build time. The environment builder can be tried on commits of every era.

Every era is two commits about a month apart: a restyle that sets up the
packaging, then a fix of a real bug. Each fix commit's `fail_to_pass` tests fail
on the parent once the commit's test files are applied, and pass on the
commit. The dates are fixed, so the commit ids are the same on every run.

    python -m worker.demo.era_repo PATH   # writes the repository, prints the commits

Standard library only; no Django.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional

from worker.demo.history import Author, author_env, change_apply, edit, git, git_env, history_main, write


@dataclass(frozen=True)
class EraCommit:
    sha: str
    subject: str  # first line of the message
    style: str  # the packaging style of its era, one of ERA_STYLES
    committed_at: datetime  # with the committer's UTC offset
    # pytest node ids: fail on parent + the commit's test files, pass on the commit. Empty for restyles.
    fail_to_pass: tuple[str, ...] = ()


ERA_STYLES = (
    "distutils",  # 2013: `from distutils.core import setup`
    "setup_cfg",  # 2015: setuptools, metadata in setup.cfg, six
    "requirements_txt",  # 2017: no packaging, requirements.txt only
    "setuptools_pyproject",  # 2019: pyproject.toml build-system with setuptools.build_meta, setup.cfg
    "flit",  # 2020: flit_core, [tool.flit.metadata]
    "poetry_core",  # 2021: poetry-core, [tool.poetry]
    "hatch_vcs",  # 2023: hatchling + hatch-vcs, src layout
    "scm_version_file",  # 2025/2026: setuptools-scm writes src/eralib/_version.py at build time
)

_AUTHORS = {
    "marta": Author("Marta Kowalczyk", "marta.kowalczyk@example.org", "+0100"),
    "kenji": Author("Kenji Watanabe", "kenji.watanabe@example.net", "+0900"),
    "lucia": Author("Lucía Ortega", "lucia.ortega@example.com", "-0300"),
    "sam": Author("Sam Okafor", "sam.okafor@example.org", "+0000"),
}


# Beyond sample_repo's changes: ("delete", path) and ("move", old, new).
def _delete(path: str) -> tuple:
    return ("delete", path)


def _move(old: str, new: str) -> tuple:
    return ("move", old, new)


@dataclass(frozen=True)
class _Step:
    author: str
    style: str
    when: str  # "YYYY-MM-DD HH:MM", the author's local time
    message: str
    changes: tuple
    fail_to_pass: tuple[str, ...] = ()


# ---------------------------------------------------------------- 2013: distutils

GITIGNORE = """\
*.pyc
__pycache__/
build/
dist/
MANIFEST
"""

LICENSE = """\
MIT License

Copyright (c) 2013 the eralib authors

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, subject to the following conditions:
the above copyright notice and this permission notice shall be included in
all copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.
"""

README_2013 = """\
eralib
======

Small helpers for padding text, calendar arithmetic, ``key=value`` strings
and Roman numerals.

Install::

    python setup.py install

Run the tests::

    python -m unittest discover
"""

SETUP_DISTUTILS = """\
from distutils.core import setup

setup(
    name="eralib",
    version="0.1.0",
    description="Small helpers for padding text, dates, key=value strings and Roman numerals",
    author="Marta Kowalczyk",
    author_email="marta.kowalczyk@example.org",
    url="https://example.org/eralib",
    license="MIT",
    packages=["eralib"],
)
"""

INIT_2013 = '''\
"""eralib: small helpers for padding text, dates, key=value strings and Roman numerals."""

__version__ = "0.1.0"
'''

# Bugs: is_leap_year forgets the century rule (fixed in 2013); add_months does not
# clamp the day to the end of a shorter month (fixed in 2020).
DATES = '''\
"""Calendar helpers."""

import datetime

_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_leap_year(year):
    """Return True if `year` has a 29th of February."""
    return year % 4 == 0


def days_in_month(year, month):
    """Return the number of days in `month` (1 to 12) of `year`."""
    if not 1 <= month <= 12:
        raise ValueError("month must be from 1 to 12, got %r" % (month,))
    if month == 2 and is_leap_year(year):
        return 29
    return _DAYS_IN_MONTH[month - 1]


def parse_date(text):
    """Parse an ISO date such as "2013-03-12"."""
    year, month, day = (int(part) for part in text.strip().split("-"))
    return datetime.date(year, month, day)


def add_months(date, months):
    """Return `date` moved by `months` calendar months (back if `months` is negative)."""
    index = date.month - 1 + months
    year, month = date.year + index // 12, index % 12 + 1
    return date.replace(year=year, month=month)
'''

# Bugs: center puts the odd space on the left (fixed in 2015); a fill of several
# characters overshoots the width (fixed in 2023).
PAD = '''\
"""Pad text to a fixed width."""


def pad_left(text, width, fill=" "):
    """Right-align `text` in a field of `width` characters."""
    if len(text) >= width:
        return text
    return fill * (width - len(text)) + text


def pad_right(text, width, fill=" "):
    """Left-align `text` in a field of `width` characters."""
    if len(text) >= width:
        return text
    return text + fill * (width - len(text))


def center(text, width, fill=" "):
    """Center `text` in a field of `width` characters; an odd space left over goes to the right."""
    if len(text) >= width:
        return text
    left = (width - len(text) + 1) // 2
    right = width - len(text) - left
    return fill * left + text + fill * right
'''

# Bugs: a value containing "=" raises (fixed in 2017); values keep the spaces
# around them (fixed in 2021).
PAIRS = '''\
"""Parse "key=value; key=value" strings, such as cookie headers."""


def parse_pairs(text, separator=";"):
    """Return a dict of the key=value items in `text`.

    Empty items are skipped; keys are stripped of surrounding spaces.
    """
    if not isinstance(text, str):
        raise TypeError("parse_pairs() expects a string, got %r" % (text,))
    pairs = {}
    for item in text.split(separator):
        if not item.strip():
            continue
        key, value = item.split("=")
        pairs[key.strip()] = value
    return pairs
'''

# Bugs: 4 is missing from the table, so to_roman(4) is "IIII" (fixed in 2019);
# numbers out of range give nonsense (fixed in 2026).
ROMAN = '''\
"""Roman numerals."""

_NUMERALS = (
    (1000, "M"),
    (900, "CM"),
    (500, "D"),
    (400, "CD"),
    (100, "C"),
    (90, "XC"),
    (50, "L"),
    (40, "XL"),
    (10, "X"),
    (9, "IX"),
    (5, "V"),
    (1, "I"),
)


def to_roman(number):
    """Write a whole number from 1 to 3999 in Roman numerals."""
    numerals = []
    for value, numeral in _NUMERALS:
        count, number = divmod(number, value)
        numerals.append(numeral * count)
    return "".join(numerals)
'''

TEST_DATES = '''\
import datetime
import unittest

from eralib.dates import add_months, days_in_month, is_leap_year, parse_date


class LeapYearTests(unittest.TestCase):

    def test_ordinary_years(self):
        self.assertTrue(is_leap_year(2012))
        self.assertFalse(is_leap_year(2013))


class DaysInMonthTests(unittest.TestCase):

    def test_february(self):
        self.assertEqual(days_in_month(2012, 2), 29)
        self.assertEqual(days_in_month(2013, 2), 28)

    def test_rejects_bad_month(self):
        self.assertRaises(ValueError, days_in_month, 2013, 13)


class ParseDateTests(unittest.TestCase):

    def test_iso_date(self):
        self.assertEqual(parse_date(" 2013-03-12 "), datetime.date(2013, 3, 12))


class AddMonthsTests(unittest.TestCase):

    def test_forward_across_the_year(self):
        self.assertEqual(add_months(datetime.date(2013, 11, 15), 3), datetime.date(2014, 2, 15))

    def test_backward(self):
        self.assertEqual(add_months(datetime.date(2013, 3, 12), -3), datetime.date(2012, 12, 12))


if __name__ == "__main__":
    unittest.main()
'''

TEST_PAD = '''\
import unittest

from eralib.pad import center, pad_left, pad_right


class PadTests(unittest.TestCase):

    def test_pad_left(self):
        self.assertEqual(pad_left("7", 3), "  7")
        self.assertEqual(pad_left("7", 3, fill="0"), "007")

    def test_pad_right(self):
        self.assertEqual(pad_right("ab", 4, fill="."), "ab..")

    def test_text_longer_than_width(self):
        self.assertEqual(pad_left("abcdef", 3), "abcdef")
        self.assertEqual(pad_right("abcdef", 3), "abcdef")


class CenterTests(unittest.TestCase):

    def test_even_padding(self):
        self.assertEqual(center("ab", 4), " ab ")

    def test_text_longer_than_width(self):
        self.assertEqual(center("abcdef", 3), "abcdef")


if __name__ == "__main__":
    unittest.main()
'''

TEST_PAIRS = '''\
import unittest

from eralib.pairs import parse_pairs


class ParsePairsTests(unittest.TestCase):

    def test_two_pairs(self):
        self.assertEqual(parse_pairs("a=1;b=2"), {"a": "1", "b": "2"})

    def test_skips_empty_items(self):
        self.assertEqual(parse_pairs("a=1; ;b=2;"), {"a": "1", "b": "2"})

    def test_custom_separator(self):
        self.assertEqual(parse_pairs("a=1&b=2", separator="&"), {"a": "1", "b": "2"})

    def test_rejects_bytes(self):
        self.assertRaises(TypeError, parse_pairs, b"a=1")


if __name__ == "__main__":
    unittest.main()
'''

TEST_ROMAN = '''\
import unittest

from eralib.roman import to_roman


class ToRomanTests(unittest.TestCase):

    def test_additive(self):
        self.assertEqual(to_roman(1), "I")
        self.assertEqual(to_roman(3), "III")
        self.assertEqual(to_roman(2013), "MMXIII")
        self.assertEqual(to_roman(1666), "MDCLXVI")

    def test_subtractive(self):
        self.assertEqual(to_roman(9), "IX")
        self.assertEqual(to_roman(90), "XC")
        self.assertEqual(to_roman(1900), "MCM")


if __name__ == "__main__":
    unittest.main()
'''

# ---------------------------------------------------------------- 2015: setuptools, setup.cfg, six

SETUP_SETUPTOOLS = """\
from setuptools import setup

# The metadata and the options are in setup.cfg.
setup()
"""

SETUP_CFG_2015 = """\
[metadata]
name = eralib
version = 0.2.0
description = Small helpers for padding text, dates, key=value strings and Roman numerals
long_description = file: README.rst
author = Kenji Watanabe
author_email = kenji.watanabe@example.net
url = https://example.org/eralib
license = MIT
classifiers =
    License :: OSI Approved :: MIT License
    Programming Language :: Python :: 2
    Programming Language :: Python :: 2.7
    Programming Language :: Python :: 3
    Programming Language :: Python :: 3.4

[options]
packages = eralib
install_requires =
    six>=1.9

[options.extras_require]
test =
    pytest

[bdist_wheel]
universal = 1
"""

README_2015 = """\
eralib
======

Small helpers for padding text, calendar arithmetic, ``key=value`` strings
and Roman numerals, for Python 2.7 and 3.4.

Install::

    pip install .

Run the tests::

    pip install -e ".[test]"
    python -m pytest tests
"""

# ---------------------------------------------------------------- 2017: requirements.txt only

REQUIREMENTS = """\
six>=1.10
"""

README_2017 = """\
eralib
======

Small helpers for padding text, calendar arithmetic, ``key=value`` strings
and Roman numerals.

eralib is no longer published: use it from a checkout. Install its
dependencies in a virtualenv and run the tests from the top of the checkout::

    python -m venv .venv
    . .venv/bin/activate
    pip install -r requirements.txt pytest
    python -m pytest tests
"""

# ---------------------------------------------------------------- 2019: pyproject.toml + setuptools, setup.cfg

PYPROJECT_2019 = """\
[build-system]
requires = ["setuptools>=40.8", "wheel"]
build-backend = "setuptools.build_meta"
"""

SETUP_CFG_2019 = """\
[metadata]
name = eralib
version = attr: eralib.__version__
description = Small helpers for padding text, dates, key=value strings and Roman numerals
long_description = file: README.rst
author = Kenji Watanabe
author_email = kenji.watanabe@example.net
url = https://example.org/eralib
license = MIT
classifiers =
    License :: OSI Approved :: MIT License
    Programming Language :: Python :: 2.7
    Programming Language :: Python :: 3

[options]
packages = eralib
python_requires = >=2.7, !=3.0.*, !=3.1.*, !=3.2.*, !=3.3.*, !=3.4.*
install_requires =
    six>=1.10

[options.extras_require]
test =
    pytest>=4.6

[bdist_wheel]
universal = 1

[tool:pytest]
testpaths = tests
"""

README_2019 = """\
eralib
======

Small helpers for padding text, calendar arithmetic, ``key=value`` strings
and Roman numerals.

Install::

    pip install .

Run the tests::

    pip install -e ".[test]"
    python -m pytest
"""

# ---------------------------------------------------------------- 2020: flit

PYPROJECT_FLIT = """\
[build-system]
requires = ["flit_core >=2,<4"]
build-backend = "flit_core.buildapi"

[tool.flit.metadata]
module = "eralib"
author = "Sam Okafor"
author-email = "sam.okafor@example.org"
home-page = "https://example.org/eralib"
description-file = "README.rst"
requires-python = ">=3.5"
classifiers = [
    "License :: OSI Approved :: MIT License",
    "Programming Language :: Python :: 3",
]

[tool.flit.metadata.requires-extra]
test = ["pytest >=4.6"]
"""

# ---------------------------------------------------------------- 2021: poetry-core

PYPROJECT_POETRY = """\
[tool.poetry]
name = "eralib"
version = "0.6.0"
description = "Small helpers for padding text, dates, key=value strings and Roman numerals"
authors = ["Kenji Watanabe <kenji.watanabe@example.net>"]
license = "MIT"
readme = "README.rst"
homepage = "https://example.org/eralib"
packages = [{ include = "eralib" }]

[tool.poetry.dependencies]
python = "^3.6"

[tool.poetry.dev-dependencies]
pytest = "^6.2"

[tool.pytest.ini_options]
testpaths = ["tests"]

[build-system]
requires = ["poetry-core>=1.0.0"]
build-backend = "poetry.core.masonry.api"
"""

WORKFLOW_2021 = """\
name: tests

on: [push, pull_request]

jobs:
  test:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        python-version: ["3.6", "3.7", "3.8", "3.9", "3.10"]
    steps:
      - uses: actions/checkout@v2
      - uses: actions/setup-python@v2
        with:
          python-version: ${{ matrix.python-version }}
      - run: pip install poetry
      - run: poetry install
      - run: poetry run pytest
"""

README_2021 = """\
eralib
======

Small helpers for padding text, calendar arithmetic, ``key=value`` strings
and Roman numerals.

Develop with Poetry::

    poetry install
    poetry run pytest
"""

# ---------------------------------------------------------------- 2023: hatchling + hatch-vcs, src layout

PYPROJECT_HATCH = """\
[build-system]
requires = ["hatchling", "hatch-vcs"]
build-backend = "hatchling.build"

[project]
name = "eralib"
dynamic = ["version"]
description = "Small helpers for padding text, dates, key=value strings and Roman numerals"
readme = "README.rst"
requires-python = ">=3.8"
license = "MIT"
authors = [{ name = "Sam Okafor", email = "sam.okafor@example.org" }]
classifiers = [
    "License :: OSI Approved :: MIT License",
    "Programming Language :: Python :: 3",
]

[project.optional-dependencies]
test = ["pytest>=7"]

[project.urls]
Homepage = "https://example.org/eralib"

[tool.hatch.version]
source = "vcs"

[tool.hatch.build.targets.wheel]
packages = ["src/eralib"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

INIT_2023 = '''\
"""eralib: small helpers for padding text, dates, key=value strings and Roman numerals."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eralib")
except PackageNotFoundError:  # not installed: run from a checkout
    __version__ = "0+unknown"
'''

README_2023 = """\
eralib
======

Small helpers for padding text, calendar arithmetic, ``key=value`` strings
and Roman numerals. The version comes from the git tags.

Run the tests::

    pip install -e ".[test]"
    python -m pytest
"""

# ---------------------------------------------------------------- 2025: setuptools-scm writes the version file

PYPROJECT_SCM = """\
[build-system]
requires = ["setuptools>=77", "setuptools-scm>=8"]
build-backend = "setuptools.build_meta"

[project]
name = "eralib"
dynamic = ["version"]
description = "Small helpers for padding text, dates, key=value strings and Roman numerals"
readme = "README.rst"
requires-python = ">=3.9"
license = "MIT"
authors = [{ name = "Lucía Ortega", email = "lucia.ortega@example.com" }]
classifiers = ["Programming Language :: Python :: 3"]

[project.optional-dependencies]
test = ["pytest>=8"]

[project.urls]
Homepage = "https://example.org/eralib"

[tool.setuptools_scm]
version_file = "src/eralib/_version.py"

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

INIT_2025 = '''\
"""eralib: small helpers for padding text, dates, key=value strings and Roman numerals."""

from ._version import version as __version__

__all__ = ["__version__"]
'''

TEST_VERSION = '''\
import re

import eralib


def test_version_is_set():
    assert re.match(r"\\d+\\.\\d+", eralib.__version__)
'''

README_2025 = """\
eralib
======

Small helpers for padding text, calendar arithmetic, ``key=value`` strings
and Roman numerals.

``src/eralib/_version.py`` is written by setuptools-scm when the package is
built or installed; it is not in git. Run the tests::

    pip install -e ".[test]"
    python -m pytest
"""

# ---------------------------------------------------------------- the history

_P, _D, _S, _R, _I = "eralib/pairs.py", "eralib/dates.py", "eralib/pad.py", "eralib/roman.py", "eralib/__init__.py"
_SRC = "src/eralib"

_STEPS = [
    _Step(
        "marta",
        "distutils",
        "2013-03-12 10:24",
        "Initial import of eralib\n\nPadding, calendar, key=value and Roman numeral helpers, packaged with distutils.\n",
        (
            write(".gitignore", GITIGNORE),
            write("LICENSE", LICENSE),
            write("README.rst", README_2013),
            write("setup.py", SETUP_DISTUTILS),
            write(_I, INIT_2013),
            write(_D, DATES),
            write(_S, PAD),
            write(_P, PAIRS),
            write(_R, ROMAN),
            write("tests/__init__.py", ""),
            write("tests/test_dates.py", TEST_DATES),
            write("tests/test_pad.py", TEST_PAD),
            write("tests/test_pairs.py", TEST_PAIRS),
            write("tests/test_roman.py", TEST_ROMAN),
        ),
    ),
    _Step(
        "lucia",
        "distutils",
        "2013-04-16 14:05",
        "is_leap_year: century years are leap years only when divisible by 400\n\n"
        "is_leap_year(1900) said True.\n",
        (
            edit(_D, "    return year % 4 == 0\n", "    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n"),
            edit(
                "tests/test_dates.py",
                "        self.assertFalse(is_leap_year(2013))\n",
                "        self.assertFalse(is_leap_year(2013))\n\n"
                "    def test_century_years(self):\n"
                "        self.assertFalse(is_leap_year(1900))\n"
                "        self.assertTrue(is_leap_year(2000))\n",
            ),
        ),
        fail_to_pass=("tests/test_dates.py::LeapYearTests::test_century_years",),
    ),
    _Step(
        "kenji",
        "setup_cfg",
        "2015-05-19 09:41",
        "Package with setuptools and setup.cfg; support Python 2.7 with six\n",
        (
            write("setup.py", SETUP_SETUPTOOLS),
            write("setup.cfg", SETUP_CFG_2015),
            write("README.rst", README_2015),
            edit(".gitignore", "MANIFEST\n", "MANIFEST\n*.egg-info/\n"),
            edit(_I, '__version__ = "0.1.0"', '__version__ = "0.2.0"'),
            edit(_P, '"""\n\n\ndef parse_pairs', '"""\n\nfrom six import string_types\n\n\ndef parse_pairs'),
            edit(_P, "isinstance(text, str)", "isinstance(text, string_types)"),
        ),
    ),
    _Step(
        "lucia",
        "setup_cfg",
        "2015-06-23 16:30",
        "center: give the odd space to the right, as documented\n\ncenter('ab', 5) gave '  ab '.\n",
        (
            edit(_S, "    left = (width - len(text) + 1) // 2\n", "    left = (width - len(text)) // 2\n"),
            edit(
                "tests/test_pad.py",
                '        self.assertEqual(center("ab", 4), " ab ")\n',
                '        self.assertEqual(center("ab", 4), " ab ")\n\n'
                "    def test_odd_padding_goes_right(self):\n"
                '        self.assertEqual(center("ab", 5), " ab  ")\n'
                '        self.assertEqual(center("x", 4, fill="*"), "*x**")\n',
            ),
        ),
        fail_to_pass=("tests/test_pad.py::CenterTests::test_odd_padding_goes_right",),
    ),
    _Step(
        "sam",
        "requirements_txt",
        "2017-02-07 11:12",
        "Stop packaging: install the dependencies from requirements.txt\n\n"
        "eralib is only used from checkouts now; nobody installs it from PyPI.\n",
        (
            _delete("setup.py"),
            _delete("setup.cfg"),
            write("requirements.txt", REQUIREMENTS),
            write("README.rst", README_2017),
            edit(".gitignore", "*.egg-info/\n", "*.egg-info/\n.venv/\nvenv/\n"),
            edit(_I, '__version__ = "0.2.0"', '__version__ = "0.3.0"'),
        ),
    ),
    _Step(
        "marta",
        "requirements_txt",
        "2017-03-14 15:47",
        "parse_pairs: split each item on its first = only\n\nparse_pairs('next=/login?a=b') raised ValueError.\n",
        (
            edit(_P, '        key, value = item.split("=")\n', '        key, value = item.split("=", 1)\n'),
            edit(
                "tests/test_pairs.py",
                "    def test_rejects_bytes(self):\n",
                "    def test_value_may_contain_equals(self):\n"
                '        self.assertEqual(parse_pairs("next=/login?a=b; x=1"), {"next": "/login?a=b", "x": "1"})\n\n'
                "    def test_rejects_bytes(self):\n",
            ),
        ),
        fail_to_pass=("tests/test_pairs.py::ParsePairsTests::test_value_may_contain_equals",),
    ),
    _Step(
        "kenji",
        "setuptools_pyproject",
        "2019-06-04 10:03",
        "Package again: pyproject.toml with setuptools, metadata in setup.cfg\n",
        (
            write("pyproject.toml", PYPROJECT_2019),
            write("setup.cfg", SETUP_CFG_2019),
            write("setup.py", SETUP_SETUPTOOLS),
            _delete("requirements.txt"),
            write("README.rst", README_2019),
            edit(_I, '__version__ = "0.3.0"', '__version__ = "0.4.0"'),
        ),
    ),
    _Step(
        "lucia",
        "setuptools_pyproject",
        "2019-07-09 13:38",
        "to_roman: write 4 as IV\n\nThe table missed 4, so to_roman(4) was 'IIII' and to_roman(1994) 'MCMXCIIII'.\n",
        (
            edit(_R, '    (5, "V"),\n', '    (5, "V"),\n    (4, "IV"),\n'),
            edit(
                "tests/test_roman.py",
                '        self.assertEqual(to_roman(1900), "MCM")\n',
                '        self.assertEqual(to_roman(1900), "MCM")\n\n'
                "    def test_four(self):\n"
                '        self.assertEqual(to_roman(4), "IV")\n'
                '        self.assertEqual(to_roman(14), "XIV")\n'
                '        self.assertEqual(to_roman(1994), "MCMXCIV")\n',
            ),
        ),
        fail_to_pass=("tests/test_roman.py::ToRomanTests::test_four",),
    ),
    _Step(
        "sam",
        "flit",
        "2020-05-12 09:15",
        "Build with flit; drop Python 2 and six\n",
        (
            write("pyproject.toml", PYPROJECT_FLIT),
            _delete("setup.py"),
            _delete("setup.cfg"),
            edit(_I, '__version__ = "0.4.0"', '__version__ = "0.5.0"'),
            edit(_P, '"""\n\nfrom six import string_types\n\n\ndef parse_pairs', '"""\n\n\ndef parse_pairs'),
            edit(_P, "isinstance(text, string_types)", "isinstance(text, str)"),
        ),
    ),
    _Step(
        "marta",
        "flit",
        "2020-06-16 17:22",
        "add_months: clamp the day to the end of a shorter month\n\n"
        "add_months(date(2020, 1, 31), 1) raised ValueError instead of giving 29 February.\n",
        (
            edit(
                _D,
                "    return date.replace(year=year, month=month)\n",
                "    day = min(date.day, days_in_month(year, month))\n"
                "    return date.replace(year=year, month=month, day=day)\n",
            ),
            edit(
                "tests/test_dates.py",
                "        self.assertEqual(add_months(datetime.date(2013, 3, 12), -3), datetime.date(2012, 12, 12))\n",
                "        self.assertEqual(add_months(datetime.date(2013, 3, 12), -3), datetime.date(2012, 12, 12))\n\n"
                "    def test_clamps_to_end_of_month(self):\n"
                "        self.assertEqual(add_months(datetime.date(2020, 1, 31), 1), datetime.date(2020, 2, 29))\n"
                "        self.assertEqual(add_months(datetime.date(2019, 3, 31), -1), datetime.date(2019, 2, 28))\n",
            ),
        ),
        fail_to_pass=("tests/test_dates.py::AddMonthsTests::test_clamps_to_end_of_month",),
    ),
    _Step(
        "kenji",
        "poetry_core",
        "2021-09-07 10:50",
        "Move to Poetry (poetry-core builds the package); run the tests on GitHub Actions\n",
        (
            write("pyproject.toml", PYPROJECT_POETRY),
            write(".github/workflows/tests.yml", WORKFLOW_2021),
            write("README.rst", README_2021),
            edit(_I, '__version__ = "0.5.0"', '__version__ = "0.6.0"'),
        ),
    ),
    _Step(
        "lucia",
        "poetry_core",
        "2021-10-12 14:26",
        "parse_pairs: strip the spaces around values too\n\nparse_pairs('a = 1') gave {'a': ' 1'}.\n",
        (
            edit(_P, "    Empty items are skipped; keys are", "    Empty items are skipped; keys and values are"),
            edit(_P, "        pairs[key.strip()] = value\n", "        pairs[key.strip()] = value.strip()\n"),
            edit(
                "tests/test_pairs.py",
                "    def test_rejects_bytes(self):\n",
                "    def test_spaces_around_equals(self):\n"
                '        self.assertEqual(parse_pairs("a = 1; b =2 "), {"a": "1", "b": "2"})\n\n'
                "    def test_rejects_bytes(self):\n",
            ),
        ),
        fail_to_pass=("tests/test_pairs.py::ParsePairsTests::test_spaces_around_equals",),
    ),
    _Step(
        "sam",
        "hatch_vcs",
        "2023-04-18 11:31",
        "Build with hatchling, version from git tags; move to a src layout\n",
        (
            write("pyproject.toml", PYPROJECT_HATCH),
            write("README.rst", README_2023),
            _move(_D, f"{_SRC}/dates.py"),
            _move(_S, f"{_SRC}/pad.py"),
            _move(_P, f"{_SRC}/pairs.py"),
            _move(_R, f"{_SRC}/roman.py"),
            _delete(_I),
            write(f"{_SRC}/__init__.py", INIT_2023),
        ),
    ),
    _Step(
        "kenji",
        "hatch_vcs",
        "2023-05-23 15:09",
        "pad_left, pad_right: cut a fill of several characters to the width\n\n"
        "pad_left('7', 4, fill='ab') returned 'ababab7', 7 characters.\n",
        (
            edit(f"{_SRC}/pad.py", "    return fill * (width - len(text)) + text\n",
                  "    return (fill * width)[: width - len(text)] + text\n"),
            edit(f"{_SRC}/pad.py", "    return text + fill * (width - len(text))\n",
                  "    return text + (fill * width)[: width - len(text)]\n"),
            edit(
                "tests/test_pad.py",
                "    def test_text_longer_than_width(self):\n        self.assertEqual(pad_left(",
                "    def test_fill_of_several_characters(self):\n"
                '        self.assertEqual(pad_left("7", 4, fill="ab"), "aba7")\n'
                '        self.assertEqual(pad_right("7", 4, fill="ab"), "7aba")\n\n'
                "    def test_text_longer_than_width(self):\n        self.assertEqual(pad_left(",
            ),
        ),
        fail_to_pass=("tests/test_pad.py::PadTests::test_fill_of_several_characters",),
    ),
    _Step(
        "lucia",
        "scm_version_file",
        "2025-12-09 10:17",
        "Build with setuptools-scm, which writes src/eralib/_version.py\n\n"
        "The version no longer needs the installed metadata; the file is generated, not committed.\n",
        (
            write("pyproject.toml", PYPROJECT_SCM),
            write("README.rst", README_2025),
            write(f"{_SRC}/__init__.py", INIT_2025),
            edit(".gitignore", "*.egg-info/\n", "*.egg-info/\nsrc/eralib/_version.py\n"),
            write("tests/test_version.py", TEST_VERSION),
        ),
    ),
    _Step(
        "sam",
        "scm_version_file",
        "2026-01-13 12:44",
        "to_roman: reject numbers outside 1..3999\n\nto_roman(0) returned '' and to_roman(-3) 'CMXCVII'.\n",
        (
            edit(
                f"{_SRC}/roman.py",
                "    numerals = []\n",
                "    if not 0 < number < 4000:\n"
                '        raise ValueError(f"Roman numerals go from 1 to 3999, not {number}")\n'
                "    numerals = []\n",
            ),
            edit("tests/test_roman.py", "import unittest\n\n", "import unittest\n\nimport pytest\n\n"),
            edit(
                "tests/test_roman.py",
                '\n\nif __name__ == "__main__":\n',
                "\n\n@pytest.mark.parametrize(\"number\", [0, -3, 4000])\n"
                "def test_out_of_range(number):\n"
                "    with pytest.raises(ValueError):\n"
                "        to_roman(number)\n"
                '\n\nif __name__ == "__main__":\n',
            ),
        ),
        fail_to_pass=(
            "tests/test_roman.py::test_out_of_range[0]",
            "tests/test_roman.py::test_out_of_range[-3]",
            "tests/test_roman.py::test_out_of_range[4000]",
        ),
    ),
]


# ---------------------------------------------------------------- writing the repository


def _change(path: Path, change: tuple) -> None:
    if change[0] == "delete":
        target = path / change[1]
        target.unlink()
        _prune(path, target.parent)
    elif change[0] == "move":
        source, target = path / change[1], path / change[2]
        target.parent.mkdir(parents=True, exist_ok=True)
        source.rename(target)
        _prune(path, source.parent)
    else:
        change_apply(path, change)


def _prune(root: Path, folder: Path) -> None:
    """Remove `folder` and its parents below `root` while they are empty."""
    while folder != root and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def _moment(author: Author, when: str) -> datetime:
    sign = -1 if author.tz.startswith("-") else 1
    offset = timedelta(hours=int(author.tz[1:3]), minutes=int(author.tz[3:5])) * sign
    return datetime.strptime(when, "%Y-%m-%d %H:%M").replace(tzinfo=timezone(offset))


def era_repo_write(path: Path) -> list[EraCommit]:
    """Create a git repository at `path` (absent or empty) with eralib's history, 2013 to 2026."""
    path = Path(path)
    if path.exists() and any(path.iterdir()):
        raise FileExistsError(f"{path} exists and is not empty")
    path.mkdir(parents=True, exist_ok=True)
    env = git_env()
    git(path, "init", "-q", "-b", "main", env=env)
    commits = []
    for step in _STEPS:
        for change in step.changes:
            _change(path, change)
        author = _AUTHORS[step.author]
        moment = _moment(author, step.when)
        date = f"{int(moment.timestamp())} {author.tz}"
        commit_env = author_env(env, author, date)
        git(path, "add", "-A", env=commit_env)
        git(path, "commit", "-q", "--no-verify", "-F", "-", env=commit_env, stdin=step.message.encode("utf-8"))
        commits.append(
            EraCommit(
                sha=git(path, "rev-parse", "HEAD", env=env),
                subject=step.message.split("\n", 1)[0],
                style=step.style,
                committed_at=moment,
                fail_to_pass=step.fail_to_pass,
            )
        )
    return commits


def main(argv: Optional[list[str]] = None) -> int:
    return history_main("worker.demo.era_repo", era_repo_write,
                        lambda commit: f"{commit.sha}\t{commit.style}\t{commit.committed_at.isoformat()}\t{commit.subject}",
                        argv)


if __name__ == "__main__":
    sys.exit(main())
