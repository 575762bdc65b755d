"""Hostile code in both sandboxes: each attack is contained and ends with a clear status.

Every test runs against the local sandbox (bubblewrap) and the docker one, for real;
a machine without bubblewrap or a Docker engine fails them rather than skipping.
What only one backend has is tested in test_sandbox.py and test_docker_sandbox.py.
"""

import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from worker.engine.sandbox.base import SANDBOX_UIDS, Limits
from worker.engine.sandbox.docker import DockerSandbox
from worker.engine.sandbox.local import LocalSandbox

PYTHON = "/usr/bin/python3"  # the system's (local) and the image's (docker) interpreter
QUICK = Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=1 << 30, processes=64,
               file_bytes=16 << 20, output_bytes=64 << 10)
BACKENDS = {"local": LocalSandbox, "docker": DockerSandbox}


def sandbox_processes() -> list[str]:
    """Live processes of any sandbox user (zombies are dead, only not yet reaped by init)."""
    out = subprocess.run(["ps", "-e", "-o", "uid=,pid=,stat=,comm="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines()
            if line.split() and int(line.split()[0]) in SANDBOX_UIDS and not line.split()[2].startswith("Z")]


def labelled_containers() -> list[str]:
    out = subprocess.run(["docker", "ps", "-a", "-q", "--filter", "label=commitgym=1"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


@pytest.fixture(params=sorted(BACKENDS))
def make_sandbox(request):
    """The sandbox class under test; checks afterwards that the run left nothing behind."""
    sandbox = BACKENDS[request.param]
    if not sandbox.available() or not os.path.exists(PYTHON):
        pytest.fail(f"the {request.param} sandbox is not available here: make test installs and starts what "
                    "it needs (deploy/dev/require.sh, deploy/dev/docker.sh)")
    yield sandbox
    assert not sandbox_processes(), "a sandbox process was left behind"
    if sandbox is DockerSandbox:
        assert not labelled_containers(), "a sandbox container was left behind"


def run(make_sandbox, code: str, workdir: Path, limits: Limits = QUICK, read_only=(), **kwargs):
    return make_sandbox(read_only=read_only).run([PYTHON, "-c", code], workdir=workdir, limits=limits, **kwargs)


def test_a_command_runs_in_its_working_copy_and_reports_its_exit(make_sandbox, workdir):
    (workdir / "input.txt").write_text("hello")
    result = run(make_sandbox, "import os; print(open('input.txt').read(), os.getuid()); "
                               "open('out.txt', 'w').write('x')", workdir)
    assert result.status == "ok" and result.exit_code == 0, result.output
    text, uid = result.output.split()
    assert text == b"hello" and int(uid) in SANDBOX_UIDS
    assert (workdir / "out.txt").read_text() == "x"
    failed = run(make_sandbox, "import sys; sys.exit(3)", workdir)
    assert failed.status == "failed" and failed.exit_code == 3


def test_a_hanging_process_is_stopped_at_the_deadline_with_its_children(make_sandbox, workdir):
    limits = Limits(wall_seconds=2, cpu_seconds=60, processes=64)
    result = run(make_sandbox, "import os, time\nfor _ in range(5):\n    os.fork() == 0 and time.sleep(600)\n"
                               "time.sleep(600)", workdir, limits)
    assert result.status == "timeout" and result.exit_code is None


def test_a_busy_loop_is_stopped_by_its_cpu_limit(make_sandbox, workdir):
    result = run(make_sandbox, "while True: pass", workdir, Limits(wall_seconds=60, cpu_seconds=1))
    assert result.status == "timeout"


def test_a_fork_bomb_is_contained(make_sandbox, workdir):
    code = ("import os, time\n"
            "children = 0\n"
            "try:\n"
            "    while True:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(30); os._exit(0)\n"
            "        children += 1\n"
            "except OSError:\n"
            "    print('stopped after', children); raise SystemExit(1)\n")
    result = run(make_sandbox, code, workdir, Limits(wall_seconds=20, processes=32))
    assert result.status == "failed" and b"stopped after" in result.output, result.output
    assert int(result.output.split()[-1]) < 32


def test_allocating_ten_gigabytes_ends_out_of_memory(make_sandbox, workdir):
    assert run(make_sandbox, "x = bytearray(10 * 1024 ** 3)", workdir).status == "out_of_memory"


def test_a_gigabyte_of_output_is_cut_off(make_sandbox, workdir):
    result = run(make_sandbox, "import sys\nchunk = 'y' * 65536\nfor _ in range(16384): sys.stdout.write(chunk)",
                 workdir)
    assert result.status == "output_limit"
    assert result.output_truncated and len(result.output) < QUICK.output_bytes + 100
    assert b"bytes cut" in result.output


def test_no_network_unless_asked(make_sandbox, workdir):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')"
    closed = run(make_sandbox, code, workdir)
    assert closed.status == "failed" and b"connected" not in closed.output
    assert not accepted
    opened = run(make_sandbox, code, workdir, network=True)  # the build network: the host's, here
    assert opened.status == "ok" and b"connected" in opened.output, opened.output
    server.close()


def test_secrets_of_the_host_stay_out(make_sandbox, workdir, monkeypatch):
    monkeypatch.setenv("COMMITGYM_PROBE_SECRET", "worker-secret-value")
    code = ("import os\n"
            "print('env', 'COMMITGYM_PROBE_SECRET' in os.environ)\n"
            "try:\n    open('/etc/shadow').read(); print('shadow read')\n"
            "except OSError as e:\n    print('shadow', type(e).__name__)\n"
            "print('procs', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n")
    result = run(make_sandbox, code, workdir)
    assert result.status == "ok", result.output
    assert b"env False" in result.output and b"shadow PermissionError" in result.output
    assert b"worker-secret-value" not in result.output
    # Its own processes only: the worker's /proc/<pid>/environ is not there to read.
    procs = [int(p) for p in result.output.split(b"procs", 1)[1].strip(b" []\n").split(b",")]
    assert os.getpid() not in procs and max(procs) < 100


def test_files_outside_the_working_copy_cannot_be_deleted_or_changed(make_sandbox, workdir, open_folder):
    outside = open_folder / "outside"
    outside.mkdir()
    os.chmod(outside, 0o777)
    victim = outside / "keep.txt"
    victim.write_text("keep")
    os.chmod(victim, 0o666)
    code = (f"import os\n"
            f"for attempt in (lambda: os.remove({str(victim)!r}), lambda: open({str(victim)!r}, 'w'),\n"
            f"                lambda: open('/usr/bin/new', 'w'), lambda: os.remove('/etc/hostname')):\n"
            f"    try:\n        attempt(); print('done')\n"
            f"    except OSError as e:\n        print(type(e).__name__)\n")
    # Even with the folder mounted (read-only), nothing in it can be removed or changed.
    result = run(make_sandbox, code, workdir, read_only=[outside])
    assert result.status == "ok" and b"done" not in result.output, result.output
    assert victim.read_text() == "keep"


def test_the_working_copy_and_read_only_paths_can_be_seen_at_fixed_places(make_sandbox, workdir, open_folder):
    environment = open_folder / "env"
    environment.mkdir()
    (environment / "marker").write_text("env")
    os.chmod(environment, 0o755)
    os.chmod(environment / "marker", 0o644)
    (workdir / "repo").mkdir()
    code = ("import os; print(os.getcwd(), open('/workspace/env/marker').read(), sorted(os.listdir('.')))\n"
            "try:\n    open('/workspace/env/marker', 'a'); print('written')\n"
            "except OSError as e:\n    print(type(e).__name__)\n")
    result = run(make_sandbox, code, workdir, read_only=[(environment, "/workspace/env")], mount_at="/workspace")
    assert result.status == "ok", result.output
    assert result.output.decode().split(" ", 2)[:2] == ["/workspace", "env"]
    assert "'repo'" in result.output.decode() and b"written" not in result.output


def test_the_worker_goes_on_after_each_attack(make_sandbox, workdir):
    for code in ("while True: pass", "x = bytearray(10 * 1024 ** 3)", "import os; os.kill(os.getpid(), 9)"):
        run(make_sandbox, code, workdir, Limits(wall_seconds=10, cpu_seconds=1, memory_bytes=1 << 30))
    assert run(make_sandbox, "print('still here')", workdir).output.strip() == b"still here"
    killed = run(make_sandbox, "import os; os.kill(os.getpid(), 9)", workdir)
    assert killed.status == "killed"
