"""Tests that skip for want of a module, as pytest's -rs summary says, or that do not collect for
want of one, and the requirement that provides it: the package's own extras first; and where tests
skip whatever they say, the package's extras."""

import re
import sys
from typing import Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from worker.engine.env.recipes import declared_extras, project_name

# A skip in pytest's -rs summary ("SKIPPED [2] tests/test_x.py:3: reason"), and reasons naming a missing import.
_SKIP_LINE = re.compile(r"^SKIPPED \[(\d+)\] [^\n]*?: (.*)$", re.MULTILINE)
_MISSING_IMPORT = re.compile(r"could not import '([A-Za-z_][\w.]*)'|No module named '([A-Za-z_][\w.]*)'"
                             r"|^([A-Za-z_][\w.-]*) (?:is )?not (?:installed|available)", re.IGNORECASE)
# A test module that did not import for want of a module: Python 3's words, and Python 2's. A module
# of a package ('a.b') is left out: what is missing there is not a distribution.
_NOT_FOUND = re.compile(r"^E?[ \t]*(?:ModuleNotFoundError: No module named '([A-Za-z_]\w*)'"
                        r"|ImportError: No module named ([A-Za-z_]\w*)[ \t]*)$", re.MULTILINE)
OPTIONAL_AT_MOST = 5  # optional requirements added for skipped or uncollected tests, at most
EXTRAS_AT_MOST = 20  # requirements of the package's extras added where tests skip, at most
# Import names that differ from the distribution's.
_DISTRIBUTION_OF_MODULE = {"yaml": "pyyaml", "dateutil": "python-dateutil", "PIL": "pillow", "bs4": "beautifulsoup4",
                           "sklearn": "scikit-learn", "cv2": "opencv-python-headless", "magic": "python-magic"}


def skipped_count(output: str) -> int:
    return sum(int(count) for count, _reason in _SKIP_LINE.findall(output))


def missing_modules(output: str) -> dict[str, str]:
    """Top-level module -> the skip reason that names it, for tests skipped for want of an import."""
    missing = {}
    for _count, reason in _SKIP_LINE.findall(output):
        found = _MISSING_IMPORT.search(reason.strip())
        if found:
            name = next(group for group in found.groups() if group).split(".")[0]
            missing.setdefault(name, reason.strip()[:200])
    return missing


def modules_not_found(output: str) -> dict[str, str]:
    """Top-level module -> what Python said, for test modules that did not import for want of it."""
    found = {}
    for match in _NOT_FOUND.finditer(output):
        found.setdefault(match.group(1) or match.group(2), match.group(0).strip().removeprefix("E").strip())
    return found


def optional_requirements(missing: dict[str, str], recipe: dict[str, str],
                          said: str = "tests skipped") -> list[tuple[str, str]]:
    """(requirement, why) for missing modules: a requirement of the package's own extras that provides
    the module, else the distribution of that name (resolved as of the commit's date, as the rest)."""
    extras = [requirement for requirements in declared_extras(recipe).values() for requirement in requirements]
    wanted = []
    for module, why in missing.items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", module) or module in sys.stdlib_module_names:
            continue  # nothing an install could provide, or what uv would read as an option
        name = canonicalize_name(_DISTRIBUTION_OF_MODULE.get(module, module))
        own = next((text for text in extras if canonicalize_name(Requirement(text).name) == name), None)
        requirement = own or name
        if requirement not in [w for w, _ in wanted] and name != "pytest":
            wanted.append((requirement, f"{'an extra of the package; ' if own else ''}{said}: {why}"))
    return wanted[:OPTIONAL_AT_MOST]


def extras_requirements(recipe: dict[str, str], installed: Sequence[str], output: str) -> list[tuple[str, str]]:
    """(requirement, why) for every extra the package declares but those `installed`, for tests that
    skip whatever their reason says ("wcwidth is not there" is also said as "...is skipped"): the
    package's own extras name what its tests may want. Not pytest (the attempt's is kept), not the
    package itself (an extra naming others: "pkg[a,b]")."""
    reasons = [reason.strip() for _count, reason in _SKIP_LINE.findall(output)]
    if not reasons:
        return []
    own = canonicalize_name(project_name(recipe) or "-")
    wanted: dict[str, str] = {}
    for extra, requirements in declared_extras(recipe).items():
        if extra in installed:
            continue
        for text in requirements:
            if canonicalize_name(Requirement(text).name) not in (own, "pytest"):
                wanted.setdefault(text, f"the package's extra [{extra}]; tests skipped: {reasons[0][:200]}")
    return list(wanted.items())[:EXTRAS_AT_MOST]
