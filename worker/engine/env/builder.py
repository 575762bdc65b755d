"""Build the environment a repository had at a commit, in a sandbox of either backend.

The repository's own files say how it installs (recipes.py). Versions resolve as of the commit's
date with uv's --exclude-newer, except what the build needs (setuptools, hatchling, ...), which
starts from the later of that date and its Python's, so that a 2014 setup.py builds on a Python of
2022. Where a cutoff leaves a requirement unsatisfiable, or a dependency's sdist does not build on
the Python chosen, the cutoff is lifted for that package alone, a step at a time (a year, two,
four, eight, then none), and each lift is recorded. pytest is the one of the commit's day, or
where that does not run on the Python, the oldest that does.

Each Python (runtimes.py) and, with each, each strategy is tried in order until the package
installs and pytest collects the tests. Every attempt is recorded, with the reason it was refused.
Files the install wrote into the working copy (a version file from setuptools-scm or hatch-vcs,
an extension built in place) are kept beside the environment and laid into every run's copy.
"""

import errno
import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from datetime import datetime, time
from pathlib import Path
from typing import Callable, Literal, Optional, Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from worker.engine.env.era import (
    PARSE_SCRIPT,
    dependency_too_old,
    own_top_level_modules,
    parse_answers,
    python2_code,
    removed_by_code,
    removed_in,
    setup_refuses,
    syntax_error_files,
    with_era_reason,
)
from worker.engine.env.files import (
    GENERATED_FILES,
    environment_files,
    environment_files_lay,
    environment_seal,
    generated_files_keep,
    working_copy_files,
)
from worker.engine.env.rebuild import EnvironmentToRelease, lock_install_argv, project_install_argv
from worker.engine.env.recipes import (
    ENV,
    REPO,
    UV,
    WORKING_COPY_PTH,
    WORKSPACE,
    Strategy,
    build_packages,
    install_recipe,
    install_strategies,
    pytest_plugins,
    recipe_key,
    working_copy_pth_line,
)
from worker.engine.env.resolve import (
    LIFT_YEARS,
    PYTEST_FLOOR,
    PYTEST_NEEDS,
    PYTEST_OF_THE_DAY,
    Cutoffs,
    date_rounded_up,
    install_failure_reason,
    lifts_wanted,
    release_tuple,
)
from worker.engine.env.runtimes import PYTHON_RELEASES, PYTHON_VERSION, Runtime, local_runtimes, python_order
from worker.engine.env.skips import (
    OPTIONAL_AT_MOST,
    extras_requirements,
    missing_modules,
    modules_not_found,
    optional_requirements,
    skipped_count,
)
from worker.engine.git.archive import archive_unpacked
from worker.engine.git.working_copy import working_copy_clone
from worker.engine.run.report_plugin import legacy_pytest_ini
from worker.engine.sandbox.base import Limits, RunStatus, Sandbox, sandbox_file_create, sandbox_file_open
from worker.engine.sandbox.local import LocalSandbox

_PINNED = re.compile(r"[A-Za-z0-9._-]+(\[[^\]]*\])?(==| @ )")  # a frozen requirement, not the editable project
MAX_PINS = 3  # attempts holding packages back, per strategy, before it counts as failed
PROBE_SECONDS = 60  # the run of the commit's own test files that reads their skips: a hanging test ends it
MAX_LIFTS = 12  # installs in one attempt with a cutoff lifted, before the attempt counts as failed
# What an import of something a later release removed says (ImportError, or AttributeError on a module).
_BROKEN_IMPORT = re.compile(r"cannot import name '[^']+' from '([\w.]+)'|module '([\w.]+)' has no attribute")
_INSTALLED_PYTEST = re.compile(r"\+ pytest==([0-9][\w.]*)")
# A virtualenv of the code's day came with setuptools (and its pkg_resources); uv's comes with nothing.
# (distutils too: on Python 3.12 on, only setuptools' copy of it is there.)
_SEEDED_BY_VIRTUALENV = re.compile(r"No module named '(pkg_resources|setuptools|distutils)'")
# The pytest an attempt asks for, over any the repository pins (a dev-requirements.txt of 2017 says
# pytest==3.0.2, older than any our report plugin runs with).
PYTEST_OVERRIDE = "pytest-override.txt"
LEGACY_INI = "legacy-setup-cfg.ini"  # beside the working copy, where a setup.cfg has a [pytest] section
# Python 2: virtualenv (Debian's, in the base image) makes the environment and pip installs into it,
# resolving for Python 2 with no date cutoff (uv, which has one, neither makes nor resolves for it).
PIP_INSTALL = (f"{ENV}/bin/python", "-m", "pip", "install", "--disable-pip-version-check",
               "--no-python-version-warning", "--no-input")
PYTHON2_SEED = ("setuptools<45", "wheel<0.38")  # the last that run on Python 2
PYTEST_PYTHON2 = "pytest>=4.6,<5"  # the last series on Python 2, and the first the report plugin runs with
_PIP_UNAVAILABLE = re.compile(r"No matching distribution found|Could not find a version that satisfies")
_NO_TESTS = re.compile(r"^(no tests ran|no tests collected)\b", re.MULTILINE)
# Run in the environment: the distribution that installed a top-level module, and its version.
_DISTRIBUTION_OF = """
import importlib.metadata as metadata, sys
for dist in metadata.distributions():
    tops = set((dist.read_text("top_level.txt") or "").split())
    firsts = [str(f).split("/")[0] for f in dist.files or []]
    tops |= {first[:-3] if first.endswith(".py") else first for first in firsts}
    if sys.argv[1] in tops:
        print(dist.metadata["Name"], dist.version)
        break
"""
# Run in the environment: writes a file (argv[1]) with a text (argv[2]) where its site-packages are.
_SITE_FILE_WRITE = """
import sys, sysconfig
with open(sysconfig.get_paths()["purelib"] + "/" + sys.argv[1], "w") as written:
    written.write(sys.argv[2])
"""


class EnvironmentFailed(Exception):
    def __init__(self, attempts: list["Attempt"]):
        super().__init__(f"no install strategy worked ({len(attempts)} tried)")
        self.attempts = attempts

    @property
    def reason(self) -> str:
        """Why no environment: the reason of the attempt that came closest."""
        return failure_reason(self.attempts)


# The step that ended an attempt ("" when all passed): making the virtualenv, installing, putting
# the working copy on the path, running pytest at all, collecting the tests, reading the
# environment back, or checking that an earlier environment fits.
AttemptStep = Literal["venv", "install", "path", "runner", "collect", "probe", "keep", ""]
_STEP_ORDER = ("venv", "install", "path", "runner", "collect", "probe", "keep")


@dataclass(frozen=True)
class Attempt:
    strategy: str
    commands: list[str]
    status: RunStatus  # "ok", or the failing step's sandbox status
    step: AttemptStep
    output: str
    seconds: float
    reason: str = ""  # why it was refused: a code of ENVIRONMENT_REASONS ("" when it worked)
    lifted: dict[str, str] = field(default_factory=dict)  # package -> the cutoff it was lifted to ("none")
    as_of: str = ""  # the date (ISO) the rest resolved as of ("" on Python 2, which has no cutoffs)
    pytest: str = ""  # the pytest it installed, and why that one
    added: list[dict[str, str]] = field(default_factory=list)  # optional requirements added: {requirement, why}
    on_path: bool = False  # the strategy imports the code from the working copy rather than installing it
    generated: tuple[str, ...] = ()  # files the install wrote into the working copy (not those tests wrote)
    suite_args: tuple[str, ...] = ()  # what the suite needed to collect (BuiltEnvironment.suite_args)
    said: str = ""  # what the step that ended it printed (the failing step's, or the last one's)


def failure_reason(attempts: Sequence[Attempt]) -> str:
    """The reason of the attempt that got furthest (the latest of those that got as far), among those
    that installed the package where there are any: a fallback that put the working copy on the path
    fails for want of what the install would have given."""
    failed = [attempt for attempt in attempts if attempt.status != "ok" and attempt.strategy != "reuse"]
    failed = [attempt for attempt in failed if not attempt.on_path] or failed
    # On a Python too new for the code, how far an attempt got says nothing: those of its era speak.
    failed = [attempt for attempt in failed if attempt.reason != "no_python_for_era"] or failed
    if not failed:
        return "install_failed"
    closest = max(reversed(failed), key=lambda attempt: _STEP_ORDER.index(attempt.step or "keep"))
    return closest.reason or "install_failed"


@dataclass(frozen=True)
class BuiltEnvironment:
    path: Path  # the virtualenv on this machine, mounted at /workspace/env
    key: str  # Python version + resolved lock: environments with the same key are the same
    python_version: str
    lock: str  # `uv pip freeze`
    attempts: list[Attempt] = field(default_factory=list)
    recipe_key: str = ""  # the install files it was built from
    image: str = ""  # the docker image its Python lives in ("" for the local backend)
    sealed_image: str = ""  # an image of its own holding it at /workspace/env: runs use it, mounting nothing
    generated: list[str] = field(default_factory=list)  # files its install wrote into the working copy, laid into runs
    # What a run of the whole suite gives pytest: nothing, or for nose-era tests in modules not named
    # test_*.py, their folders with every module in them collected.
    suite_args: tuple[str, ...] = ()


@dataclass
class EnvironmentBuilder:
    """Builds virtualenvs for working copies laid out as `<workdir>/repo`."""

    env_root: Path  # where finished environments live, one folder per key
    uv: Path  # the uv executable on this machine
    namespace: str = ""  # environments are shared within a namespace only (one per repository)
    runtimes: Sequence[Runtime] = field(default_factory=local_runtimes)  # the Pythons to search
    ca_bundle: Optional[Path] = None  # extra CA bundle for TLS-inspecting proxies
    limits: Limits = Limits(wall_seconds=900, cpu_seconds=900)
    # Makes the sandbox every step runs in: LocalSandbox, or a configured DockerSandbox.
    sandbox_factory: Callable[..., Sandbox] = LocalSandbox
    backend: str = "local"
    # Runtime dependencies resolve as of the commit's date rounded up to a multiple of this many days
    # (0: not rounded), so that neighbouring commits land on the same lock; the build's packages do not.
    round_days: int = 0
    search_seconds: float = 3600  # the search stops trying further strategies past this much sandbox time

    def sandbox(self, read_only: Sequence = (), *, image: str = "") -> Sandbox:
        """A sandbox of this builder's backend with `read_only` mounted; for docker, in `image`
        (an environment's), else the first runtime's."""
        image = image or (self.runtimes[0].image if self.runtimes else "")
        return self.sandbox_factory(read_only=list(read_only), **({"image": image} if image else {}))

    def environment_sandbox(self, environment: BuiltEnvironment) -> Sandbox:
        """A sandbox that runs in `environment`: its folder mounted read-only at /workspace/env, or, for
        containers, the image it was sealed into as it is."""
        if environment.sealed_image and self.backend == "docker":
            return self.sandbox_factory(read_only=[], image=environment.sealed_image, image_paths=(ENV,))
        return self.sandbox([(environment.path, ENV)], image=environment.image)

    def runs(self, environment: BuiltEnvironment) -> bool:
        """Whether this builder's sandboxes can run `environment` (its Python is one of the runtimes, or
        the sandboxes are containers and it was sealed into an image)."""
        if environment.sealed_image and self.backend == "docker":
            return True
        return any(environment.python_version.startswith(f"{runtime.version}.") and runtime.image == environment.image
                   for runtime in self.runtimes)

    def _sandbox(self, runtime: Runtime, extra: tuple = ()):
        read_only = [(self.uv, UV), *extra]
        if self.ca_bundle:
            read_only.append((self.ca_bundle, "/opt/commitgym/ca.pem"))
        return self.sandbox(read_only, image=runtime.image)

    def _env(self) -> dict:
        env = {"UV_PYTHON_DOWNLOADS": "never", "UV_CACHE_DIR": f"{WORKSPACE}/.uv-cache", "UV_NO_PROGRESS": "1",
               # A working copy has no .git: setuptools-scm projects install with this version instead.
               "SETUPTOOLS_SCM_PRETEND_VERSION": "0.0.0"}
        if self.ca_bundle:
            env.update(SSL_CERT_FILE="/opt/commitgym/ca.pem", PIP_CERT="/opt/commitgym/ca.pem")
        else:
            env.update(SSL_CERT_FILE="/etc/ssl/certs/ca-certificates.crt")
        return env

    def build(self, workdir: Path, *, as_of: datetime, probe: Sequence[str] = ()) -> BuiltEnvironment:
        """Try each Python and, with each, each strategy in a fresh virtualenv until one installs
        and collects. `probe`: test files to run once in the environment found (the commit's own),
        to see which tests skip for want of an optional dependency."""
        recipe = install_recipe(workdir / "repo")
        if not self.runtimes:
            raise EnvironmentFailed([Attempt("python", [], "failed", "venv", f"No Python is available to the "
                                             f"{self.backend} sandbox (docker: no base image is present; "
                                             f"manage.py build_base_images builds them).", 0.0, reason="no_python")])
        files = working_copy_files(workdir / "repo")
        build = _Build(workdir, as_of, recipe, tuple(probe), set(files), frozenset(files))
        attempts = []
        removed = ""  # a Python that removed what the code reaches for: it and later ones are not tried further
        order = python_order(self.runtimes, recipe, as_of)
        oldest_python3 = min((release_tuple(other.version) for other in order if not other.python2), default=None)
        python2_here = any(other.python2 for other in order)
        for runtime in order:
            if removed and release_tuple(runtime.version) >= release_tuple(removed):
                continue
            if runtime.python2 and oldest_python3 and not (removed and release_tuple(removed) <= oldest_python3):
                continue  # Python 2 only for code no Python 3 here runs
            floor = False  # once pytest of the commit's day fails on this Python, the next strategies skip it
            for strategy in install_strategies(recipe):
                if runtime.python2 and strategy.name == "editable-compat":
                    continue  # pip's editable install on Python 2 is setuptools' develop already
                tried, adjust = self._attempts_adjusting(build, runtime, strategy, floor)
                attempts, floor = attempts + tried, adjust.floor
                if attempts[-1].status == "ok":
                    attempts += self._optional_dependencies(build, runtime, strategy, attempts[-1], adjust)
                    return self._keep(workdir, runtime, attempts, recipe)
                if attempts[-1].step == "venv":
                    break  # this Python is not there: no strategy can work with it
                if attempts[-1].reason == "no_tests_collected" and not test_modules_present(build.files):
                    raise EnvironmentFailed(attempts)  # nothing to collect, whatever installs it
                failed, said = attempts[-1].step, attempts[-1].said
                if failed in ("install", "collect") and not runtime.python2 and python2_code(
                        said, installing=failed == "install", files=build.files):
                    if not python2_here:
                        raise EnvironmentFailed(self._era_reason(build, attempts))  # no Python 2 here
                    removed = "3.0"  # Python 2 code: only Python 2 runs it
                    break
                if python2_here and not runtime.python2 and failed in ("install", "collect") and (
                        (attempts[-1].reason == "build_failed" and setup_refuses(recipe.get("setup.py", ""),
                                                                                 runtime.version))
                        or self._python2_syntax(build, said, installing=failed == "install")):
                    removed = "3.0"  # setup.py refuses Python 3, or only Python 2 parses the code: try Python 2
                    break
                now = removed_by_code(said, installing=failed == "install", files=build.files) if failed in (
                    "install", "collect") else ""
                if now and release_tuple(runtime.version) >= release_tuple(now):
                    removed = min(removed, now, key=release_tuple) if removed else now
                    break
                if sum(attempt.seconds for attempt in attempts) > self.search_seconds:
                    raise EnvironmentFailed(self._era_reason(build, attempts))
        raise EnvironmentFailed(self._era_reason(build, attempts))

    def _era_reason(self, build: "_Build", attempts: list[Attempt]) -> list[Attempt]:
        return with_era_reason(attempts, build.recipe, self.runtimes, build.files,
                               python2=any(build.parsed.values()))

    def _python2_syntax(self, build: "_Build", said: str, *, installing: bool) -> bool:
        """Whether a SyntaxError the step printed is in a file of the working copy that Python 2's own
        parser accepts and every Python 3's here refuses: syntax Python 3 removed, whichever it is
        (tuple parameters, backticks, `<>`, ur'', 0777, 10L, print and exec statements, `except X, e`)."""
        paths = tuple(syntax_error_files(said, build.files, installing=installing))
        python2 = [runtime for runtime in self.runtimes if runtime.python2][:1]
        if not paths or not python2:
            return False
        if paths not in build.parsed:
            candidates = list(paths)
            for runtime in python2 + [runtime for runtime in self.runtimes if not runtime.python2]:
                answers = self._parsed(build, runtime, candidates)
                candidates = [path for path, answer in zip(candidates, answers)
                              if answer == ("ok" if runtime.python2 else "syntax")]
                if not candidates:
                    break
            build.parsed[paths] = bool(candidates)
        return build.parsed[paths]

    def _parsed(self, build: "_Build", runtime: Runtime, paths: Sequence[str]) -> list[str]:
        """What this Python's parser says of each file: "ok", "syntax" or "other" ([] if it did not say)."""
        result = self._sandbox(runtime).run([runtime.interpreter, "-c", PARSE_SCRIPT, *paths], workdir=build.workdir,
                                            mount_at=WORKSPACE, cwd=REPO,
                                            limits=replace(self.limits, wall_seconds=PROBE_SECONDS,
                                                           cpu_seconds=PROBE_SECONDS))
        return parse_answers(result.output.decode("utf-8", "replace"), len(paths)) if result.ok else []

    def _attempts_adjusting(self, build: "_Build", runtime: Runtime, strategy: Strategy,
                            floor: bool) -> tuple[list[Attempt], "_Adjustments"]:
        """One strategy; again with the oldest pytest that runs on the Python where the one of the
        commit's day does not; again with setuptools where the code imports it without asking for it;
        while a dependency of the commit's day fails on what the Python removed, again with its cutoff
        a step later (a package older than the Python); while the tests fail to import from a
        dependency, again with it held below the release line it came in (one that broke later than
        the code); and while the tests do not collect for want of a module, again with what provides
        it, as for tests that skip for want of one (Python 2 too: the others are uv's adjustments)."""
        adjust = _Adjustments(floor)
        attempts = [self._attempt(build, runtime, strategy, adjust)]
        for _ in range(MAX_PINS + len(LIFT_YEARS) + OPTIONAL_AT_MOST + 1):
            last = attempts[-1]
            said = last.said if last.step == "collect" else ""
            too_old = dependency_too_old(said) if not runtime.python2 else ""
            aged = self._distribution_of(build, runtime, too_old) if too_old else None
            if runtime.python2:  # the other adjustments are uv's, which Python 2 installs do without
                wanted = self._not_found_requirements(build, runtime, said, adjust)
                if not wanted:
                    break
                adjust.optional += wanted
            elif not adjust.floor and self._pytest_too_old(last, runtime):
                adjust.floor = True
            elif aged and adjust.aged.get(aged[0], 0) < len(LIFT_YEARS):
                adjust.aged[aged[0]] = adjust.aged.get(aged[0], 0) + 1
            else:
                pin = (("setuptools", "setuptools") if _SEEDED_BY_VIRTUALENV.search(said)
                       else self._pin_for(build, runtime, said) if said else None)
                wanted = [] if pin else self._not_found_requirements(build, runtime, said, adjust)
                if wanted:
                    adjust.optional += wanted
                elif pin is None or adjust.pins.get(pin[0]) == pin[1] or len(adjust.pins) >= MAX_PINS:
                    break
                else:
                    adjust.pins[pin[0]] = pin[1]
            attempts.append(self._attempt(build, runtime, strategy, adjust))
            if aged and attempts[-1].lifted.get(aged[0]) == last.lifted.get(aged[0]):
                break  # its cutoff can move no further (or the install pins it): the same attempt again
            if sum(attempt.seconds for attempt in attempts) > self.search_seconds:
                break
        return attempts, adjust

    def _not_found_requirements(self, build: "_Build", runtime: Runtime, said: str,
                                adjust: "_Adjustments") -> list[tuple[str, str]]:
        """(requirement, why) for the modules the tests did not collect for want of, not tried yet:
        none the working copy has a module or folder of that name for (tests/helpers.py, found where
        a conftest puts tests/ on the path), of what this Python removed, or of Python 2 code."""
        if not said or not runtime.python2 and (python2_code(said, files=build.files)
                                                or removed_in(said, build.files)):
            return []
        local = {part.removesuffix(".py") for path in build.files for part in Path(path).parts}
        missing = {module: why for module, why in modules_not_found(said).items() if module not in local}
        tried = {requirement for requirement, _why in adjust.optional}
        wanted = [(requirement, why) for requirement, why in optional_requirements(
            missing, build.recipe, said="tests do not collect") if requirement not in tried]
        return wanted[:max(0, OPTIONAL_AT_MOST - len(adjust.optional))]

    def _optional_dependencies(self, build: "_Build", runtime: Runtime, strategy: Strategy, found: Attempt,
                               adjust: "_Adjustments") -> list[Attempt]:
        """Where tests skipped, the same attempt again with what may run them, kept if fewer tests skip
        (otherwise the environment found stays): first what provides the modules the skips name (the
        package's own extras first), then, where the commit's own tests (those probed) still skip
        whatever they say, every extra the package declares that the attempt did not install."""
        tried: list[Attempt] = []
        wanted = optional_requirements(missing_modules(found.output), build.recipe)
        more = self._kept_if_fewer_skips(build, runtime, strategy, adjust, found, wanted) if wanted else None
        if more is not None:
            tried.append(more)
            found = more if more.status == "ok" else found
        added = [(item["requirement"], item["why"]) for item in found.added if (
            item["requirement"], item["why"]) not in adjust.optional]
        extras = [(requirement, why) for requirement, why in extras_requirements(
            build.recipe, _extras_installed(strategy), found.output) if requirement not in dict(added)]
        more = self._kept_if_fewer_skips(build, runtime, strategy, adjust, found, added + extras) if (
            extras and build.probe) else None
        return tried + ([more] if more is not None else [])

    def _kept_if_fewer_skips(self, build: "_Build", runtime: Runtime, strategy: Strategy, adjust: "_Adjustments",
                             found: Attempt, optional: list[tuple[str, str]]) -> Optional[Attempt]:
        """The attempt again with `optional` added, its environment kept if fewer tests skip than in the
        one `found`, which stays otherwise (the attempt is then marked failed); None where what the
        build left is no environment (it is refused as it is kept)."""
        env, kept = build.workdir / "env", build.workdir / "env.kept"
        if env.is_symlink() or not env.is_dir():
            return None
        if kept.is_symlink() or kept.is_file():
            kept.unlink()
        shutil.rmtree(kept, ignore_errors=True)
        os.rename(env, kept)
        more = self._attempt(build, runtime, strategy, adjust, optional)
        if more.status == "ok" and skipped_count(more.output) < skipped_count(found.output):
            shutil.rmtree(kept)
            return more
        shutil.rmtree(env, ignore_errors=True)
        os.rename(kept, env)
        refused = more.reason if more.status != "ok" else "no_fewer_skips"
        return replace(more, status=more.status if more.status != "ok" else "failed", reason=refused)

    @staticmethod
    def _pytest_too_old(attempt: Attempt, runtime: Runtime) -> bool:
        """pytest of the commit's day could not be had, or did not run or collect on this Python,
        and is older than the oldest that does."""
        if attempt.reason == "pytest_unavailable" or attempt.step == "runner":
            return True  # the floor also brings what pytest needs as of the Python's day
        if attempt.step != "collect":
            return False
        installed = _INSTALLED_PYTEST.search(attempt.output)
        floor = PYTEST_FLOOR.get(runtime.version)
        return bool(installed and floor and release_tuple(installed.group(1)) < release_tuple(floor[0]))

    def _pin_for(self, build: "_Build", runtime: Runtime, output: str) -> Optional[tuple[str, str]]:
        """(distribution, requirement) holding back the installed package the tests failed to import from."""
        found = _BROKEN_IMPORT.search(output)
        if not found:
            return None
        owner = self._distribution_of(build, runtime, (found.group(1) or found.group(2)).split(".")[0])
        release = re.match(r"\d+(\.\d+)?", owner[1]) if owner else None
        if not release:
            return None
        return owner[0].lower(), f"{owner[0]}<{release.group(0)}"

    def _distribution_of(self, build: "_Build", runtime: Runtime, module: str) -> Optional[tuple[str, str]]:
        """(name, version) of the installed distribution that provides a top-level module, the name
        canonical; None for the repository's own code, the standard library, or what cannot be read."""
        if module in build.own:
            return None
        owner = self._sandbox(runtime).run([f"{ENV}/bin/python", "-c", _DISTRIBUTION_OF, module],
                                           workdir=build.workdir, mount_at=WORKSPACE, limits=self.limits)
        fields = owner.output.decode("utf-8", "replace").split()
        if not owner.ok or len(fields) != 2 or not re.fullmatch(r"[A-Za-z0-9._-]+", fields[0]):
            return None
        return canonicalize_name(fields[0]), fields[1]

    def _attempt(self, build: "_Build", runtime: Runtime, strategy: Strategy, adjust: "_Adjustments",
                 optional: Sequence[tuple[str, str]] = ()) -> Attempt:
        workdir, probe = build.workdir, build.probe
        shutil.rmtree(workdir / "env", ignore_errors=True)
        # Python 2: no cutoffs, as pip has none
        cutoffs, pytest = (Cutoffs(build.as_of, {}, ()), PYTEST_PYTHON2) if runtime.python2 else self._cutoffs(
            build, runtime, adjust)
        pins, floor = adjust.pins, adjust.floor
        optional = [*adjust.optional, *optional]
        added = [requirement for requirement, _why in optional]
        run = _AttemptRun(self, workdir, runtime, " ".join(
            [runtime.interpreter, strategy.name, *pins.values(), *(f"{package} (later)" for package in adjust.aged),
             *([pytest] if floor else []), *added]))
        run.added = [{"requirement": requirement, "why": why} for requirement, why in optional]
        run.on_path = strategy.working_copy_on_path
        run.as_of = "" if runtime.python2 else cutoffs.as_of.isoformat()
        if not run.step("venv", _venv_argv(runtime)):
            return run.end("no_python")
        if runtime.python2:
            pytest_note = f"{pytest} (the newest that runs on Python 2; no date cutoff on Python 2)"
            if not self._install_python2(run, strategy, added):
                return run.end(_python2_install_failure_reason(run.last_output), cutoffs.recorded(), pytest_note)
        else:
            override = _ours_file(workdir, PYTEST_OVERRIDE, f"{pytest}\n")
            installed = self._install(run, [*strategy.install_args, pytest, *pins.values(), *added,
                                            *(("--override", override) if override else ())], cutoffs)
            why = f"the oldest that runs on Python {runtime.version}" if floor else "as of the commit"
            pytest_note = f"{pytest} ({why})"
            if not installed:
                return run.end(install_failure_reason(run.last_output, cutoffs), cutoffs.recorded(), pytest_note)
        after_install = working_copy_files(workdir / "repo")
        run.generated = tuple(sorted(after_install - build.before))[:GENERATED_FILES]
        if strategy.working_copy_on_path and not run.step(
                "path", [f"{ENV}/bin/python", "-c", _SITE_FILE_WRITE, WORKING_COPY_PTH, working_copy_pth_line(REPO)],
                network=False):
            return run.end("install_failed", cutoffs.recorded(), pytest_note)
        legacy = legacy_config_options(workdir)
        if not run.step("runner", [*_pytest_argv(legacy), "--version"], network=False):
            return run.end("no_test_runner", cutoffs.recorded(), pytest_note)
        if not run.step("collect", _collect_argv(probe, legacy), network=False, required=False):
            nothing = _NO_TESTS.search(run.last_output) and "error" not in run.last_output.lower()
            folders = nose_era_test_folders(workdir / "repo") if nothing and not probe else []
            if folders and run.step("collect", _collect_argv(_nose_era_args(folders), legacy), network=False,
                                    required=False):
                run.suite_args = _nose_era_args(folders)
            elif not (nothing and skipped_count(run.last_output)):  # all skipped at collection is not none there
                run.status, run.failed_step = run.last_status, "collect"
                return run.end("no_tests_collected" if nothing else "tests_do_not_collect", cutoffs.recorded(),
                               pytest_note)
        if probe:  # what the commit's own tests skip; that they fail or pass here decides nothing
            run.step("probe", [*_pytest_argv(legacy), "-q", "-rs", "-p", "no:cacheprovider", *probe],
                     required=False, limits=replace(self.limits, wall_seconds=PROBE_SECONDS, cpu_seconds=PROBE_SECONDS))
        build.before |= working_copy_files(workdir / "repo") - after_install  # the tests wrote these, not the install
        return run.end("", cutoffs.recorded(), pytest_note)

    def _cutoffs(self, build: "_Build", runtime: Runtime, adjust: "_Adjustments") -> tuple[Cutoffs, str]:
        """The cutoffs an attempt installs under, and the pytest it asks for: the commit's date (rounded
        up) for what the code runs with; the later of that and the Python's release for what the build
        needs; with the oldest pytest that runs on the Python (`floor`), what pytest needs as of the
        later of its series' end and the Python's release, to the end of that day (an older `py` or
        `pluggy` may not import on that Python), and so do the pytest plugins the repository names."""
        as_of = build.as_of
        packages = tuple(build_packages(build.recipe))
        released = PYTHON_RELEASES.get(runtime.version)
        build_from = max(as_of, datetime.combine(released, as_of.timetz())) if released else as_of
        resolved_as_of = date_rounded_up(as_of, self.round_days)
        cutoffs = Cutoffs(resolved_as_of, {package: build_from for package in packages}
                          if build_from > resolved_as_of else {}, packages)
        for package, steps in adjust.aged.items():
            for _ in range(steps):
                cutoffs.lift([package])
        if not adjust.floor:
            return cutoffs, PYTEST_OF_THE_DAY
        version, until = PYTEST_FLOOR.get(runtime.version, ("8.0.0", None))
        series = datetime.combine(max(until, released or until), time(23, 59, 59), as_of.tzinfo) if until else None
        for package in (*PYTEST_NEEDS, *pytest_plugins(build.recipe)):
            current = cutoffs.lifted.get(package, resolved_as_of)
            if current is not None and (series is None or series > current):
                cutoffs.lifted[package] = series
        return cutoffs, f"pytest~={version}"

    def _install(self, run: "_AttemptRun", requirements: list[str], cutoffs: Cutoffs) -> bool:
        """`uv pip install` as of the cutoffs, lifting a cutoff a step for each package it held back
        or that did not build, until the install works or nothing more can be lifted."""
        for _ in range(MAX_LIFTS):
            # Compiled here once, read-only after: with -B a run could never keep what it compiles, and
            # compiling pytest and the packages at every run was half of a small suite's run time.
            argv = [UV, "pip", "install", "--compile-bytecode", "--python", f"{ENV}/bin/python", *cutoffs.args(),
                    *requirements]
            if run.step("install", argv, network=True, required=False):
                return True
            held = lifts_wanted(run.last_output, cutoffs.build)
            if "pytest" in held and "pytest" not in cutoffs.lifted:
                run.pytest_unavailable = True
                break
            if not held or not cutoffs.lift(held):
                break
        run.status, run.failed_step = run.last_status, "install"
        return False

    def _install_python2(self, run: "_AttemptRun", strategy: Strategy, added: Sequence[str]) -> bool:
        """pip into a Python 2 virtualenv: what builds old packages first (the virtualenv has none),
        then the strategy's requirements with the pytest the report plugin runs with there (any the
        repository names gives way to it); pip's editable install is setuptools' develop."""
        wanted = [arg for arg in strategy.install_args if not _names_pytest(arg)]
        if run.step("install", [*PIP_INSTALL, *PYTHON2_SEED], network=True, required=False) and run.step(
                "install", [*PIP_INSTALL, *wanted, PYTEST_PYTHON2, *added], network=True, required=False):
            return True
        run.status, run.failed_step = run.last_status, "install"
        return False

    def _keep(self, workdir: Path, runtime: Runtime, attempts: list[Attempt], recipe: dict[str, str]) -> BuiltEnvironment:
        sandbox = self._sandbox(runtime)
        freeze_argv = ([f"{ENV}/bin/python", "-m", "pip", "freeze", "--all", "--disable-pip-version-check"]
                       if runtime.python2 else [UV, "pip", "freeze", "--python", f"{ENV}/bin/python"])
        freeze = sandbox.run(freeze_argv, workdir=workdir,
                             mount_at=WORKSPACE, limits=self.limits, env=self._env())
        version = sandbox.run([f"{ENV}/bin/python", "-c", "import platform; print(platform.python_version())"],
                              workdir=workdir, mount_at=WORKSPACE, limits=self.limits)
        built = workdir / "env"
        # The build ran the repository's code: what it left must be a plain folder, not a link elsewhere,
        # and what its Python says must be a version (a .pth file it installed may print before it).
        said = (version.output.decode("utf-8", "replace").strip().splitlines() or [""])[-1].strip()
        if not (freeze.ok and version.ok) or built.is_symlink() or not built.is_dir() or \
                not PYTHON_VERSION.fullmatch(said):
            raise EnvironmentFailed([*attempts, Attempt("keep", [], "failed", "keep",
                                                        "the environment could not be read back after the build", 0,
                                                        reason="install_failed")])
        lock = "\n".join(line for line in freeze.output.decode().splitlines() if _PINNED.match(line)) + "\n"
        python_version = said
        kept = next(attempt for attempt in reversed(attempts) if attempt.status == "ok")
        generated = list(kept.generated)
        # Environments are never shared across namespaces (repositories): a build is the repository's code.
        key = hashlib.sha256(
            f"{self.backend}\n{self.namespace}\n{runtime.image}\n{python_version}\n{lock}\n{generated}".encode()
        ).hexdigest()[:16]
        target = self.env_root / key
        if not target.exists():
            self.env_root.mkdir(parents=True, exist_ok=True)
            # Laid out beside the target, then renamed into place: another worker building the same
            # environment at the same time finds either none or a whole one, the files before the environment.
            staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=self.env_root))
            try:
                generated_files_keep(workdir / "repo", generated, staging / "files")
                environment_seal(built)
                shutil.move(built, staging / "env")
                rename_unless_there(staging / "files", environment_files(target))
                rename_unless_there(staging / "env", target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return BuiltEnvironment(path=target, key=key, python_version=python_version, lock=lock, attempts=attempts,
                                recipe_key=recipe_key(recipe), image=runtime.image, generated=generated,
                                suite_args=kept.suite_args)

    def rebuilt(self, workdir: Path, environment: EnvironmentToRelease, files: Path,
                setup_archive: Optional[Path]) -> BuiltEnvironment:
        """An environment a release holds (`files`: its folder there), made again here as its Dockerfile
        makes it: a virtualenv of its Python, the lock installed as of its dates, the project installed
        on its setup commit's tree (`setup_archive`); every step in this builder's sandbox, reaching the
        index alone. EnvironmentFailed with the attempt when a step fails."""
        runtime = next((runtime for runtime in self.runtimes if runtime.version == environment.python), None)
        if runtime is None:
            raise EnvironmentFailed([Attempt("release", [], "failed", "venv", f"no Python {environment.python} here",
                                             0, reason="no_python")])
        shutil.copytree(files, workdir / "release")
        if setup_archive is not None:
            archive_unpacked(setup_archive, workdir)
        else:
            (workdir / "repo").mkdir(parents=True)
        run = _AttemptRun(self, workdir, runtime, f"{runtime.interpreter} release {environment.key}")
        run.as_of = environment.as_of
        inside = f"{WORKSPACE}/release"
        steps = [("venv", _venv_argv(runtime), False),
                 *(("install", argv, True) for argv in lock_install_argv(environment, uv=UV, files=inside)),
                 *(("install", argv, True) for argv in project_install_argv(environment, uv=UV, files=inside))]
        for step, argv, network in steps:
            if not run.step(step, argv, network=network):
                raise EnvironmentFailed([run.end("install_failed")])
        run.generated = tuple(path for path in environment.generated if (workdir / "repo" / path).exists())
        return self._keep(workdir, runtime, [run.end("")], recipe={})

    def reuse_check(self, environment: BuiltEnvironment, workdir: Path, probe: Sequence[str] = ()) -> Attempt:
        """Does an environment built for another commit install this one? (Its tests collect, in a copy
        of the working copy of their own, with the environment's generated files laid in.)"""
        check = Path(tempfile.mkdtemp(prefix="reuse-", dir=workdir.parent))
        try:
            working_copy_clone(workdir / "repo", check / "repo")
            environment_files_lay(environment.path, check / "repo")
            argv = _collect_argv(probe or environment.suite_args, legacy_config_options(check))
            result = self.environment_sandbox(environment).run(
                argv, workdir=check, mount_at=WORKSPACE, cwd=REPO, limits=self.limits)
        finally:
            shutil.rmtree(check, ignore_errors=True)
        return Attempt("reuse", [" ".join(argv)], result.status, "" if result.ok else "collect",
                       result.output.decode("utf-8", "replace"), result.seconds,
                       reason="" if result.ok else "tests_do_not_collect")


@dataclass
class _Build:
    """One commit's search: its working copy (`<workdir>/repo`), date, install recipe, the test files
    probed for skips, and the files of the working copy not written by an install (the tests' own
    writes join them as attempts run)."""

    workdir: Path
    as_of: datetime
    recipe: dict[str, str]
    probe: tuple[str, ...]
    before: set[str]
    files: frozenset[str]  # the working copy's files as written, before anything ran
    parsed: dict[tuple[str, ...], bool] = field(default_factory=dict)  # files -> only Python 2 parses them

    @property
    def own(self) -> frozenset[str]:
        """The top-level modules and packages of the working copy (at its root or in src/)."""
        return own_top_level_modules(self.files)


@dataclass
class _Adjustments:
    """What the attempts of one strategy change of its install, as their failures ask."""

    floor: bool = False  # the oldest pytest that runs on the Python, rather than the commit's day's
    pins: dict[str, str] = field(default_factory=dict)  # distribution -> a requirement added or holding it back
    aged: dict[str, int] = field(default_factory=dict)  # distribution -> steps its cutoff is lifted (too old)
    # (requirement, why) for what the tests did not collect for want of
    optional: list[tuple[str, str]] = field(default_factory=list)


def test_modules_present(files: frozenset[str]) -> bool:
    """Whether a working copy's files (working_copy_files, as written) hold a module any runner would
    take for tests (test*.py, *_test.py, tests.py, or a module in a test folder); True where the copy
    could not be listed (too many files to look at)."""
    return not files or any(
        Path(path).suffix == ".py" and Path(path).name != "__init__.py" and (
            Path(path).name.startswith("test") or Path(path).name.endswith("_test.py")
            or {"test", "tests"} & set(Path(path).parts[:-1])) for path in files)


def nose_era_test_folders(repo: Path) -> list[str]:
    """Test folders (tests/, test/, at the top or one package down) holding modules pytest's default
    names (test_*.py, *_test.py) miss, and test modules named tests.py or test.py there, as nose and
    unittest discovery found them; from the working copy's plain files, no link followed."""
    tests = set()
    for path in working_copy_files(repo):
        parts = Path(path).parts
        if len(parts) <= 2 and parts[-1] in ("test.py", "tests.py"):
            tests.add(path)
        for depth in (1, 2):
            if len(parts) == depth + 1 and parts[depth - 1] in ("test", "tests") and parts[-1].endswith(".py") \
                    and parts[-1] != "__init__.py":
                tests.add(str(Path(*parts[:depth])))
    return sorted(tests)[:10]


def _venv_argv(runtime: Runtime) -> list[str]:
    if runtime.python2:  # Debian's virtualenv, seeding pip from the image's own wheels (no network)
        return ["python3", "-m", "virtualenv", "--quiet", "--no-setuptools", "--no-wheel", "--no-periodic-update",
                "--app-data", f"{WORKSPACE}/.virtualenv", "--python", runtime.interpreter, ENV]
    return [UV, "venv", "--quiet", "--python", runtime.interpreter, ENV]


def _extras_installed(strategy: Strategy) -> list[str]:
    """The extras of the package a strategy installs ("-e /workspace/repo[test,dev]": test and dev)."""
    found = [re.fullmatch(rf"{re.escape(REPO)}\[([^\]]*)\]", arg) for arg in strategy.install_args]
    return [extra.strip() for match in found if match for extra in match.group(1).split(",")]


def _names_pytest(arg: str) -> bool:
    try:
        return canonicalize_name(Requirement(arg).name) == "pytest"
    except InvalidRequirement:
        return False


def _python2_install_failure_reason(output: str) -> str:
    if _PIP_UNAVAILABLE.search(output):
        return "dependencies_unavailable"
    return "build_failed" if "Command errored out" in output or "Failed building" in output else "install_failed"


def _nose_era_args(folders: list[str]) -> tuple[str, ...]:
    return ("-o", "python_files=*.py", *folders)


def _ours_file(workdir: Path, name: str, text: str) -> str:
    """Write a file of ours beside the working copy, replacing what a sandbox left under its name (a
    link is removed, never followed); where the sandbox sees it, or "" if it could not be written."""
    try:
        os.unlink(workdir / name)
    except FileNotFoundError:
        pass
    except OSError:
        return ""
    return f"{WORKSPACE}/{name}" if sandbox_file_create(workdir, name, text.encode("utf-8")) else ""


def legacy_config_options(workdir: Path) -> list[str]:
    """A setup.cfg `[pytest]` section, which pytest read until 4.0, given to pytest from a file of
    ours beside the working copy, as runs do (report_plugin.legacy_pytest_ini)."""
    def read(name: str) -> Optional[str]:  # the working copy was shaped in a sandbox: no link followed
        with sandbox_file_open(workdir / "repo", name) as file:
            return file.read(1 << 20).decode("utf-8", "replace") if file is not None else None

    text = legacy_pytest_ini(read, REPO)
    ini = _ours_file(workdir, LEGACY_INI, text) if text is not None else ""
    return ["-c", ini, "--rootdir", REPO] if ini else []


def _pytest_argv(legacy: Sequence[str] = ()) -> list[str]:
    return [f"{ENV}/bin/python", "-m", "pytest", *legacy]


def _collect_argv(probe: Sequence[str], legacy: Sequence[str] = ()) -> list[str]:
    """pytest collecting the commit's own test files where they are known (a nose-era `tests.py` is
    collected when named, not by pytest's default patterns), else the whole suite."""
    return [*_pytest_argv(legacy), "--collect-only", "-q", "-rs", "-p", "no:cacheprovider", *probe]


class _AttemptRun:
    """The steps of one attempt, run in order in the attempt's sandbox, with what each printed."""

    def __init__(self, builder: EnvironmentBuilder, workdir: Path, runtime: Runtime, name: str):
        self.builder, self.workdir, self.name = builder, workdir, name
        self.sandbox = builder._sandbox(runtime)
        self.commands: list[str] = []
        self.outputs: list[str] = []
        self.seconds = 0.0
        self.status: RunStatus = "ok"
        self.failed_step: AttemptStep = ""
        self.last_output = ""
        self.last_status: RunStatus = "ok"
        self.pytest_unavailable = False
        self.added: list[dict[str, str]] = []
        self.on_path = False
        self.generated: tuple[str, ...] = ()
        self.suite_args: tuple[str, ...] = ()
        self.as_of = ""

    def step(self, step: AttemptStep, argv: list[str], *, network: bool = False, required: bool = True,
             limits: Optional[Limits] = None) -> bool:
        self.commands.append(" ".join(argv))
        result = self.sandbox.run(argv, workdir=self.workdir, mount_at=WORKSPACE, cwd=REPO, network=network,
                                  limits=limits or self.builder.limits, env=self.builder._env())
        self.seconds += result.seconds
        self.last_output, self.last_status = result.output.decode("utf-8", "replace"), result.status
        self.outputs.append(f"$ {self.commands[-1]}\n{self.last_output}")
        if not result.ok and required:
            self.status, self.failed_step = result.status, step
        return result.ok

    def end(self, reason: str, lifted: Optional[dict] = None, pytest: str = "") -> Attempt:
        if self.pytest_unavailable:
            reason = "pytest_unavailable"
        ok = self.failed_step == ""
        return Attempt(self.name, self.commands, "ok" if ok else self.status, self.failed_step,
                       "\n".join(self.outputs), self.seconds, reason="" if ok else reason, lifted=dict(lifted or {}),
                       as_of=self.as_of, pytest=pytest, added=self.added, on_path=self.on_path, generated=self.generated,
                       suite_args=self.suite_args, said=self.last_output)


def rename_unless_there(source: Path, target: Path) -> None:
    """Rename a finished folder into place; where another build put one there first, that one stays."""
    try:
        os.rename(source, target)
    except OSError as error:
        if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
