"""An environment the builder made, rebuilt by `docker build` alone from the files a release holds
for it (worker/engine/env/rebuild.py), and what the rebuilt one has installed."""

import shutil
import subprocess
import tarfile
import uuid
from importlib.metadata import version
from pathlib import Path

from worker.engine.env.builder import BuiltEnvironment
from worker.engine.env.rebuild import ENVIRONMENTS, EXTRA_CA, EnvironmentToRelease, environment_folder_write

HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def rebuilt_freeze(built: BuiltEnvironment, repo: Path, folder: Path, *, base: str) -> str:
    """`pip freeze --all` (Python 2) or `uv pip freeze` in the environment stage built from a release
    folder made of `built` and its setup tree `repo`."""
    (folder / "sources").mkdir(parents=True)
    with tarfile.open(folder / "sources" / "setup.tar.gz", "w:gz") as tar:
        tar.add(repo, arcname="o__r")
    kept = next(attempt for attempt in reversed(built.attempts) if attempt.status == "ok")
    environment = EnvironmentToRelease(
        key=built.key, python_version=built.python_version, lock=built.lock, strategy=kept.strategy,
        setup_archive="sources/setup.tar.gz", tasks=(), tool_version=version("uv"), as_of=kept.as_of,
        lifted=kept.lifted, generated=tuple(built.generated), image=built.image)
    environment_folder_write(folder, environment, "rebuild-check")
    shutil.copy(HOST_CA, folder / EXTRA_CA) if HOST_CA.is_file() else (folder / EXTRA_CA).write_text("")
    tag = f"commitgym-rebuild-check:{uuid.uuid4().hex[:8]}"
    try:
        build = subprocess.run(["docker", "build", "--network", "host", "-q", "-f",
                                f"{ENVIRONMENTS}/{built.key}/Dockerfile", "--build-arg", f"BASE={base}", "--target",
                                "environment", "-t", tag, "."], cwd=folder, capture_output=True, text=True,
                               timeout=900)
        assert build.returncode == 0, build.stdout + build.stderr
        freeze = (["/workspace/env/bin/python", "-m", "pip", "freeze", "--all", "--disable-pip-version-check"]
                  if environment.python2 else ["uv", "pip", "freeze", "--python", "/workspace/env/bin/python"])
        done = subprocess.run(["docker", "run", "--rm", "--network", "none", tag, *freeze], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
