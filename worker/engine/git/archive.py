"""A repository's tree at a commit, for a release: a source archive anyone unpacks without git, and
the files at the top of the tree (where a licence is kept)."""

import os
import tarfile
import tempfile
from pathlib import Path
from typing import Optional

from worker.engine.git.repo import GitError, git_output, git_run, require_sha

# `git archive` obeys the tree's .gitattributes: `export-ignore` leaves files out (tests, say) and
# `export-subst` rewrites placeholders (a versioneer _version.py). The mirror's own attributes file,
# read before the tree's, turns both off: the archive is the tree as it is.
AS_IT_IS = "* -export-ignore -export-subst\n"
REGULAR_FILE_MODES = ("100644", "100755")  # not a link (120000), whose "text" is its target's path


def _attributes_neutral(mirror_dir: Path) -> None:
    attributes = Path(mirror_dir) / "info" / "attributes"
    if attributes.is_file() and AS_IT_IS in attributes.read_text():
        return
    attributes.parent.mkdir(exist_ok=True)
    old = attributes.read_text() if attributes.is_file() else ""
    handle, staged = tempfile.mkstemp(dir=attributes.parent, prefix=".attributes-")
    with os.fdopen(handle, "w") as staging:
        staging.write(old + AS_IT_IS)
    os.replace(staged, attributes)  # another process reads the old file or the new one, never half


def archive_write(mirror_dir: Path, sha: str, target: Path, *, prefix: str) -> None:
    """The commit's tree as a gzipped tar at `target`, every path under `prefix/`, every file as the
    tree holds it (no attribute leaves one out or rewrites it)."""
    _attributes_neutral(mirror_dir)
    git_run(["archive", "--format=tar.gz", f"--prefix={prefix.strip('/')}/", "-o", str(target), require_sha(sha)],
            cwd=mirror_dir)


def archive_unpacked(archive: Path, workdir: Path) -> Path:
    """`<workdir>/repo` with the tree a source archive holds (its one top folder stripped), as a
    working copy is written from a mirror: nothing outside the folder, no device or link out."""
    repo = workdir / "repo"
    repo.mkdir(parents=True)
    with tarfile.open(archive, mode="r:gz") as tar:
        members = []
        for member in tar.getmembers():
            top, _, rest = member.name.partition("/")
            if rest:
                member.name = rest
                if member.islnk():
                    member.linkname = member.linkname.partition("/")[2]
                members.append(member)
        try:
            tar.extractall(repo, members=members, filter="data")
        except tarfile.FilterError as refused:
            raise GitError("unsafe_tree", f"the source archive cannot be unpacked safely: {refused}") from None
    return repo


def top_level_files(mirror_dir: Path, sha: str) -> list[str]:
    """The names of the regular files (not links) at the top of the commit's tree."""
    out = git_run(["ls-tree", "-z", require_sha(sha)], cwd=mirror_dir)
    names = []
    for entry in out.split("\0"):
        meta, _, name = entry.partition("\t")
        if name and meta.split(" ")[0] in REGULAR_FILE_MODES:
            names.append(name)
    return names


def file_at(mirror_dir: Path, sha: str, path: str, *, max_bytes: int = 1 << 20) -> Optional[bytes]:
    """A file's bytes at the commit; None when it is larger than `max_bytes` (not read)."""
    name = f"{require_sha(sha)}:{path}"
    if int(git_run(["cat-file", "-s", name], cwd=mirror_dir).strip()) > max_bytes:
        return None
    return git_output(["cat-file", "blob", name], cwd=mirror_dir)
