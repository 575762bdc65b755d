"""A release's source archive as a task's base tree: unpacked without its top folder, and nothing in
a hostile archive lands outside the working copy."""

import io
import tarfile

import pytest

from worker.engine.git.archive import archive_unpacked
from worker.engine.git.repo import GitError


def archive(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def test_the_tree_is_unpacked_without_its_top_folder(tmp_path):
    made = archive(tmp_path / "a.tar.gz", [("o__r/pkg/mod.py", "file", b"X = 1\n"), ("o__r/README", "file", b"hi"),
                                           ("o__r/pkg/alias.py", "link", "mod.py")])
    repo = archive_unpacked(made, tmp_path / "work")
    assert repo == tmp_path / "work" / "repo" and (repo / "pkg" / "mod.py").read_text() == "X = 1\n"
    assert (repo / "README").read_bytes() == b"hi" and (repo / "pkg" / "alias.py").is_symlink()


@pytest.mark.parametrize("member", [("o__r/../../escaped", "file", b"x"), ("o__r/out", "link", "/etc/passwd"),
                                    ("o__r/up", "link", "../../../etc")])
def test_nothing_lands_outside_the_working_copy(tmp_path, member):
    made = archive(tmp_path / "a.tar.gz", [("o__r/ok.py", "file", b""), member])
    with pytest.raises(GitError, match="cannot be unpacked safely"):
        archive_unpacked(made, tmp_path / "work")
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "work" / "escaped").exists()
