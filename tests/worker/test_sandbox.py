"""What only the local sandbox has: running without bubblewrap, reading files a sandbox may
have planted, links never mounted, capped memory-backed folders. The attacks both sandboxes
must contain are in test_sandbox_attacks.py.
"""

import os
from pathlib import Path

import pytest

from worker.engine.sandbox.base import Limits, SandboxUnavailable
from worker.engine.sandbox.local import LocalSandbox

PYTHON = "/usr/bin/python3"  # the system's interpreter: readable by the sandbox user
QUICK = Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=1 << 30, processes=64,
               file_bytes=16 << 20, output_bytes=64 << 10)


@pytest.fixture(scope="module", autouse=True)
def _bubblewrap_is_here():
    if not LocalSandbox.available() or not os.path.exists(PYTHON):
        pytest.fail("the sandbox tests need bubblewrap and /usr/bin/python3 (make test installs them)")


def run(code: str, workdir: Path, limits: Limits = QUICK, **kwargs):
    return LocalSandbox().run([PYTHON, "-c", code], workdir=workdir, limits=limits, **kwargs)


def test_without_bubblewrap_nothing_runs_unless_the_operator_allows_it(workdir, monkeypatch):
    monkeypatch.setattr(LocalSandbox, "available", staticmethod(lambda: False))
    with pytest.raises(SandboxUnavailable):
        LocalSandbox().run([PYTHON, "-c", "print(1)"], workdir=workdir)
    allowed = LocalSandbox(allow_unsandboxed=True).run([PYTHON, "-c", "print(1)"], workdir=workdir, limits=QUICK)
    assert allowed.status == "ok" and allowed.output.strip() == b"1"


def test_files_a_sandbox_could_plant_are_read_safely(open_folder):
    from worker.engine.sandbox.base import sandbox_file_read

    (open_folder / "plain").write_bytes(b"x" * 10)
    os.mkfifo(open_folder / "fifo")
    os.symlink("/etc/shadow", open_folder / "link")
    (open_folder / "real").mkdir()
    (open_folder / "real" / "file").write_bytes(b"inside")
    os.symlink(open_folder / "real", open_folder / "linked")
    assert sandbox_file_read(open_folder, "plain", max_bytes=4) == b"xxxx"
    assert sandbox_file_read(open_folder, "fifo") == b""  # does not block
    assert sandbox_file_read(open_folder, "link") == b""
    assert sandbox_file_read(open_folder, "/dev/zero") == b""  # a device, and not below the folder
    assert sandbox_file_read(open_folder, "missing") == b""
    assert sandbox_file_read(open_folder, "real/file") == b"inside"
    assert sandbox_file_read(open_folder, "linked/file") == b""  # a link in the middle, too
    assert sandbox_file_read(open_folder, "real/../plain") == b""
    handle = os.open(open_folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert sandbox_file_read(handle, "plain") == b"x" * 10
    finally:
        os.close(handle)


def test_a_link_is_never_mounted(workdir, open_folder):
    os.symlink("/root", open_folder / "planted")
    with pytest.raises(PermissionError):
        LocalSandbox(read_only=[open_folder / "planted"]).run([PYTHON, "-c", "pass"], workdir=workdir)


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


def test_a_run_is_refused_when_its_cgroups_cannot_be_made_and_leftovers_are_swept(workdir, monkeypatch):
    from worker.engine.sandbox import cgroups

    assert cgroups.cgroups_available(), "the worker runs as root on a host with memory and pids cgroups"
    monkeypatch.setattr(cgroups, "_made", lambda *args: None)
    with pytest.raises(SandboxUnavailable, match="cgroups could not be made"):
        LocalSandbox().run([PYTHON, "-c", "print(1)"], workdir=workdir, limits=QUICK)
    monkeypatch.undo()
    parents = [cgroups._v2_parent()] if cgroups._v2_parent() else list(cgroups._v1_parents())
    left = [parent / "commitgym-left-by-a-dead-worker" for parent in parents]
    for folder in left:
        folder.mkdir()
    assert set(map(str, left)) <= set(cgroups.cgroups_sweep())
    assert not any(folder.exists() for folder in left)


def test_capped_folders_a_dead_worker_left_mounted_are_swept(open_folder):
    from worker.engine.sandbox import disk

    folder, source = open_folder / "jobs" / "run-left", open_folder / "source"
    folder.mkdir(parents=True)
    source.mkdir()
    image = folder.with_name(folder.name + disk._IMAGE_SUFFIX)
    assert disk._mounted(folder, image, source, Limits(disk_bytes=16 << 20, disk_files=1000))  # and never unmounted
    assert os.path.ismount(folder)
    assert disk.capped_folders_sweep(open_folder / "jobs") == [str(folder)]
    assert not os.path.ismount(folder)
    image.unlink()


def test_a_capped_folder_whose_lost_found_stays_is_not_left_mounted(open_folder, monkeypatch):
    from worker.engine.sandbox import disk

    folder, source = open_folder / "run", open_folder / "source"
    source.mkdir()
    real_rmdir = Path.rmdir
    monkeypatch.setattr(Path, "rmdir", lambda path: (_ for _ in ()).throw(OSError("busy"))
                        if path.name == "lost+found" else real_rmdir(path))
    with disk.capped_folder(folder, holds=source, limits=Limits(disk_bytes=16 << 20, disk_files=1000)) as mounted:
        assert not mounted and not os.path.ismount(folder)
    assert not list(open_folder.glob("*" + disk._IMAGE_SUFFIX))


def test_a_capped_folder_is_measured_by_its_file_system_held_open_files_included(open_folder):
    from worker.engine.sandbox import disk
    from worker.engine.sandbox.base import RunWatch

    folder, source = open_folder / "run", open_folder / "source"
    source.mkdir()
    limits = Limits(disk_bytes=16 << 20, disk_files=1000)
    assert not disk.capped_folder_is(source) and not disk.capped_folder_is(Path("/proc"))  # no image beside it
    with disk.capped_folder(folder, holds=source, limits=limits) as mounted:
        assert mounted and disk.capped_folder_is(folder)
        watch = RunWatch(folder, None, limits, uid=None, own_file_system=True)
        assert watch.breach(now=True) is None
        with open(folder / "hidden", "wb") as held:  # no run's user to look for: only the file system knows
            os.unlink(folder / "hidden")
            held.write(b"x" * (20 << 20))
            held.flush()
            assert watch.breach(now=True) == "disk_limit"
            assert RunWatch(folder, None, limits, uid=None).breach(now=True) is None  # a walk misses it
        assert watch.breach(now=True) is None
    image = folder.with_name(folder.name + disk._IMAGE_SUFFIX)
    assert not image.exists() and not disk.capped_folder_is(folder)


def test_a_run_in_a_capped_folder_that_hides_its_growth_is_stopped(open_folder):
    from worker.engine.sandbox import disk

    folder, source = open_folder / "run", open_folder / "source"
    source.mkdir()
    limits = Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=1 << 30, processes=64, file_bytes=16 << 20,
                    disk_bytes=32 << 20, disk_files=1000)
    code = ("import os, time\nheld = []\nfor i in range(64):\n"  # 1 MB each 0.1 s: a look lands before the end
            "    f = open('hidden-%d' % i, 'wb'); os.unlink('hidden-%d' % i)\n"
            "    f.write(b'x' * (1 << 20)); f.flush(); held.append(f); time.sleep(0.1)\nprint('wrote it all')\n")
    with disk.capped_folder(folder, holds=source, limits=limits) as mounted:
        assert mounted
        result = LocalSandbox().run([PYTHON, "-c", code], workdir=folder, limits=limits)
    assert result.status == "disk_limit" and b"wrote it all" not in result.output, (result.status, result.output)


def test_a_cgroup_a_run_left_with_tighter_limits_does_not_refuse_the_next_run(workdir):
    from worker.engine.sandbox import cgroups

    with cgroups.run_cgroup("left-behind", memory_bytes=64 << 20, processes=8) as tight:
        assert tight is not None
        folders = list(tight.folders)
        tight.folders = []  # as if its removal had failed: the folders stay, with their limits
    with cgroups.run_cgroup("left-behind", memory_bytes=1 << 30, processes=64) as roomy:
        assert roomy is not None and roomy.folders == folders
    assert not any(folder.exists() for folder in folders)
