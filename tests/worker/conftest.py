import shutil
import tempfile
from pathlib import Path

import pytest

from worker.engine.env.builder import EnvironmentBuilder
from worker.engine.env.runtimes import default_images, docker_runtimes
from worker.engine.sandbox.docker import DockerSandbox

UV_ON_HOST = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "uv"


def _open_folder(prefix: str) -> Path:
    """A temporary folder the sandbox users can walk into (pytest's own are private to root)."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    base.chmod(0o755)
    return base


@pytest.fixture
def open_folder():
    base = _open_folder("commitgym-test-")
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def open_module_folder():
    base = _open_folder("commitgym-test-module-")
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def workdir(open_folder) -> Path:
    """A sandbox run's working folder, inside an open folder."""
    work = open_folder / "work"
    work.mkdir()
    return work


@pytest.fixture(scope="session")
def docker_builder_make():
    """Makes an environment builder of the docker backend over the base images' Pythons (the tests
    fail where no engine answers: make test starts one)."""
    def make(env_root: Path, **settings) -> EnvironmentBuilder:
        if not DockerSandbox.available():
            pytest.fail("no Docker engine answers: make test starts one (deploy/dev/docker.sh)")
        settings.setdefault("runtimes", docker_runtimes(default_images()))
        return EnvironmentBuilder(env_root=env_root, uv=UV_ON_HOST, sandbox_factory=DockerSandbox, backend="docker",
                                  **settings)
    return make
