"""A release's source archive is the tree at the commit as it is: no .gitattributes rule leaves a file
out (export-ignore) or rewrites one (export-subst); licence files are read as files, never through a
link, and never whole when they are too large to be a licence."""

import os
import subprocess
import tarfile

from tests.gitrepo import GitRepo
from worker.engine.git.archive import archive_write, file_at, top_level_files

VERSION = 'git_refnames = "$Format:%d$"\ngit_full = "$Format:%H$"\n'


def mirror_of(tmp_path, files: dict) -> tuple:
    repo = GitRepo(tmp_path / "project")
    sha = repo.commit("Project", files)
    mirror = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(repo.path), str(mirror)], check=True)
    return mirror, sha


def test_an_archive_holds_every_file_of_the_tree_as_it_is_whatever_the_attributes_say(tmp_path):
    mirror, sha = mirror_of(tmp_path, {
        ".gitattributes": "tests/ export-ignore\npkg/_version.py export-subst\n",
        "pkg/__init__.py": "", "pkg/_version.py": VERSION, "tests/test_pkg.py": "def test_it():\n    pass\n"})
    target = tmp_path / "project.tar.gz"
    archive_write(mirror, sha, target, prefix="owner__project")
    with tarfile.open(target) as tar:
        files = {member.name: tar.extractfile(member).read() for member in tar.getmembers() if member.isfile()}
    assert sorted(files) == ["owner__project/.gitattributes", "owner__project/pkg/__init__.py",
                             "owner__project/pkg/_version.py", "owner__project/tests/test_pkg.py"]
    assert files["owner__project/pkg/_version.py"] == VERSION.encode()  # the placeholder, not a filled-in sha
    # Asked again (the mirror's attributes file now written), the same bytes.
    again = tmp_path / "again.tar.gz"
    archive_write(mirror, sha, again, prefix="owner__project")
    assert again.read_bytes() == target.read_bytes()


def test_licence_files_are_files_not_links_and_a_huge_one_is_not_read(tmp_path):
    repo = GitRepo(tmp_path / "project")
    (repo.path / "LICENSE").write_text("MIT License\n")
    os.symlink("/etc/passwd", repo.path / "COPYING")
    sha = repo.commit("Project", {"HUGE": "x" * 3000})
    mirror = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(repo.path), str(mirror)], check=True)
    assert top_level_files(mirror, sha) == ["HUGE", "LICENSE"]
    assert file_at(mirror, sha, "LICENSE") == b"MIT License\n"
    assert file_at(mirror, sha, "HUGE", max_bytes=1000) is None
