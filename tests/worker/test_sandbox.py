"""What only the local sandbox has: running without bubblewrap, reading files a sandbox may
have planted, links never mounted, capped memory-backed folders. The attacks both sandboxes
must contain are in test_sandbox_attacks.py.
"""

import os
import time
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


def test_a_run_starts_in_its_cgroups_with_its_rlimits(workdir):
    import threading
    import time

    from worker.engine.sandbox import cgroups

    token = f"commitgym-test-{os.getpid()}-{time.monotonic_ns()}"
    code = ("import resource, time\n"
            "print('files', resource.getrlimit(resource.RLIMIT_FSIZE))\n"
            "print('cpu', resource.getrlimit(resource.RLIMIT_CPU), flush=True)\n"
            f"open('started', 'w').close()\ntime.sleep(5)  # {token}\n")
    seen = []

    def look() -> None:  # from outside: inside, its cgroup namespace shows its own cgroup as /
        for _ in range(200):
            if (workdir / "started").exists():
                break
            time.sleep(0.05)
        for status in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if token.encode() in status.read_bytes():
                    seen.append(status.with_name("cgroup").read_text())
            except OSError:
                continue

    looking = threading.Thread(target=look)
    looking.start()
    result = run(code, workdir)
    looking.join()
    assert result.status == "ok", result.output
    lines = result.output.decode().splitlines()
    assert f"files ({QUICK.file_bytes}, {QUICK.file_bytes})" in lines
    assert f"cpu ({QUICK.cpu_seconds}, {QUICK.cpu_seconds + 5})" in lines
    assert seen, "the run's process was not found"
    wanted = ["0::"] if cgroups._v2_parent() else [":memory:", ":pids:"]
    for listed in seen:
        own = [line for line in listed.splitlines() if any(name in line for name in wanted)]
        assert len(own) == len(wanted) and all("/commitgym-" in line for line in own), listed


def test_a_run_whose_limits_cannot_be_set_does_not_run(workdir, monkeypatch):
    from worker.engine.sandbox import local

    def refused(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(local.resource, "prlimit", refused)
    with pytest.raises(SandboxUnavailable, match="limits could not be set, so it did not run"):
        run("open('ran', 'w').write('it ran')", workdir)
    assert not (workdir / "ran").exists()


def test_a_run_that_cannot_join_its_cgroups_does_not_run(workdir, monkeypatch):
    from worker.engine.sandbox import cgroups

    monkeypatch.setattr(cgroups.RunCgroup, "join_files", property(lambda cgroup: ["/proc/version"]))
    result = run("open('ran', 'w').write('it ran')", workdir)
    assert result.status == "failed" and result.exit_code == 125, (result.status, result.output)
    assert not (workdir / "ran").exists()


def _template_and_copies(open_folder, monkeypatch, runs):
    """Capped folders one after another, each told to hold the same 40 files; what each listed, and
    the hash of the kept template after each."""
    import hashlib

    from worker.engine.sandbox import disk

    monkeypatch.setattr(disk.tempfile, "gettempdir", lambda: str(open_folder))
    source = open_folder / "source"
    source.mkdir(exist_ok=True)
    listed, templates = [], []
    for number in range(runs):
        folder = open_folder / f"run-{number}"
        with disk.capped_folder(folder, holds=source, limits=Limits(disk_bytes=48 << 20, disk_files=2000)) as mounted:
            assert mounted and os.listdir(folder) == []
            for name in range(40):
                (folder / f"file-{name}").write_text("x")
            listed.append(os.listdir(folder))
        (template,) = (open_folder / "commitgym-disk-templates").glob("*.img")
        templates.append(hashlib.sha256(template.read_bytes()).hexdigest())
        assert not os.path.ismount(folder) and not folder.with_name(folder.name + disk._IMAGE_SUFFIX).exists()
    return listed, templates


def test_capped_folders_are_copies_of_a_kept_template_each_listing_files_in_an_order_of_its_own(
        open_folder, monkeypatch):
    listed, templates = _template_and_copies(open_folder, monkeypatch, 3)
    assert len(set(templates)) == 1  # each run copied the template, and none wrote to it
    assert all(sorted(order) == sorted(listed[0]) for order in listed)
    # A directory hash seed of its own in each copy: with one seed, every run lists files in one order.
    assert len({tuple(order) for order in listed}) == 3, listed


def test_a_file_system_that_cannot_show_its_holes_gets_its_image_made_anew(open_folder, monkeypatch):
    from worker.engine.sandbox import disk

    monkeypatch.setattr(disk, "_MAX_DATA_RUN", 0)  # every run of data looks as long as the whole file
    listed, _ = _template_and_copies(open_folder, monkeypatch, 2)
    assert listed[0] != listed[1] and sorted(listed[0]) == sorted(listed[1])


def test_what_a_run_left_in_its_capped_folder_is_thrown_away_not_written_back(open_folder):
    from worker.engine.sandbox import disk

    source = open_folder / "source"
    source.mkdir()
    grown = []
    # The kernel's own background writeback may catch the data in flight before the shutdown on a busy
    # machine: a few tries. Without the shutdown, the unmount writes all 16 MB back every time.
    for attempt in range(3):
        folder = open_folder / f"run-{attempt}"
        image = folder.with_name(folder.name + disk._IMAGE_SUFFIX)
        folder.mkdir()
        mount = disk._mounted(folder, image, source, Limits(disk_bytes=64 << 20, disk_files=1000))
        assert mount is not None
        (folder / "left").write_bytes(os.urandom(16 << 20))  # in the page cache, not yet in the image
        assert _loop_devices_backed_by(image) == {"1"}  # one device, and it clears itself on its last close
        before = image.stat().st_blocks
        disk._shut_down(folder, mount.device)
        with pytest.raises(OSError):
            (folder / "more").write_bytes(b"x")
        assert disk._unmounted(folder) and not os.path.ismount(folder)
        os.close(mount.lock)
        grown.append((image.stat().st_blocks - before) * 512)
        _assert_the_loop_device_lets_go(image)
        image.unlink()
        if grown[-1] < 512 << 10:
            break
    assert min(grown) < 512 << 10, grown  # the 16 MB never reached the image


def _loop_devices_backed_by(image: Path) -> set[str]:
    """The autoclear flag of each loop device that has `image` behind it."""
    flags = set()
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        if backing.read_text().strip() == str(image):
            flags.add((backing.parent / "autoclear").read_text().strip())
    return flags


def _assert_the_loop_device_lets_go(image: Path) -> None:
    # Not at once on a busy machine: a sandbox another test started while the folder was mounted has
    # a copy of the mount in its own namespace, and the device is closed for the last time only when
    # that copy goes. A wait, not a timing: it ends as soon as the device has let go.
    deadline = time.monotonic() + 120
    while _loop_devices_backed_by(image) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _loop_devices_backed_by(image)  # the loop device let go of it by itself


def test_capped_folders_a_dead_worker_left_mounted_are_swept(open_folder):
    from worker.engine.sandbox import disk

    folder, source = open_folder / "jobs" / "run-left", open_folder / "source"
    folder.mkdir(parents=True)
    source.mkdir()
    image = folder.with_name(folder.name + disk._IMAGE_SUFFIX)
    mount = disk._mounted(folder, image, source, Limits(disk_bytes=16 << 20, disk_files=1000))
    assert mount is not None and os.path.ismount(folder)
    assert disk.capped_folders_sweep(open_folder / "jobs") == []  # its worker is alive: it holds the lock
    assert os.path.ismount(folder)
    os.close(mount.lock)  # as the worker's death would, and never unmounted
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


def test_only_the_file_system_the_worker_mounted_is_shut_down(open_folder):
    from worker.engine.sandbox import disk

    source = open_folder / "source"
    source.mkdir()
    limits = Limits(disk_bytes=16 << 20, disk_files=1000)
    with disk.capped_folder(open_folder / "mine", holds=source, limits=limits) as mine, \
            disk.capped_folder(open_folder / "other", holds=source, limits=limits) as other:
        assert mine and other
        # As if "mine" had been unmounted by someone else and another file system stood there now.
        disk._shut_down(open_folder / "mine", os.stat(open_folder / "other").st_dev)
        (open_folder / "mine" / "still-writable").write_text("x")
        disk._shut_down(open_folder / "mine", os.stat(open_folder).st_dev)  # the folder's parent's
        (open_folder / "mine" / "still-writable").write_text("y")
        (open_folder / "other" / "still-writable").write_text("x")


def test_a_template_folder_anyone_else_could_write_to_is_not_used(open_folder, monkeypatch):
    from worker.engine.sandbox import disk

    monkeypatch.setattr(disk.tempfile, "gettempdir", lambda: str(open_folder))
    planted = open_folder / "commitgym-disk-templates"
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)
    source = open_folder / "source"
    source.mkdir()
    with disk.capped_folder(open_folder / "run", holds=source, limits=Limits(disk_bytes=16 << 20,
                                                                             disk_files=1000)) as mounted:
        assert mounted and os.listdir(open_folder / "run") == []  # made by mkfs for this run
    assert list(planted.iterdir()) == []  # nothing kept where others can write


def test_the_runs_path_cannot_choose_the_programs_that_start_it_as_root(workdir, open_folder):
    planted = open_folder / "planted-bin"
    planted.mkdir()
    marker = open_folder / "ran-as-root"
    for name in ("setpriv", "bwrap"):
        (planted / name).write_text(f"#!/bin/sh\necho $(id -u) > {marker}\nexec /usr/bin/{name} \"$@\"\n")
        (planted / name).chmod(0o755)
    result = run("import os; print(os.getuid())", workdir, env={"PATH": f"{planted}:/usr/bin:/bin"})
    assert result.status == "ok" and result.output.strip() != b"0", result.output
    assert not marker.exists()


def test_a_run_whose_starting_programs_are_missing_is_refused_in_words(workdir, monkeypatch):
    from worker.engine.sandbox import local

    real_which = local.shutil.which
    monkeypatch.setattr(local.shutil, "which", lambda name, *args, **kwargs:
                        None if name == "setpriv" else real_which(name, *args, **kwargs))
    with pytest.raises(SandboxUnavailable, match="setpriv is not on the worker's PATH"):
        run("open('ran', 'w').write('it ran')", workdir)
    assert not (workdir / "ran").exists()
