"""Build the environment a repository had at a commit, in the sandbox (local backend).

The repository's own files say how it installs (pyproject.toml, setup.cfg, setup.py,
requirements files); versions resolve as of the commit's date with uv's
--exclude-newer, pytest included. Strategies are tried in order until the package
installs and pytest collects the tests. Every attempt is recorded.

Inside the sandbox the working copy is always at /workspace/repo and the
virtualenv at /workspace/env: editable installs point there, so an environment
built for one commit can serve another with the same dependencies.
"""

import configparser
import hashlib
import os
import re
import shutil
import stat
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional, Sequence

from worker.engine.sandbox import Limits, LocalSandbox, sandbox_file_read

WORKSPACE = "/workspace"
REPO = f"{WORKSPACE}/repo"
ENV = f"{WORKSPACE}/env"
UV = "/opt/commitgym/uv"
TEST_EXTRAS = ("test", "tests", "testing", "dev")
_INSTALL_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "Pipfile")
_PINNED = re.compile(r"[A-Za-z0-9._-]+(\[[^\]]*\])?(==| @ )")  # a frozen requirement, not the editable project


class EnvironmentFailed(Exception):
    def __init__(self, attempts: list["Attempt"]):
        super().__init__(f"no install strategy worked ({len(attempts)} tried)")
        self.attempts = attempts


@dataclass(frozen=True)
class Strategy:
    name: str
    install_args: tuple[str, ...]  # given to `uv pip install`, pytest is added


@dataclass(frozen=True)
class Attempt:
    strategy: str
    commands: list[str]
    status: str  # "ok", or the failing step's sandbox status ("failed", "timeout", ...)
    step: str  # the step that ended the attempt: "venv", "install", "collect", or "" when all passed
    output: str
    seconds: float


@dataclass(frozen=True)
class BuiltEnvironment:
    path: Path  # the virtualenv on this machine, mounted at /workspace/env
    key: str  # Python version + resolved lock: environments with the same key are the same
    python_version: str
    lock: str  # `uv pip freeze`
    attempts: list[Attempt] = field(default_factory=list)
    recipe_key: str = ""  # the install files it was built from


def install_recipe(repo_dir: Path) -> dict[str, str]:
    """The files that say how the repository installs, by path."""
    paths = [repo_dir / name for name in _INSTALL_FILES]
    paths += sorted(repo_dir.glob("requirements*.txt")) + sorted(repo_dir.glob("requirements/*.txt"))
    found = {str(path.relative_to(repo_dir)): sandbox_file_read(path, max_bytes=1 << 20) for path in paths}
    return {name: data.decode("utf-8", "replace") for name, data in found.items() if data}


def recipe_key(recipe: dict[str, str]) -> str:
    """Commits whose install files are the same install the same way."""
    digest = hashlib.sha256()
    for path in sorted(recipe):
        digest.update(path.encode() + b"\0" + recipe[path].encode() + b"\0")
    return digest.hexdigest()[:16]


def _declared_extras(recipe: dict[str, str]) -> list[str]:
    extras: set[str] = set()
    if "pyproject.toml" in recipe:
        try:
            project = tomllib.loads(recipe["pyproject.toml"]).get("project", {})
            extras |= set(project.get("optional-dependencies", {}))
        except tomllib.TOMLDecodeError:
            pass
    if "setup.cfg" in recipe:
        parser = configparser.ConfigParser()
        try:
            parser.read_string(recipe["setup.cfg"])
            extras |= set(parser["options.extras_require"]) if parser.has_section("options.extras_require") else set()
        except configparser.Error:
            pass
    if "setup.py" in recipe:
        extras |= set(re.findall(r"""['"](\w+)['"]\s*:\s*\[""", recipe["setup.py"]))
    return [extra for extra in TEST_EXTRAS if extra in extras]


def install_strategies(recipe: dict[str, str]) -> list[Strategy]:
    """What to try, most specific first."""
    installable = any(name in recipe for name in ("pyproject.toml", "setup.py", "setup.cfg"))
    requirements = [path for path in recipe if path.endswith(".txt")]
    test_requirements = [path for path in requirements if re.search(r"test|dev", path)]
    strategies = []
    if installable:
        strategies += [Strategy(f"editable[{extra}]", ("-e", f"{REPO}[{extra}]")) for extra in _declared_extras(recipe)]
    reqs = tuple(arg for path in (test_requirements or requirements) for arg in ("-r", f"{REPO}/{path}"))
    if installable and reqs:
        strategies.append(Strategy("editable+requirements", ("-e", REPO, *reqs)))
    if installable:
        strategies.append(Strategy("editable", ("-e", REPO)))
    if reqs:
        strategies.append(Strategy("requirements", reqs))
    if not strategies:
        strategies.append(Strategy("tests-only", ()))
    return strategies


@dataclass
class EnvironmentBuilder:
    """Builds virtualenvs for working copies laid out as `<workdir>/repo`."""

    env_root: Path  # where finished environments live, one folder per key
    uv: Path  # the uv executable on this machine
    namespace: str = ""  # environments are shared within a namespace only (one per repository)
    python: str = "/usr/bin/python3"  # the interpreter the sandbox user can run
    ca_bundle: Optional[Path] = None  # extra CA bundle for TLS-inspecting proxies
    limits: Limits = Limits(wall_seconds=900, cpu_seconds=900)
    # Makes the sandbox every step runs in: LocalSandbox, or a configured DockerSandbox.
    sandbox_factory: Callable[..., LocalSandbox] = LocalSandbox
    backend: str = "local"

    def sandbox(self, read_only: Sequence = ()):
        """A sandbox of this builder's backend with `read_only` mounted (and, for installs, uv)."""
        return self.sandbox_factory(read_only=list(read_only))

    def _sandbox(self, extra: tuple = ()):
        read_only = [(self.uv, UV), *extra]
        if self.ca_bundle:
            read_only.append((self.ca_bundle, "/opt/commitgym/ca.pem"))
        return self.sandbox(read_only)

    def _env(self) -> dict:
        env = {"UV_PYTHON_DOWNLOADS": "never", "UV_CACHE_DIR": f"{WORKSPACE}/.uv-cache", "UV_NO_PROGRESS": "1",
               # A working copy has no .git: setuptools-scm projects install with this version instead.
               "SETUPTOOLS_SCM_PRETEND_VERSION": "0.0.0"}
        if self.ca_bundle:
            env.update(SSL_CERT_FILE="/opt/commitgym/ca.pem", PIP_CERT="/opt/commitgym/ca.pem")
        else:
            env.update(SSL_CERT_FILE="/etc/ssl/certs/ca-certificates.crt")
        return env

    def build(self, workdir: Path, *, as_of: datetime) -> BuiltEnvironment:
        """Try each strategy in a fresh virtualenv until one installs and collects."""
        recipe = install_recipe(workdir / "repo")
        attempts = []
        for strategy in install_strategies(recipe):
            attempt = self._attempt(workdir, strategy, as_of)
            attempts.append(attempt)
            if attempt.status == "ok":
                return self._keep(workdir, attempts, recipe)
        raise EnvironmentFailed(attempts)

    def _attempt(self, workdir: Path, strategy: Strategy, as_of: datetime) -> Attempt:
        shutil.rmtree(workdir / "env", ignore_errors=True)
        steps = [
            ("venv", [UV, "venv", "--quiet", "--python", self.python, ENV], False),
            ("install", [UV, "pip", "install", "--python", f"{ENV}/bin/python",
                         "--exclude-newer", as_of.isoformat(), *strategy.install_args, "pytest"], True),
            ("collect", [f"{ENV}/bin/python", "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
             False),
        ]
        outputs, seconds, commands = [], 0.0, []
        sandbox = self._sandbox()
        for step, argv, network in steps:
            commands.append(" ".join(argv))
            result = sandbox.run(argv, workdir=workdir, mount_at=WORKSPACE, cwd=REPO, network=network,
                                 limits=self.limits, env=self._env())
            seconds += result.seconds
            outputs.append(f"$ {commands[-1]}\n{result.output.decode('utf-8', 'replace')}")
            if not result.ok:
                return Attempt(strategy.name, commands, result.status, step, "\n".join(outputs), seconds)
        return Attempt(strategy.name, commands, "ok", "", "\n".join(outputs), seconds)

    def _keep(self, workdir: Path, attempts: list[Attempt], recipe: dict[str, str]) -> BuiltEnvironment:
        sandbox = self._sandbox()
        freeze = sandbox.run([UV, "pip", "freeze", "--python", f"{ENV}/bin/python"], workdir=workdir,
                             mount_at=WORKSPACE, limits=self.limits, env=self._env())
        version = sandbox.run([f"{ENV}/bin/python", "-c", "import platform; print(platform.python_version())"],
                              workdir=workdir, mount_at=WORKSPACE, limits=self.limits)
        built = workdir / "env"
        # The build ran the repository's code: what it left must be a plain folder, not a link elsewhere.
        if not (freeze.ok and version.ok) or built.is_symlink() or not built.is_dir():
            raise EnvironmentFailed([*attempts, Attempt("keep", [], "failed", "keep",
                                                        "the environment could not be read back after the build", 0)])
        lock = "\n".join(line for line in freeze.output.decode().splitlines() if _PINNED.match(line)) + "\n"
        python_version = version.output.decode().strip()[:32]
        # Environments are never shared across namespaces (repositories): a build is the repository's code.
        key = hashlib.sha256(
            f"{self.backend}\n{self.namespace}\n{python_version}\n{lock}".encode()).hexdigest()[:16]
        target = self.env_root / key
        if not target.exists():
            self.env_root.mkdir(parents=True, exist_ok=True)
            _give_back(built)
            shutil.move(built, target)
        return BuiltEnvironment(path=target, key=key, python_version=python_version, lock=lock, attempts=attempts,
                                recipe_key=recipe_key(recipe))

    def reuse_check(self, environment: Path, workdir: Path) -> Attempt:
        """Does an environment built for another commit install this one? (Its tests collect.)"""
        argv = [f"{ENV}/bin/python", "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        result = self._sandbox(((environment, ENV),)).run(
            argv, workdir=workdir, mount_at=WORKSPACE, cwd=REPO, limits=self.limits)
        return Attempt("reuse", [" ".join(argv)], result.status, "" if result.ok else "collect",
                       result.output.decode("utf-8", "replace"), result.seconds)


def _give_back(path: Path) -> None:
    """A finished environment belongs to the worker, readable by every sandbox user, writable by none.
    A file hard-linked elsewhere (into a working copy, say) is replaced by a copy of its own."""
    for root, dirs, files in os.walk(path):  # `path` is a real folder: os.walk does not follow links below it
        for name in dirs + files:
            item = os.path.join(root, name)
            info = os.lstat(item)
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                shutil.copy2(item, item + ".copy", follow_symlinks=False)
                os.replace(item + ".copy", item)
            os.lchown(item, 0, 0)
            if not stat.S_ISLNK(info.st_mode):
                os.chmod(item, stat.S_IMODE(os.lstat(item).st_mode) & ~0o022)
    os.chown(path, 0, 0)
    path.chmod(0o755)
