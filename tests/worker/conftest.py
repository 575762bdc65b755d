import shutil
import tempfile
from pathlib import Path

import pytest


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
