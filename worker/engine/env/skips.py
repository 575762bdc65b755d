"""Tests that skip for want of a module, as pytest's -rs summary says, and the requirement that
provides it: the package's own extras first."""

import re
import sys

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from worker.engine.env.recipes import declared_extras

# A skip in pytest's -rs summary ("SKIPPED [2] tests/test_x.py:3: reason"), and reasons naming a missing import.
_SKIP_LINE = re.compile(r"^SKIPPED \[(\d+)\] [^\n]*?: (.*)$", re.MULTILINE)
_MISSING_IMPORT = re.compile(r"could not import '([A-Za-z_][\w.]*)'|No module named '([A-Za-z_][\w.]*)'"
                             r"|^([A-Za-z_][\w.-]*) (?:is )?not (?:installed|available)", re.IGNORECASE)
OPTIONAL_AT_MOST = 5  # optional requirements added for skipped tests, at most
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


def optional_requirements(missing: dict[str, str], recipe: dict[str, str]) -> list[tuple[str, str]]:
    """(requirement, why) for missing modules: a requirement of the package's own extras that provides
    the module, else the distribution of that name."""
    extras = [requirement for requirements in declared_extras(recipe).values() for requirement in requirements]
    wanted = []
    for module, why in missing.items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", module) or module in sys.stdlib_module_names:
            continue  # nothing an install could provide, or what uv would read as an option
        name = canonicalize_name(_DISTRIBUTION_OF_MODULE.get(module, module))
        own = next((text for text in extras if canonicalize_name(Requirement(text).name) == name), None)
        requirement = own or name
        if requirement not in [w for w, _ in wanted] and name != "pytest":
            wanted.append((requirement, f"{'an extra of the package; ' if own else ''}tests skipped: {why}"))
    return wanted[:OPTIONAL_AT_MOST]
