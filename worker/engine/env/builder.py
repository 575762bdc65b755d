"""Build the environment a repository had at a commit, in a sandbox of either backend.

The repository's own files say how it installs (recipes.py); versions resolve as of the
commit's date with uv's --exclude-newer, pytest included. Each Python (runtimes.py) and,
with each, each strategy is tried in order until the package installs and pytest collects
the tests. Every attempt is recorded.
"""

import hashlib
import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Literal, Optional, Sequence

from worker.engine.env.recipes import (
    ENV,
    REPO,
    UV,
    WORKSPACE,
    Strategy,
    install_recipe,
    install_strategies,
    recipe_key,
)
from worker.engine.env.runtimes import Runtime, local_runtimes, python_order
from worker.engine.sandbox.base import Limits, RunStatus, Sandbox
from worker.engine.sandbox.local import LocalSandbox

_PINNED = re.compile(r"[A-Za-z0-9._-]+(\[[^\]]*\])?(==| @ )")  # a frozen requirement, not the editable project
MAX_PINS = 3  # attempts holding packages back, per strategy, before it counts as failed
# What an import of something a later release removed says (ImportError, or AttributeError on a module).
_BROKEN_IMPORT = re.compile(r"cannot import name '[^']+' from '([\w.]+)'|module '([\w.]+)' has no attribute")
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


class EnvironmentFailed(Exception):
    def __init__(self, attempts: list["Attempt"]):
        super().__init__(f"no install strategy worked ({len(attempts)} tried)")
        self.attempts = attempts


# The step that ended an attempt ("" when all passed): making the virtualenv, installing, collecting
# the tests, reading the environment back, or checking that an earlier environment fits.
AttemptStep = Literal["venv", "install", "collect", "keep", ""]


@dataclass(frozen=True)
class Attempt:
    strategy: str
    commands: list[str]
    status: RunStatus  # "ok", or the failing step's sandbox status
    step: AttemptStep
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
    image: str = ""  # the docker image its Python lives in ("" for the local backend)


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

    def sandbox(self, read_only: Sequence = (), *, image: str = "") -> Sandbox:
        """A sandbox of this builder's backend with `read_only` mounted; for docker, in `image`
        (an environment's), else the first runtime's."""
        image = image or (self.runtimes[0].image if self.runtimes else "")
        return self.sandbox_factory(read_only=list(read_only), **({"image": image} if image else {}))

    def runs(self, environment: BuiltEnvironment) -> bool:
        """Whether this builder's sandboxes can run `environment` (its Python is one of the runtimes)."""
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

    def build(self, workdir: Path, *, as_of: datetime) -> BuiltEnvironment:
        """Try each Python and, with each, each strategy in a fresh virtualenv until one installs
        and collects."""
        recipe = install_recipe(workdir / "repo")
        attempts = []
        if not self.runtimes:
            raise EnvironmentFailed([Attempt("python", [], "failed", "venv", f"No Python is available to the "
                                             f"{self.backend} sandbox (docker: no base image is present; "
                                             f"manage.py build_base_images builds them).", 0.0)])
        for runtime in python_order(self.runtimes, recipe, as_of):
            for strategy in install_strategies(recipe):
                attempts += self._attempts_pinning(workdir, runtime, strategy, as_of)
                if attempts[-1].status == "ok":
                    return self._keep(workdir, runtime, attempts, recipe)
                if attempts[-1].step == "venv":
                    break  # this Python is not there: no strategy can work with it
        raise EnvironmentFailed(attempts)

    def _attempts_pinning(self, workdir: Path, runtime: Runtime, strategy: Strategy, as_of: datetime) -> list:
        """One strategy; while the tests fail to import from a dependency, again with that dependency
        held below the release line it came in (a package that broke later than the code was written)."""
        pins: dict[str, str] = {}
        attempts = [self._attempt(workdir, runtime, strategy, as_of, pins)]
        for _ in range(MAX_PINS):
            if attempts[-1].step != "collect":
                break
            pin = self._pin_for(workdir, runtime, attempts[-1].output)
            if pin is None or pins.get(pin[0]) == pin[1]:
                break
            pins[pin[0]] = pin[1]
            attempts.append(self._attempt(workdir, runtime, strategy, as_of, pins))
        return attempts

    def _pin_for(self, workdir: Path, runtime: Runtime, output: str) -> Optional[tuple[str, str]]:
        """(distribution, requirement) holding back the installed package the tests failed to import from."""
        found = _BROKEN_IMPORT.search(output)
        if not found:
            return None
        module = (found.group(1) or found.group(2)).split(".")[0]
        repo = workdir / "repo"
        if any(path.exists() for path in (repo / module, repo / f"{module}.py", repo / "src" / module)):
            return None  # the repository's own code
        owner = self._sandbox(runtime).run([f"{ENV}/bin/python", "-c", _DISTRIBUTION_OF, module], workdir=workdir,
                                           mount_at=WORKSPACE, limits=self.limits)
        fields = owner.output.decode("utf-8", "replace").split()
        if not owner.ok or len(fields) != 2 or not re.fullmatch(r"[A-Za-z0-9._-]+", fields[0]):
            return None
        release = re.match(r"\d+(\.\d+)?", fields[1])
        if not release:
            return None
        return fields[0].lower(), f"{fields[0]}<{release.group(0)}"

    def _attempt(self, workdir: Path, runtime: Runtime, strategy: Strategy, as_of: datetime,
                 pins: dict[str, str]) -> Attempt:
        shutil.rmtree(workdir / "env", ignore_errors=True)
        steps = [
            ("venv", [UV, "venv", "--quiet", "--python", runtime.interpreter, ENV], False),
            ("install", [UV, "pip", "install", "--python", f"{ENV}/bin/python",
                         "--exclude-newer", as_of.isoformat(), *strategy.install_args, "pytest", *pins.values()],
             True),
            ("collect", [f"{ENV}/bin/python", "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
             False),
        ]
        outputs, seconds, commands = [], 0.0, []
        sandbox = self._sandbox(runtime)
        name = " ".join([runtime.interpreter, strategy.name, *pins.values()])
        for step, argv, network in steps:
            commands.append(" ".join(argv))
            result = sandbox.run(argv, workdir=workdir, mount_at=WORKSPACE, cwd=REPO, network=network,
                                 limits=self.limits, env=self._env())
            seconds += result.seconds
            outputs.append(f"$ {commands[-1]}\n{result.output.decode('utf-8', 'replace')}")
            if not result.ok:
                return Attempt(name, commands, result.status, step, "\n".join(outputs), seconds)
        return Attempt(name, commands, "ok", "", "\n".join(outputs), seconds)

    def _keep(self, workdir: Path, runtime: Runtime, attempts: list[Attempt],
              recipe: dict[str, str]) -> BuiltEnvironment:
        sandbox = self._sandbox(runtime)
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
            f"{self.backend}\n{self.namespace}\n{runtime.image}\n{python_version}\n{lock}".encode()).hexdigest()[:16]
        target = self.env_root / key
        if not target.exists():
            self.env_root.mkdir(parents=True, exist_ok=True)
            environment_seal(built)
            shutil.move(built, target)
        return BuiltEnvironment(path=target, key=key, python_version=python_version, lock=lock, attempts=attempts,
                                recipe_key=recipe_key(recipe), image=runtime.image)

    def reuse_check(self, environment: BuiltEnvironment, workdir: Path) -> Attempt:
        """Does an environment built for another commit install this one? (Its tests collect.)"""
        argv = [f"{ENV}/bin/python", "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        result = self.sandbox([(environment.path, ENV)], image=environment.image).run(
            argv, workdir=workdir, mount_at=WORKSPACE, cwd=REPO, limits=self.limits)
        return Attempt("reuse", [" ".join(argv)], result.status, "" if result.ok else "collect",
                       result.output.decode("utf-8", "replace"), result.seconds)


def environment_seal(path: Path) -> None:
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
