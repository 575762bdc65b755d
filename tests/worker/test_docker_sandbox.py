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


@pytest.fixture(scope="module")
def environment_image():
    """An image holding an environment at /workspace/env, as a release's environment image does."""
    import io

    import docker

    client = docker.from_env()
    dockerfile = (f"FROM {DockerSandbox().image}\n"
                  "RUN mkdir -p /workspace/env/bin && echo from-the-image > /workspace/env/marker "
                  "&& ln -s /usr/bin/python3 /workspace/env/bin/python\n")
    image, _ = client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag="commitgym-test/env-in-image:1",
                                   rm=True, forcerm=True, network_mode="none", pull=False)
    yield image.id
    client.images.remove(image.id, force=True)


def test_an_environment_the_image_holds_is_seen_under_the_working_folder_and_stays_read_only(workdir,
                                                                                          environment_image):
    (workdir / "repo").mkdir()
    (workdir / "repo" / "module.py").write_text("VALUE = 1\n")
    (workdir / "env").mkdir()  # a folder of the run's own by the image's name hides nothing of the image
    (workdir / "env" / "marker").write_text("from-the-working-folder\n")
    os.symlink("/root", workdir / "planted")
    sandbox = DockerSandbox(image=environment_image, image_paths=("/workspace/env",))
    code = """
import os
print(open('/workspace/env/marker').read().strip())
print(open('/workspace/repo/module.py').read().strip())
open('/workspace/repo/written.txt', 'w').write('kept')
for path in ('/workspace/env/marker', '/workspace/env/new', '/workspace/new', '/workspace/planted/x'):
    try:
        open(path, 'w').write('changed')
        print('wrote', path)
    except OSError as error:
        print('refused', path, error.errno)
print(sorted(os.listdir('/workspace')))
open(os.path.expanduser('~/.cache-of-a-test'), 'w').write('a home the run may write')
"""
    result = sandbox.run(["/workspace/env/bin/python", "-c", code], workdir=workdir, limits=QUICK,
                         mount_at="/workspace", cwd="/workspace/repo")
    assert result.status == "ok", result.output
    lines = result.output.decode().splitlines()
    assert lines[:2] == ["from-the-image", "VALUE = 1"]
    assert [line.split()[:2] for line in lines[2:6]] == [["refused", path] for path in (
        "/workspace/env/marker", "/workspace/env/new", "/workspace/new", "/workspace/planted/x")]
    assert lines[6] == "['env', 'repo']"  # the link was not mounted
    assert (workdir / "repo" / "written.txt").read_text() == "kept"


@pytest.mark.parametrize("setting", ['ENTRYPOINT ["/bin/sh", "-c", "touch /workspace/repo/owned"]', "VOLUME /data"])
def test_an_image_with_an_entrypoint_or_a_volume_is_never_a_sandbox(workdir, setting):
    import io

    import docker

    client = docker.from_env()
    image, _ = client.images.build(fileobj=io.BytesIO(f"FROM {DockerSandbox().image}\n{setting}\n".encode()),
                                   rm=True, forcerm=True, network_mode="none", pull=False)
    try:
        (workdir / "repo").mkdir()
        with pytest.raises(SandboxUnavailable, match="sets an entrypoint or volumes"):
            DockerSandbox(image=image.id).run(["true"], workdir=workdir, limits=QUICK)
        assert not (workdir / "repo" / "owned").exists()
    finally:
        client.images.remove(image.id, force=True)


def test_an_environment_the_image_holds_keeps_the_runs_limits(workdir, environment_image):
    (workdir / "repo").mkdir()
    sandbox = DockerSandbox(image=environment_image, image_paths=("/workspace/env",))
    tight = Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=128 << 20, processes=64,
                   file_bytes=1 << 20, output_bytes=64 << 10)
    memory = sandbox.run(["/workspace/env/bin/python", "-c", "b = bytearray(512 << 20); print(len(b))"],
                         workdir=workdir, limits=tight, mount_at="/workspace", cwd="/workspace/repo")
    written = sandbox.run(["/workspace/env/bin/python", "-c", "open('big', 'wb').write(b'x' * (4 << 20))"],
                          workdir=workdir, limits=tight, mount_at="/workspace", cwd="/workspace/repo")
    network = sandbox.run(["/workspace/env/bin/python", "-c",
                           "import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)"],
                          workdir=workdir, limits=tight, mount_at="/workspace", cwd="/workspace/repo")
    assert memory.status == "out_of_memory", memory.output
    assert b"File too large" in written.output and (workdir / "repo" / "big").stat().st_size <= 1 << 20
    assert network.status != "ok" and b"Network is unreachable" in network.output, network.output
