"""Which licence a repository's licence file holds: its file found by name at the top of the tree,
its SPDX identifier recognised from the phrases each common licence's text carries. What is not
recognised is said as such (None), never guessed."""

import re
from typing import Iterable, Optional

# LICENSE, LICENCE.md, COPYING.txt, LICENSE-APACHE, LICENSE.BSD: not license.py or license_check.py.
_FILE = re.compile(r"^(licen[cs]e|copying|unlicense)(?!\.(py|js|ts|rb|go|c|h|sh)$)([.-][a-z0-9]+)?(\.(md|txt|rst))?$",
                   re.IGNORECASE)


def licence_files(names: Iterable[str]) -> list[str]:
    """The names that are licence files (LICENSE, LICENCE.md, COPYING.txt, LICENSE-APACHE...), in order."""
    return sorted(name for name in names if _FILE.match(name))


def _has(text: str, *phrases: str) -> bool:
    return all(phrase in text for phrase in phrases)


def licence_spdx(text: str) -> Optional[str]:
    """The SPDX identifier of a licence text, where it is one of the common ones; else None."""
    plain = " ".join(text.split()).lower()  # the phrases whatever the line breaks and case
    if _has(plain, "apache license", "version 2.0"):
        return "Apache-2.0"
    if _has(plain, "mozilla public license", "2.0"):
        return "MPL-2.0"
    if _has(plain, "gnu affero general public license", "version 3"):
        return "AGPL-3.0"
    if _has(plain, "gnu lesser general public license"):
        return "LGPL-3.0" if "version 3" in plain else "LGPL-2.1" if "version 2.1" in plain else None
    if _has(plain, "gnu general public license"):
        return "GPL-3.0" if "version 3" in plain else "GPL-2.0" if "version 2" in plain else None
    if _has(plain, "this is free and unencumbered software released into the public domain"):
        return "Unlicense"
    if _has(plain, "permission is hereby granted, free of charge"):
        return "MIT"
    if _has(plain, "permission to use, copy, modify, and/or distribute this software for any purpose"):
        return "ISC"
    if _has(plain, "redistribution and use in source and binary forms"):
        return "BSD-3-Clause" if _has(plain, "neither the name") else "BSD-2-Clause"
    return None
