"""A release's environments rebuilt by a stranger: the folder copied elsewhere, one environment and
one task image built with `docker build` alone (no commitgym process), the distributions inside the
same as the environment commitgym graded in, and the task's F2P tests run by the README's commands
failing without the gold patch and passing with it. Called by the release's end-to-end test."""

import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

from apps.datasets.models import Release
from apps.environments.models import Environment
from worker.engine.env.rebuild import release_lock
from worker.engine.release.writers import file_sha256

LOCAL_BASE = "commitgym-base:bookworm"  # no registry here: the Debian image of the same release, built locally
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def _buildkit_client() -> str:
    """A client that builds with BuildKit: one with buildx, else the client of Debian's docker.io (which
    deploy/dev/docker.sh installs; with DOCKER_BUILDKIT=1 it uses the engine's own BuildKit)."""
    if subprocess.run(["docker", "buildx", "version"], capture_output=True).returncode == 0:
        return "docker"
    return "/usr/bin/docker"


def release_rebuilt_by_hand(folder: Path, scratch: Path) -> None:
    copy = scratch / "by-hand"
    shutil.copytree(folder, copy)
    if HOST_CA.is_file():  # this machine's proxy inspects TLS: its CA goes where the README says
        shutil.copy(HOST_CA, copy / "extra-ca.crt")
    manifest = json.loads((copy / "manifest.json").read_text())
    environment = manifest["environments"][0]
    # Every distribution with the index's hashes of its files: the rebuild installs no other file.
    lines = (copy / environment["lock"]).read_text().splitlines()
    pinned = [number for number, line in enumerate(lines) if "==" in line]
    assert environment["lock_unhashed"] == [] and pinned
    assert all(lines[number + 1].strip().startswith("--hash=sha256:") for number in pinned), lines
    tag = f"commitgym-release-check-{uuid.uuid4().hex[:8]}"
    try:
        _environment_rebuilt(copy, environment, tag)
        _task_runs_by_the_readme(copy, environment, tag)
    finally:
        subprocess.run(["docker", "rmi", "-f", f"{tag}-env", f"{tag}-buildkit", tag], capture_output=True)


def _environment_rebuilt(copy: Path, environment: dict, tag: str) -> None:
    """Built by the classic builder and by BuildKit (the engine's own, through the client of the
    engine's package: no buildx plugin, no frontend pulled), each with the same distributions."""
    original = Environment.objects.get(key=environment["key"])
    for client, builder, image in (("docker", "0", f"{tag}-env"), (_buildkit_client(), "1", f"{tag}-buildkit")):
        build = subprocess.run([client, "build", "--network", "host", "-q", "-f", environment["dockerfile"],
                                "--build-arg", f"BASE={LOCAL_BASE}", "--target", "environment", "-t", image, "."],
                               cwd=copy, capture_output=True, text=True, timeout=900,
                               env={**os.environ, "DOCKER_BUILDKIT": builder})
        assert build.returncode == 0, build.stdout + build.stderr
        freeze = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "uv", "pip", "freeze",
                                 "--python", "/workspace/env/bin/python"], capture_output=True, text=True, timeout=120)
        assert freeze.returncode == 0, freeze.stderr
        # The same distributions at the same versions as the environment graded in, the project aside.
        assert release_lock(freeze.stdout) == release_lock(original.lock) and release_lock(original.lock)


def _task_runs_by_the_readme(copy: Path, environment: dict, tag: str) -> None:
    readme = (copy / "README.md").read_text()
    commands = re.search(r"```sh\n(.*?)```", readme, re.S).group(1)
    commands = (commands.replace("BASE=debian:bookworm-slim", f"BASE={LOCAL_BASE}")
                .replace(" -t task ", f" -t {tag} ").replace(" --network none task ", f" --network none {tag} "))
    assert len(commands.splitlines()) <= 5 and environment["tasks"][0] in commands
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", commands], cwd=copy, capture_output=True, text=True,
                          timeout=900)
    tests = (copy / "tests.txt").read_text().split()
    assert done.returncode == 0 and tests, done.stdout + done.stderr
    assert all(f"PASSED {test}" in done.stdout for test in tests), done.stdout
    # The test patch alone: the same tests, by the same command, fail.
    (copy / "fix.diff").write_text(_instance(copy, environment["tasks"][0])["test_patch"])
    without = subprocess.run(["bash", "-euo", "pipefail", "-c", commands.splitlines()[-1]], cwd=copy,
                             capture_output=True, text=True, timeout=600)
    assert without.returncode != 0 and all(f"FAILED {test}" in without.stdout for test in tests), without.stdout


def _instance(copy: Path, instance_id: str) -> dict:
    return next(row for row in map(json.loads, (copy / "instances.jsonl").read_text().splitlines())
                if row["instance_id"] == instance_id)


def release_images_built(manage, release: str, folder: Path) -> None:
    """`release_images` builds each environment's image and a task's, as a job; a build that fails says
    which step, and keeps its log."""
    manifest = json.loads((folder / "manifest.json").read_text())
    task = manifest["environments"][0]["tasks"][0]
    done = manage("release_images", release, "--tasks", task, "--json")
    assert done.returncode == 0, done.stderr
    images = [json.loads(line) for line in done.stdout.splitlines()]
    tags = [image["tag"] for image in images]
    try:
        assert [(image["kind"], image["task"]) for image in images] == [
            *(("environment", None) for _ in manifest["environments"]), ("task", task)]
        for image in images:
            inspected = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}} {{.Size}}", image["tag"]],
                                       capture_output=True, text=True, check=True).stdout.split()
            assert inspected == [image["image_id"], str(image["size"])] and image["seconds"] > 0
        # The manifest now names each environment's image, in the folder and with the release, its checksum too.
        noted = json.loads((folder / "manifest.json").read_text())
        assert [entry["image_id"] for entry in noted["environments"]] == [
            image["image_id"] for image in images if image["kind"] == "environment"]
        assert {**noted, "environments": manifest["environments"]} == manifest
        name, _, version = release.partition("@")
        recorded = Release.objects.get(name=name, version=int(version))
        assert recorded.manifest == noted and recorded.files[-1]["sha256"] == file_sha256(folder / "manifest.json")
        ran = subprocess.run(["docker", "run", "--rm", "--network", "none", tags[-1], "python", "-m", "pytest", "-q",
                              "-p", "no:cacheprovider", "--co"], capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0 and "tests collected" in ran.stdout, ran.stdout + ran.stderr
        # A release whose lock names what the index does not have: the step that failed, and the log kept.
        lock = folder / manifest["environments"][0]["lock"]
        lock.write_text(lock.read_text() + "no-such-distribution-of-commitgym==0.0.1\n")
        failed = manage("release_images", release)
        assert failed.returncode != 0 and "image_build_failed" not in failed.stdout
        assert re.search(r"the image of environment \w+: step \d+/\d+ `RUN .* uv pip install .*` failed: .*; its log "
                         r"is in \S+\.log", failed.stderr), failed.stderr
        log = Path(re.search(r"its log is in (\S+\.log)", failed.stderr).group(1))
        assert "no-such-distribution-of-commitgym" in log.read_text()
    finally:
        subprocess.run(["docker", "rmi", "-f", *tags], capture_output=True)
