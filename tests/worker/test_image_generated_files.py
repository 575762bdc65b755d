"""The files an environment image kept of what its install generated, copied out of the image: only
plain files under the rules a built environment's generated files follow, whatever the image holds."""

import io
import os
import tarfile

from worker.engine.env.files import GENERATED_FILES, generated_files_unpack


def _tar(members: list[tuple[str, bytes, bytes]]) -> tarfile.TarFile:
    """A tar as an engine gives a folder's archive: (name, type, data or link target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.REGTYPE:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.linkname = data.decode()
                tar.addfile(info)
    buffer.seek(0)
    return tarfile.open(fileobj=buffer, mode="r|")


def test_plain_files_are_kept_and_links_traversal_and_start_up_files_are_not(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    tar = _tar([
        ("generated/pkg/_version.py", tarfile.REGTYPE, b"version = '1.0'\n"),
        ("generated/../escaped.py", tarfile.REGTYPE, b"bad\n"),
        ("generated/pkg/link.py", tarfile.SYMTYPE, str(outside / "target").encode()),
        ("generated/pkg/hard.py", tarfile.LNKTYPE, b"generated/pkg/_version.py"),
        ("generated/conftest.py", tarfile.REGTYPE, b"import os; os._exit(0)\n"),
        ("generated/pkg/sitecustomize.py", tarfile.REGTYPE, b"bad\n"),
        ("generated/pkg/__pycache__/mod.cpython-311.pyc", tarfile.REGTYPE, b"\x00"),
        ("generated/build/lib/pkg.py", tarfile.REGTYPE, b"bad\n"),
        ("generated/pkg/hooks.pth", tarfile.REGTYPE, b"import os\n"),
    ])
    files = tmp_path / "env.files"
    assert generated_files_unpack(tar, files) == ["pkg/_version.py"]
    assert sorted(str(path.relative_to(files)) for path in files.rglob("*") if path.is_file()) == ["pkg/_version.py"]
    assert (files / "pkg" / "_version.py").read_text() == "version = '1.0'\n"
    assert not (tmp_path / "escaped.py").exists() and not os.listdir(outside)


def test_no_more_files_are_kept_than_an_environment_keeps(tmp_path):
    tar = _tar([(f"generated/data/{number}.txt", tarfile.REGTYPE, b"x") for number in range(GENERATED_FILES + 20)])
    assert len(generated_files_unpack(tar, tmp_path / "env.files")) == GENERATED_FILES
