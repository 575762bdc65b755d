"""Hostile code in the Docker sandbox: the same attacks as the local sandbox's, each contained,
each ending with a clear status, and no container left behind.

These run for real against a Docker engine and the base image (deploy/dev/docker.sh sets both up);
a machine without them fails these tests rather than skipping.
"""

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.worker.test_sandbox import _sandbox_processes
from worker.engine import docker_sandbox
from worker.engine.docker_sandbox import DEADLINE_LABEL, DockerSandbox, docker_sandbox_cleanup
from worker.engine.sandbox import SANDBOX_UIDS, Limits, SandboxUnavailable

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
    assert not _labelled_containers(), "a sandbox container was left behind"


@pytest.fixture
def tmp_path(open_folder):
    """Like pytest's, but the sandbox users can walk into it (pytest's own is private to root)."""
    return open_folder


@pytest.fixture
def workdir(tmp_path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def run(code: str, workdir: Path, limits: Limits = QUICK, sandbox: DockerSandbox = None, **kwargs):
    return (sandbox or DockerSandbox()).run([PYTHON, "-c", code], workdir=workdir, limits=limits, **kwargs)


def _labelled_containers() -> list[str]:
    out = subprocess.run(["docker", "ps", "-a", "-q", "--filter", "label=commitgym=1"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def test_a_command_runs_in_its_working_copy_and_reports_its_exit(workdir):
    (workdir / "input.txt").write_text("hello")
    result = run("import os; print(open('input.txt').read(), os.getuid()); open('out.txt', 'w').write('x')", workdir)
    assert result.status == "ok" and result.exit_code == 0, result.output
    text, uid = result.output.split()
    assert text == b"hello" and int(uid) in SANDBOX_UIDS
    assert (workdir / "out.txt").read_text() == "x"
    failed = run("import sys; sys.exit(3)", workdir)
    assert failed.status == "failed" and failed.exit_code == 3


def test_a_hanging_process_is_stopped_at_the_deadline_with_its_children(workdir):
    limits = Limits(wall_seconds=2, cpu_seconds=60, processes=64)
    started = time.monotonic()
    result = run("import os, time\nfor _ in range(5):\n    os.fork() == 0 and time.sleep(600)\ntime.sleep(600)",
                 workdir, limits)
    assert result.status == "timeout" and result.exit_code is None
    assert time.monotonic() - started < 15
    assert not _labelled_containers() and not _sandbox_processes()


def test_a_busy_loop_is_stopped_by_its_cpu_limit(workdir):
    result = run("while True: pass", workdir, Limits(wall_seconds=60, cpu_seconds=1))
    assert result.status == "timeout"


def test_a_fork_bomb_is_contained(workdir):
    code = ("import os, time\n"
            "children = 0\n"
            "try:\n"
            "    while True:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(30); os._exit(0)\n"
            "        children += 1\n"
            "except OSError:\n"
            "    print('stopped after', children); raise SystemExit(1)\n")
    result = run(code, workdir, Limits(wall_seconds=20, processes=32))
    assert result.status == "failed" and b"stopped after" in result.output, result.output
    assert int(result.output.split()[-1]) < 32
    assert not _sandbox_processes()


def test_allocating_ten_gigabytes_ends_out_of_memory(workdir):
    result = run("x = bytearray(10 * 1024 ** 3)", workdir)
    assert result.status == "out_of_memory"


def test_a_gigabyte_of_output_is_cut_off(workdir):
    result = run("import sys\nchunk = 'y' * 65536\nfor _ in range(16384): sys.stdout.write(chunk)", workdir)
    assert result.status == "output_limit"
    assert result.output_truncated and len(result.output) < QUICK.output_bytes + 100
    assert b"bytes cut" in result.output


def test_no_network_unless_asked(workdir):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')"
    closed = run(code, workdir)
    assert closed.status == "failed" and b"connected" not in closed.output
    assert not accepted
    opened = run(code, workdir, network=True)  # the build network: the host's, here
    assert opened.status == "ok" and b"connected" in opened.output, opened.output
    server.close()


def test_secrets_of_the_host_stay_out(workdir, monkeypatch):
    monkeypatch.setenv("COMMITGYM_PROBE_SECRET", "worker-secret-value")
    code = ("import os, glob\n"
            "print('env', 'COMMITGYM_PROBE_SECRET' in os.environ)\n"
            "try:\n    open('/etc/shadow').read(); print('shadow read')\n"
            "except OSError as e:\n    print('shadow', type(e).__name__)\n"
            "print('procs', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n")
    result = run(code, workdir)
    assert result.status == "ok", result.output
    assert b"env False" in result.output and b"shadow PermissionError" in result.output
    assert b"worker-secret-value" not in result.output
    # Its own processes only: the worker's /proc/<pid>/environ is not there to read.
    procs = eval(result.output.split(b"procs", 1)[1])
    assert os.getpid() not in procs and max(procs) < 100


def test_files_outside_the_working_copy_cannot_be_deleted_or_changed(workdir, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.chmod(outside, 0o777)
    victim = outside / "keep.txt"
    victim.write_text("keep")
    os.chmod(victim, 0o666)
    code = (f"import os\n"
            f"for attempt in (lambda: os.remove({str(victim)!r}), lambda: open({str(victim)!r}, 'w'),\n"
            f"                lambda: open('/usr/bin/new', 'w'), lambda: os.remove('/etc/hostname'),\n"
            f"                lambda: os.remove('/etc/ssl/certs/ca-certificates.crt')):\n"
            f"    try:\n        attempt(); print('done')\n"
            f"    except OSError as e:\n        print(type(e).__name__)\n")
    # Even with the folder mounted (read-only), nothing in it can be removed or changed.
    result = run(code, workdir, sandbox=DockerSandbox(read_only=[outside]))
    assert result.status == "ok" and b"done" not in result.output, result.output
    assert victim.read_text() == "keep"
    assert Path("/etc/ssl/certs/ca-certificates.crt").exists()


def test_the_working_copy_and_read_only_paths_can_be_seen_at_fixed_places(workdir, tmp_path):
    environment = tmp_path / "env"
    environment.mkdir()
    (environment / "lib.py").write_text("VALUE = 42\n")
    os.chmod(environment / "lib.py", 0o666)  # only the read-only mount keeps it from being written
    (workdir / "repo").mkdir()
    code = ("import os, sys; sys.path.insert(0, '/workspace/env'); import lib\n"
            "print(os.getcwd(), lib.VALUE, sorted(os.listdir('/workspace')))\n"
            "try:\n    open('/workspace/env/lib.py', 'a'); print('written')\n"
            "except OSError as e:\n    print(type(e).__name__)\n")
    result = DockerSandbox(read_only=[(environment, "/workspace/env")]).run(
        [PYTHON, "-c", code], workdir=workdir, limits=QUICK, mount_at="/workspace", cwd="/workspace/repo")
    assert result.status == "ok", result.output
    lines = result.output.decode().splitlines()
    assert lines[0].startswith("/workspace/repo 42 ") and "'repo'" in lines[0]
    assert lines[1] == "OSError"  # EROFS
    assert (environment / "lib.py").read_text() == "VALUE = 42\n"


def test_the_host_ca_bundle_is_there_for_installs(workdir):
    code = "import os, ssl; print(os.environ['SSL_CERT_FILE'], len(ssl.create_default_context().get_ca_certs()) >= 0)"
    result = run(code, workdir, network=True)
    assert result.status == "ok", result.output
    assert result.output.split()[0] == b"/etc/ssl/certs/ca-certificates.crt"
    inside = run("print(len(open('/etc/ssl/certs/ca-certificates.crt').read()))", workdir)
    assert int(inside.output) == len(Path("/etc/ssl/certs/ca-certificates.crt").read_text())


def test_the_worker_goes_on_after_each_attack(workdir):
    for code in ("while True: pass", "x = bytearray(10 * 1024 ** 3)", "import os; os.kill(os.getpid(), 9)"):
        run(code, workdir, Limits(wall_seconds=10, cpu_seconds=1, memory_bytes=1 << 30))
    assert run("print('still here')", workdir).output.strip() == b"still here"
    killed = run("import os; os.kill(os.getpid(), 9)", workdir)
    assert killed.status == "killed" and killed.exit_code == 137
    assert sys.executable


def test_without_an_engine_nothing_runs(workdir, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{workdir}/no-such-docker.sock")
    assert not DockerSandbox.available()
    with pytest.raises(SandboxUnavailable):
        run("print(1)", workdir)
    monkeypatch.delenv("DOCKER_HOST")
    with pytest.raises(SandboxUnavailable):
        run("print(1)", workdir, sandbox=DockerSandbox(image="commitgym-no-such-image:none"))


def test_a_container_outlives_no_dead_worker(workdir):
    """A worker killed mid-run leaves its container behind: the container ends itself a little after its
    deadline, and the cleanup removes it once the deadline has passed."""
    code = ("import sys; from pathlib import Path\n"
            "from worker.engine import docker_sandbox as d; from worker.engine.sandbox import Limits\n"
            "d.INNER_GRACE = 1\n"
            f"d.DockerSandbox().run(['sleep', '600'], workdir=Path({str(workdir)!r}), limits=Limits(wall_seconds=3))\n")
    worker = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2])
    try:
        for _ in range(100):
            if _labelled_containers():
                break
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        worker.kill()
        worker.wait()
    left = _labelled_containers()
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
    assert docker_sandbox_cleanup(now=deadline - 1) == []  # a live run's container is not touched
    assert [c[:12] for c in docker_sandbox_cleanup(now=deadline + 1)] == [left[0][:12]]
    assert not _labelled_containers()


def test_the_build_network_is_a_setting(workdir):
    options = DockerSandbox(build_network="commitgym-build")._options(
        workdir, "/workspace", "/workspace", workdir, True, QUICK, "1:1", {})
    assert options["network_mode"] == "commitgym-build"
    assert DockerSandbox()._options(workdir, "/w", "/w", workdir, False, QUICK, "1:1", {})["network_mode"] == "none"
    assert docker_sandbox.DockerSandbox().build_network == "host"
