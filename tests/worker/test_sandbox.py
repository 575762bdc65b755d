"""Hostile code in the local sandbox: each attack is contained and ends with a clear status.

These run for real (bubblewrap as root, as on CI and the workers); a machine without
bubblewrap fails them rather than skipping.
"""

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from worker.engine.sandbox import SANDBOX_UIDS, Limits, LocalSandbox, SandboxUnavailable

PYTHON = "/usr/bin/python3"  # the system's interpreter: readable by the sandbox user
QUICK = Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=1 << 30, processes=64,
               file_bytes=16 << 20, output_bytes=64 << 10)


@pytest.fixture(scope="module", autouse=True)
def _bubblewrap_is_here():
    if not LocalSandbox.available() or not os.path.exists(PYTHON):
        pytest.fail("the sandbox tests need bubblewrap and /usr/bin/python3 (make test installs them)")


@pytest.fixture
def tmp_path(open_folder):
    """Like pytest's, but the sandbox users can walk into it (pytest's own is private to root)."""
    return open_folder


@pytest.fixture
def workdir(tmp_path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def run(code: str, workdir: Path, limits: Limits = QUICK, **kwargs):
    return LocalSandbox().run([PYTHON, "-c", code], workdir=workdir, limits=limits, **kwargs)


def _sandbox_processes() -> list[str]:
    """Live processes of any sandbox user (zombies are dead, only not yet reaped by init)."""
    out = subprocess.run(["ps", "-e", "-o", "uid=,pid=,stat=,comm="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines()
            if line.split() and int(line.split()[0]) in SANDBOX_UIDS and not line.split()[2].startswith("Z")]


def test_a_command_runs_in_its_working_copy_and_reports_its_exit(workdir):
    (workdir / "input.txt").write_text("hello")
    result = run("import os; print(open('input.txt').read(), os.getuid()); open('out.txt', 'w').write('x')", workdir)
    assert result.status == "ok" and result.exit_code == 0
    text, uid = result.output.split()
    assert text == b"hello" and int(uid) in SANDBOX_UIDS
    assert (workdir / "out.txt").read_text() == "x"
    failed = run("import sys; sys.exit(3)", workdir)
    assert failed.status == "failed" and failed.exit_code == 3


def test_a_hanging_process_is_stopped_at_the_deadline_with_its_children(workdir):
    limits = Limits(wall_seconds=2, cpu_seconds=60, processes=64)
    result = run("import os, time\nfor _ in range(5):\n    os.fork() == 0 and time.sleep(600)\ntime.sleep(600)",
                 workdir, limits)
    assert result.status == "timeout" and result.exit_code is None
    assert not _sandbox_processes()


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
    assert result.status == "failed" and b"stopped after" in result.output
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
    opened = run(code, workdir, network=True)
    assert opened.status == "ok" and b"connected" in opened.output
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
    assert str(os.getpid()).encode() not in result.output.split(b"procs", 1)[1]


def test_files_outside_the_working_copy_cannot_be_deleted_or_changed(workdir, tmp_path):
    outside = tmp_path / "outside"
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
    result = run(code, workdir)
    assert result.status == "ok" and b"done" not in result.output
    assert victim.read_text() == "keep"


def test_read_only_paths_are_readable_not_writable(workdir, tmp_path):
    environment = tmp_path / "env"
    environment.mkdir()
    (environment / "lib.py").write_text("VALUE = 42\n")
    os.chmod(environment, 0o755)
    os.chmod(environment / "lib.py", 0o644)
    code = (f"import sys; sys.path.insert(0, {str(environment)!r}); import lib; print(lib.VALUE)\n"
            f"try:\n    open({str(environment / 'lib.py')!r}, 'a'); print('written')\n"
            f"except OSError as e:\n    print(type(e).__name__)\n")
    result = LocalSandbox(read_only=[environment]).run([PYTHON, "-c", code], workdir=workdir, limits=QUICK)
    assert result.output.split() == [b"42", b"OSError"] or result.output.split()[0] == b"42"
    assert b"written" not in result.output


def test_without_bubblewrap_nothing_runs_unless_the_operator_allows_it(workdir, monkeypatch):
    monkeypatch.setattr(LocalSandbox, "available", staticmethod(lambda: False))
    with pytest.raises(SandboxUnavailable):
        LocalSandbox().run([PYTHON, "-c", "print(1)"], workdir=workdir)
    allowed = LocalSandbox(allow_unsandboxed=True).run([PYTHON, "-c", "print(1)"], workdir=workdir, limits=QUICK)
    assert allowed.status == "ok" and allowed.output.strip() == b"1"


def test_the_worker_goes_on_after_each_attack(workdir):
    for code in ("while True: pass", "x = bytearray(10 * 1024 ** 3)", "import os; os.kill(os.getpid(), 9)"):
        run(code, workdir, Limits(wall_seconds=10, cpu_seconds=1, memory_bytes=1 << 30))
    assert run("print('still here')", workdir).output.strip() == b"still here"
    assert sys.executable  # this process is alive and well


def test_the_working_copy_and_read_only_paths_can_be_seen_at_fixed_places(workdir, tmp_path):
    environment = tmp_path / "env"
    environment.mkdir()
    (environment / "marker").write_text("env")
    os.chmod(environment, 0o755)
    os.chmod(environment / "marker", 0o644)
    (workdir / "repo").mkdir()
    code = "import os; print(os.getcwd(), open('/workspace/env/marker').read(), sorted(os.listdir('.')))"
    result = LocalSandbox(read_only=[(environment, "/workspace/env")]).run(
        [PYTHON, "-c", code], workdir=workdir, limits=QUICK, mount_at="/workspace")
    assert result.status == "ok", result.output
    assert result.output.decode().split(" ", 2)[:2] == ["/workspace", "env"]
    assert "'repo'" in result.output.decode()


def test_files_a_sandbox_could_plant_are_read_safely(tmp_path):
    from worker.engine.sandbox import sandbox_file_read

    (tmp_path / "plain").write_bytes(b"x" * 10)
    os.mkfifo(tmp_path / "fifo")
    os.symlink("/etc/shadow", tmp_path / "link")
    assert sandbox_file_read(tmp_path / "plain", max_bytes=4) == b"xxxx"
    assert sandbox_file_read(tmp_path / "fifo") == b""  # does not block
    assert sandbox_file_read(tmp_path / "link") == b""
    assert sandbox_file_read(tmp_path / "missing") == b""


def test_a_link_is_never_mounted(workdir, tmp_path):
    os.symlink("/root", tmp_path / "planted")
    with pytest.raises(PermissionError):
        LocalSandbox(read_only=[tmp_path / "planted"]).run([PYTHON, "-c", "pass"], workdir=workdir)


def test_memory_backed_folders_are_capped(workdir):
    code = ("import os\n"
            "for folder in ('/tmp', '/dev/shm'):\n"
            "    try:\n"
            "        with open(folder + '/fill', 'wb') as f:\n"
            "            for _ in range(64): f.write(b'z' * (1 << 20))\n"
            "        print(folder, 'filled')\n"
            "    except OSError as e:\n"
            "        print(folder, 'refused', e.errno)\n")
    result = run(code, workdir, Limits(wall_seconds=20, tmp_bytes=8 << 20, file_bytes=1 << 30))
    assert result.output.split(b"\n")[:2] == [b"/tmp refused 28", b"/dev/shm refused 28"]  # ENOSPC
