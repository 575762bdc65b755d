"""Hostile code in both sandboxes: each attack is contained and ends with a clear status.

Every test runs against the local sandbox (bubblewrap) and the docker one, for real;
a machine without bubblewrap or a Docker engine fails them rather than skipping.
What only one backend has is tested in test_sandbox.py and test_docker_sandbox.py.
"""

import os
import socket
import subprocess
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from worker.engine.sandbox.base import SANDBOX_UIDS, Limits, sandbox_user_held
from worker.engine.sandbox.docker import DockerSandbox, docker_client
from worker.engine.sandbox.local import LocalSandbox

PYTHON = "/usr/bin/python3"  # the system's (local) and the image's (docker) interpreter
QUICK = Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=1 << 30, processes=64,
               file_bytes=16 << 20, output_bytes=64 << 10)
BACKENDS = {"local": LocalSandbox, "docker": DockerSandbox}


def sandbox_processes() -> list[str]:
    """Live processes of a sandbox user no run holds any more (zombies are dead, only not yet reaped by
    init): those of runs under way, in another test process beside this one, are theirs."""
    out = subprocess.run(["ps", "-e", "-o", "uid=,pid=,stat=,comm="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.split() and int(line.split()[0]) in SANDBOX_UIDS
            and not line.split()[2].startswith("Z") and not sandbox_user_held(int(line.split()[0]))]


def labelled_containers(*, of_live_runs: bool = False) -> list[str]:
    """Sandbox containers whose run no longer holds their user (left behind), or all with `of_live_runs`."""
    # A container removed between the listing and its inspection (its run ended meanwhile) is gone, not left.
    containers = docker_client(timeout=30).containers.list(all=True, filters={"label": "commitgym=1"},
                                                           ignore_removed=True)
    return [container.id[:12] for container in containers if of_live_runs or not sandbox_user_held(
        int(container.attrs["Config"]["User"].split(":")[0]))]


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


THREE_PROCESSES = """
import os, time
for _ in range(2):
    if os.fork() == 0:
        break
held = bytearray(450 << 20)  # each process stays far under the 1 GB address-space limit
time.sleep(2)
print("held", flush=True)
"""

TMPFS_AND_A_PROCESS = """
for path in ("/tmp/fill", "/dev/shm/fill"):
    with open(path, "wb") as fill:
        for _ in range(400):
            fill.write(b"x" * (1 << 20))
held = bytearray(400 << 20)
print("held", flush=True)
"""


@pytest.mark.parametrize("code", [THREE_PROCESSES, TMPFS_AND_A_PROCESS], ids=["three processes", "tmpfs pages"])
def test_the_memory_limit_holds_for_the_whole_run(make_sandbox, workdir, code):
    result = run(make_sandbox, code, workdir, Limits(wall_seconds=30, cpu_seconds=30, memory_bytes=1 << 30,
                                                     processes=64, tmp_bytes=512 << 20))
    assert result.status == "out_of_memory", (result.status, result.output)


def test_the_sandboxs_own_root_and_its_tmpfs_cannot_be_filled_past_their_size(make_sandbox, workdir):
    code = ("import errno\ntry:\n    open('/planted', 'w')\n"
            "except OSError as e:\n    print('root', errno.errorcode[e.errno])\n"
            "try:\n    with open('/tmp/fill', 'wb') as fill:\n        for _ in range(64):\n"
            "            fill.write(b'x' * (1 << 20))\n"
            "except OSError as e:\n    print('tmp', errno.errorcode[e.errno])\n")
    result = run(make_sandbox, code, workdir, Limits(wall_seconds=30, cpu_seconds=30, memory_bytes=1 << 30,
                                                     processes=64, tmp_bytes=32 << 20))
    assert result.status == "ok", result.output
    assert result.output.split() == [b"root", b"EROFS", b"tmp", b"ENOSPC"], result.output


def test_a_working_copy_that_keeps_growing_is_stopped_at_its_cap(make_sandbox, workdir):
    code = ("import itertools\nfor i in itertools.count():\n"
            "    with open('grown-%d' % i, 'wb') as grown:\n        grown.write(b'x' * (8 << 20))\n")
    result = run(make_sandbox, code, workdir, Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=1 << 30,
                                                     processes=64, file_bytes=16 << 20, disk_bytes=64 << 20))
    assert result.status == "disk_limit", (result.status, result.output)
    grown = sum(path.stat().st_size for path in workdir.glob("grown-*"))
    assert 64 << 20 < grown < 2 << 30, grown  # stopped within a look or two of the cap


HIDDEN_GROWTH = {
    "files deleted but held open": ("import os, time\nheld = []\nfor i in range(40):\n"
                                    "    f = open('hidden-%d' % i, 'wb'); os.unlink('hidden-%d' % i)\n"
                                    "    f.write(b'x' * (8 << 20)); f.flush(); held.append(f)\ntime.sleep(30)\n"),
    "empty files by the thousand": ("import itertools\nfor i in itertools.count():\n"
                                    "    open('empty-%d' % i, 'w').close()\n"),
}


@pytest.mark.parametrize("how", HIDDEN_GROWTH)
def test_growth_a_walk_of_the_working_copy_would_miss_is_stopped_too(make_sandbox, workdir, how):
    result = run(make_sandbox, HIDDEN_GROWTH[how], workdir, Limits(
        wall_seconds=60, cpu_seconds=60, memory_bytes=1 << 30, processes=64, file_bytes=16 << 20,
        disk_bytes=64 << 20, disk_files=20_000))
    assert result.status == "disk_limit" and result.seconds < 30, (result.status, result.seconds, result.output)


def test_a_run_cannot_hold_descriptors_without_end(make_sandbox, workdir):
    code = ("import socket\nheld = []\ntry:\n    while True:\n        held.append(socket.socket())\n"
            "except OSError as e:\n    print('held', len(held), e.errno)\n")
    result = run(make_sandbox, code, workdir, Limits(wall_seconds=30, cpu_seconds=30, memory_bytes=1 << 30,
                                                     processes=64, open_files=256))
    held, errno_number = result.output.split()[1:3]
    assert result.status == "ok" and int(held) < 256 and int(errno_number) == 24, result.output  # EMFILE


def test_output_past_its_cap_on_the_workers_disk_stops_the_run(make_sandbox, workdir):
    code = "import sys\nchunk = 'y' * 65536\nwhile True:\n    sys.stdout.write(chunk)"
    result = run(make_sandbox, code, workdir, Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=1 << 30,
                                                     processes=64, file_bytes=1 << 30, output_file_bytes=8 << 20))
    assert result.status == "output_limit" and result.seconds < 30, (result.status, result.seconds)
    assert result.output_truncated and len(result.output) < (4 << 20) + 4096


def test_a_gigabyte_of_output_is_cut_off(make_sandbox, workdir):
    result = run(make_sandbox, "import sys\nchunk = 'y' * 65536\nfor _ in range(16384): sys.stdout.write(chunk)",
                 workdir)
    assert result.status == "output_limit"
    assert result.output_truncated and len(result.output) < QUICK.output_bytes + 100
    assert b"bytes cut" in result.output


@pytest.fixture
def host_server():
    """A server on the host's loopback, where Redis and PostgreSQL listen: (port, connections it got)."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def serve():
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1], accepted
    server.close()


REACH_THE_HOST = """
import os, socket
port = {port}
try:
    socket.create_connection(("127.0.0.1", port), timeout=5)
    print("direct: connected")
except OSError as error:
    print("direct:", type(error).__name__)
proxy = os.environ.get("HTTPS_PROXY", "")
if proxy:
    host, _, proxy_port = proxy.rpartition("/")[2].partition(":")
    tunnel = socket.create_connection((host, int(proxy_port)), timeout=5)
    tunnel.sendall(("CONNECT 127.0.0.1:%d HTTP/1.1\\r\\n\\r\\n" % port).encode())
    print("proxy:", tunnel.recv(200).split(b"\\r\\n")[0].decode())
"""


def test_no_run_reaches_the_host_even_while_installing(make_sandbox, workdir, host_server):
    port, accepted = host_server
    closed = run(make_sandbox, REACH_THE_HOST.format(port=port), workdir)
    assert closed.status == "ok" and b"direct: connected" not in closed.output, closed.output
    installing = run(make_sandbox, REACH_THE_HOST.format(port=port), workdir, network=True)
    assert installing.status == "ok", installing.output
    assert b"direct: connected" not in installing.output and b"proxy: HTTP/1.1 403 Forbidden" in installing.output
    assert f"refused 1: '127.0.0.1:{port}'".encode() in installing.output
    assert not accepted


UV_INSTALL = ("uv venv -q --python python3 /tmp/venv && uv pip install -q --python /tmp/venv/bin/python "
              "iniconfig==2.0.0 && /tmp/venv/bin/python -c "
              "'import iniconfig; print(\"installed\", iniconfig.__name__)'")


def _uv_install(make_sandbox, workdir):
    uv = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "uv"
    return make_sandbox(read_only=[(uv, "/opt/commitgym/bin/uv")]).run(
        ["/bin/sh", "-c", f"export PATH=/opt/commitgym/bin:$PATH; {UV_INSTALL}"], workdir=workdir, network=True,
        limits=Limits(wall_seconds=120, cpu_seconds=120, memory_bytes=2 << 30, processes=128),
        env={"UV_CACHE_DIR": "/tmp/uv-cache", "UV_PYTHON_DOWNLOADS": "never",
             "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"})


def test_a_real_install_reaches_the_index_through_the_proxy(make_sandbox, workdir):
    result = _uv_install(make_sandbox, workdir)
    assert result.status == "ok" and b"installed iniconfig" in result.output, result.output
    assert b"# network: the package index only" in result.output and b"refused" not in result.output


def test_the_repositorys_own_uv_settings_cannot_redirect_the_install(make_sandbox, workdir, host_server):
    port, accepted = host_server
    (workdir / "pyproject.toml").write_text(
        f'[project]\nname = "x"\nversion = "0"\n\n[tool.uv]\nindex-url = "http://127.0.0.1:{port}/simple"\n'
        f'find-links = ["http://127.0.0.1:{port}/links"]\noffline = true\n')
    (workdir / "uv.toml").write_text(f'index-url = "http://127.0.0.1:{port}/simple"\noffline = true\n')
    result = _uv_install(make_sandbox, workdir)
    assert result.status == "ok" and b"installed iniconfig" in result.output, result.output
    assert not accepted


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


BURST = ("import itertools\ntry:\n    for i in itertools.count():\n"
         "        with open('burst-%d' % i, 'wb') as burst:\n            burst.write(b'x' * (16 << 20))\n"
         "except OSError as e:\n    print('refused', e.errno)\n")


def test_a_burst_of_writes_stops_at_the_working_copys_own_file_system(make_sandbox, open_folder):
    """Faster than any watch: a validation run's fresh copy has a file system of its own."""
    from worker.engine.sandbox.disk import capped_folder

    source = open_folder / "source"
    source.mkdir()
    (source / "module.py").write_text("x = 1\n")
    work = open_folder / "capped"
    limits = Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=1 << 30, processes=64, file_bytes=16 << 20,
                    disk_bytes=64 << 20, disk_files=10_000)
    with capped_folder(work, holds=source, limits=limits) as mounted:
        assert mounted, "the worker runs as root with mkfs.ext4 and loop devices (make test)"
        # The watch is told of a cap far above: the file system alone refuses (a watch that looks
        # while the burst is between the cap and the file system's end would win the race).
        result = make_sandbox().run([PYTHON, "-c", BURST], workdir=work, limits=replace(limits, disk_bytes=1 << 30))
        written = sum(path.stat().st_size for path in work.glob("burst-*"))
    assert result.status == "ok" and b"refused 28" in result.output, result.output  # ENOSPC
    assert written < (64 << 20) * 1.05 + (16 << 20), written
    assert not os.path.ismount(work) and not list(open_folder.glob("*.commitgym-disk"))
