"""Which licence a repository's licence files hold: the files found by name at the top of the tree,
each one's SPDX identifier recognised from its title or the phrases each common licence's text
carries. What is not recognised is said as such (None), never guessed."""

import re
from typing import Iterable, Optional

# LICENSE, LICENCE.md, COPYING.txt, COPYING.LESSER, LICENSE-APACHE, LICENSE.BSD: not license.py.
_FILE = re.compile(r"^(licen[cs]e|copying|unlicense)(?!\.(py|js|ts|rb|go|c|h|sh)$)([.-][a-z0-9]+)?(\.(md|txt|rst))?$",
                   re.IGNORECASE)
TITLE_LINES = 12  # a GNU licence names itself at the top; its body mentions the others
_GNU = (("gnu affero general public license", "AGPL"), ("gnu lesser general public license", "LGPL"),
        ("gnu library general public license", "LGPL"), ("gnu general public license", "GPL"))
_GNU_VERSIONS = {"AGPL": ("3.0",), "LGPL": ("3.0", "2.1", "2.0"), "GPL": ("3.0", "2.0", "1.0")}


def licence_files(names: Iterable[str]) -> list[str]:
    """The names that are licence files, in order."""
    return sorted(name for name in names if _FILE.match(name))


def _plain(text: str) -> str:
    return " ".join(text.split()).lower()  # the phrases whatever the line breaks and case


def _gnu(title: str) -> Optional[str]:
    for phrase, family in _GNU:  # the most specific first: "lesser" before plain "general"
        if phrase in title:
            for version in _GNU_VERSIONS[family]:
                short = version.removesuffix(".0")
                if f"version {version}" in title or f"version {short}," in title or f"version {short} " in title:
                    return f"{family}-{version}"
            return None
    return None


def licence_spdx(text: str) -> Optional[str]:
    """The SPDX identifier of a licence text, where it is one of the common ones; else None."""
    title, plain = _plain("\n".join(text.splitlines()[:TITLE_LINES])), _plain(text)
    if "general public license" in title:
        return _gnu(title)
    if "apache license" in title and "version 2.0" in title:
        return "Apache-2.0"
    if "mozilla public license" in title and "2.0" in title:
        return "MPL-2.0"
    if "this is free and unencumbered software released into the public domain" in plain:
        return "Unlicense"
    if "permission is hereby granted, free of charge" in plain:
        return "MIT"
    if "permission to use, copy, modify, and/or distribute this software for any purpose" in plain:
        return "ISC"
    if "redistribution and use in source and binary forms" in plain:
        return "BSD-3-Clause" if "neither the name" in plain else "BSD-2-Clause"
    return None
