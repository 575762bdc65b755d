"""When an install resolves as of: the commit's date for what the code runs with, later for what
builds it, and a cutoff lifted a step at a time for a package the date leaves unsatisfiable or
unbuildable; which pytest; and what uv's failures say about which cutoff to lift."""

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Optional, Sequence

from packaging.utils import canonicalize_name

LIFT_YEARS = (1, 2, 4, 8, None)  # a lifted cutoff's steps after the commit's date; None: no cutoff
# pytest of the commit's day, as long as our report plugin runs with it (4.6 on).
PYTEST_OF_THE_DAY = "pytest>=4.6"
# The oldest pytest that runs on each Python, used where the one of the commit's day does not, and
# the day its series ended: pytest and what it needs resolve as of then.
PYTEST_FLOOR = {"3.6": ("4.6.0", date(2020, 6, 6)), "3.7": ("4.6.0", date(2020, 6, 6)), "3.8": ("4.6.0", date(2020, 6, 6)),
                "3.9": ("6.1.0", date(2020, 10, 29)), "3.10": ("6.2.5", date(2021, 8, 30)),
                "3.11": ("6.2.5", date(2021, 8, 30)), "3.12": ("7.4.0", date(2024, 1, 1)),
                "3.13": ("8.2.0", date(2024, 6, 5)), "3.14": ("8.4.0", date(2025, 9, 10))}
PYTEST_NEEDS = ("pytest", "pluggy", "py", "iniconfig", "attrs", "more-itertools", "atomicwrites", "toml", "tomli",
                "exceptiongroup", "packaging", "colorama", "importlib-metadata", "zipp", "wcwidth", "pygments")
# What uv says when the date held a requirement back, and when a package's build failed.
_FILTERED = re.compile(r"`([A-Za-z0-9._-]+)`\s+was\s+filtered\s+by\s+`exclude-newer(?:-package)?`")
_BUILD_FAILED = re.compile(r"Failed to (?:download and )?build `([A-Za-z0-9._-]+)(==| @ )([^`]*)`")


@dataclass
class Cutoffs:
    """The dates an install resolves as of: the commit's, and later ones for the packages lifted."""

    as_of: datetime
    lifted: dict[str, Optional[datetime]]  # package -> its cutoff (None: none)
    build: tuple[str, ...]  # what the build needs: lifted together

    def args(self) -> list[str]:
        args = ["--exclude-newer", self.as_of.isoformat()]
        for package, cutoff in sorted(self.lifted.items()):
            args += ["--exclude-newer-package", f"{package}={cutoff.isoformat() if cutoff else 'false'}"]
        return args

    def lift(self, packages: Sequence[str]) -> bool:
        """Each package's cutoff one step later; False when none of them can move."""
        moved = False
        for package in packages:
            later = self._next(self.lifted.get(package, self.as_of))
            if later != "stuck":
                self.lifted[package], moved = later, True
        return moved

    def _next(self, cutoff: Optional[datetime]):
        now = datetime.now(self.as_of.tzinfo)
        if cutoff is None or cutoff >= now:
            return "stuck"  # no cutoff, or one no release is newer than
        steps = [self.as_of + timedelta(days=round(365.25 * years)) if years else None for years in LIFT_YEARS]
        later = next((step for step in steps if step is None or step > cutoff), None)
        return None if later is None or later >= now else later

    def recorded(self) -> dict[str, str]:
        return {package: cutoff.date().isoformat() if cutoff else "none" for package, cutoff in self.lifted.items()}


def lifts_wanted(output: str, build: Sequence[str]) -> list[str]:
    """The packages whose cutoff to lift after a failed install: those the date held back (uv's
    hint), else the one whose build failed (the build packages, when it is the repository itself)."""
    held = [canonicalize_name(name) for name in _FILTERED.findall(output)]
    if held:
        return list(dict.fromkeys(held))
    failed = _BUILD_FAILED.search(output)
    if failed and not failed.group(3).startswith("file://"):
        return [canonicalize_name(failed.group(1))]
    if failed or "build backend" in output or "build_editable" in output:
        return list(build)
    return []


def install_failure_reason(output: str, cutoffs: Cutoffs) -> str:
    held = {canonicalize_name(name) for name in _FILTERED.findall(output)}
    if held:
        return "build_requirements_unavailable" if held & set(cutoffs.build) else "dependencies_unavailable"
    failed = _BUILD_FAILED.search(output)
    if failed and not failed.group(3).startswith("file://"):
        return "dependency_build_failed"
    if failed or "build backend" in output or "build_editable" in output:
        return "build_failed"
    if "No solution found" in output:
        return "dependencies_unavailable"
    return "install_failed"


def date_rounded_up(moment: datetime, days: int) -> datetime:
    """The end of the `days`-long period (counted from the Unix epoch) that holds `moment`."""
    if days <= 0:
        return moment
    moment = moment.astimezone(timezone.utc) if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    period = timedelta(days=days)
    return epoch + period * ((moment - epoch) // period + 1) - timedelta(seconds=1)


def release_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])
