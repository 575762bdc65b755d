"""What only the Docker sandbox has: the host's CA bundle, no engine or image, containers a
dead worker left, the build network as a setting. The attacks both sandboxes must contain are
in test_sandbox_attacks.py. These run for real against a Docker engine and the base image
(deploy/dev/docker.sh sets both up); a machine without them fails rather than skipping.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.worker.test_sandbox_attacks import labelled_containers
from worker.engine.sandbox.base import Limits, SandboxUnavailable
from worker.engine.sandbox.docker import DEADLINE_LABEL, DockerSandbox, docker_sandbox_cleanup

PYTHON = "/usr/bin/python3"  # the image's interpreter
QUICK = Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=1 << 30, processes=64,
               file_bytes=16 << 20, output_bytes=64 << 10)


@pytest.fixture(scope="module", autouse=True)
def _engine_is_here():
    where = "on CI" if os.environ.get("CI") else "here"
    if not DockerSandbox.available():
        pytest.fail(f"no Docker engine answers {where}: the Docker sandbox tests need one "
                    "(deploy/dev/docker.sh installs and starts it; make test runs it)")
    if subprocess.run(["docker", "image", "inspect", DockerSandbox().image], capture_output=True).returncode:
        pytest.fail(f"the sandbox image {DockerSandbox().image} is missing {where} "
                    "(deploy/dev/docker.sh or manage.py build_base_images builds it)")


@pytest.fixture(autouse=True)
def _no_container_is_left():
    yield
    assert not labelled_containers(), "a sandbox container was left behind"


def run(code: str, workdir: Path, limits: Limits = QUICK, sandbox: DockerSandbox = None, **kwargs):
    return (sandbox or DockerSandbox()).run([PYTHON, "-c", code], workdir=workdir, limits=limits, **kwargs)


def test_the_host_ca_bundle_is_there_for_installs(workdir):
    code = "import os, ssl; print(os.environ['SSL_CERT_FILE'], len(ssl.create_default_context().get_ca_certs()) >= 0)"
    result = run(code, workdir, network=True)
    assert result.status == "ok", result.output
    assert result.output.split()[0] == b"/etc/ssl/certs/ca-certificates.crt"
    inside = run("print(len(open('/etc/ssl/certs/ca-certificates.crt').read()))", workdir)
    assert int(inside.output) == len(Path("/etc/ssl/certs/ca-certificates.crt").read_text())


def test_without_an_engine_nothing_runs(workdir, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{workdir}/no-such-docker.sock")
    assert not DockerSandbox.available()
    with pytest.raises(SandboxUnavailable):
        run("print(1)", workdir)
    monkeypatch.delenv("DOCKER_HOST")
    with pytest.raises(SandboxUnavailable):
        run("print(1)", workdir, sandbox=DockerSandbox(image="commitgym-no-such-image:none"))


@pytest.mark.alone
def test_a_container_outlives_no_dead_worker(workdir):
    """A worker killed mid-run leaves its container behind: the container ends itself a little after its
    deadline, and the cleanup removes it once the deadline has passed, and not before."""
    code = ("import sys; from pathlib import Path\n"
            "from worker.engine.sandbox import docker as d; from worker.engine.sandbox.base import Limits\n"
            "d.INNER_GRACE, d.REMOVAL_GRACE = 1, 6\n"
            f"d.DockerSandbox().run(['sleep', '600'], workdir=Path({str(workdir)!r}), limits=Limits(wall_seconds=3))\n")
    before = set(labelled_containers(of_live_runs=True))  # other tests' runs, beside this one
    worker = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2])
    try:
        for _ in range(100):
            if set(labelled_containers(of_live_runs=True)) - before:
                break
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        worker.kill()
        worker.wait()
    left = labelled_containers()
    assert len(left) == 1
    state = ""
    for _ in range(100):  # about 3 + 1 s after it started
        state = subprocess.run(["docker", "inspect", "-f", "{{.State.Status}}", left[0]],
                               capture_output=True, text=True).stdout.strip()
        if state == "exited":
            break
        time.sleep(0.1)
    assert state == "exited"
    deadline = int(subprocess.run(["docker", "inspect", "-f", f'{{{{index .Config.Labels "{DEADLINE_LABEL}"}}}}',
                                   left[0]], capture_output=True, text=True).stdout)
    # The clock itself, not a time passed in: a time ahead of it would remove other live runs' containers.
    assert time.time() < deadline
    assert left[0] not in [c[:12] for c in docker_sandbox_cleanup()]  # a live run's container is not touched
    time.sleep(max(0.0, deadline + 1 - time.time()))
    assert left[0] in [c[:12] for c in docker_sandbox_cleanup()]
    assert not labelled_containers()


def test_no_container_has_a_network_and_the_index_is_reached_through_a_mounted_socket(workdir):
    options = DockerSandbox()._options(workdir, "/workspace", "/workspace", workdir, QUICK, "1:1", {},
                                       [(workdir, "/run/commitgym-index")])
    assert options["network_mode"] == "none"
    (proxy_mount,) = [mount for mount in options["mounts"] if mount["Target"] == "/run/commitgym-index"]
    assert proxy_mount["ReadOnly"] and proxy_mount["Source"] == str(workdir)


OUTPUT_SWAPS = {
    "a link to the worker's environment": "os.symlink('/proc/self/environ', out)",
    "a link to an endless device": "os.symlink('/dev/zero', out)",
    "a pipe no one writes to": "os.mkfifo(out)",
}


@pytest.mark.parametrize("swap", OUTPUT_SWAPS)
def test_the_output_file_cannot_be_swapped_for_something_the_worker_would_read(workdir, monkeypatch, swap):
    """The worker reads the output file as root: the run must not replace it, and a swap must not
    be followed, block or never end."""
    monkeypatch.setenv("COMMITGYM_TEST_SECRET", "do-not-leak-7f3a")
    code = ("import os, sys\nout = '/run/commitgym-output/output'\nprint('before', flush=True)\n"
            "try:\n    os.unlink(out)\n"
            "except OSError as refused:\n    print('unlink refused', refused.errno, flush=True)\n"
            "else:\n    " + OUTPUT_SWAPS[swap] + "\n    print('swapped', flush=True)\n")
    started = time.monotonic()
    result = run(code, workdir)
    assert time.monotonic() - started < 15
    assert b"do-not-leak-7f3a" not in result.output and len(result.output) < QUICK.output_bytes + 200
    assert result.output.split(b"\n")[:2] == [b"before", b"unlink refused 13"], result.output


def test_a_link_is_never_mounted(workdir, open_folder):
    os.symlink("/root", open_folder / "planted")
    with pytest.raises(PermissionError, match="symbolic link"):
        run("print(1)", workdir, sandbox=DockerSandbox(read_only=[open_folder / "planted"]))
