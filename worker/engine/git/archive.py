"""A repository's tree at a commit, for a release: a source archive anyone unpacks without git, and
the files at the top of the tree (where a licence is kept)."""

from pathlib import Path
from typing import Optional

from worker.engine.git.repo import git_output, git_run, require_sha


def archive_write(mirror_dir: Path, sha: str, target: Path, *, prefix: str) -> None:
    """The commit's tree as a gzipped tar at `target`, every path under `prefix/`: what `git archive`
    gives (the same bytes for the same commit and git)."""
    git_run(["archive", "--format=tar.gz", f"--prefix={prefix.strip('/')}/", "-o", str(target), require_sha(sha)],
            cwd=mirror_dir)


def top_level_files(mirror_dir: Path, sha: str) -> list[str]:
    """The names of the files at the top of the commit's tree."""
    out = git_run(["ls-tree", "-z", require_sha(sha)], cwd=mirror_dir)
    names = []
    for entry in out.split("\0"):
        meta, _, name = entry.partition("\t")
        if name and meta.split(" ")[1:2] == ["blob"]:
            names.append(name)
    return names


def file_at(mirror_dir: Path, sha: str, path: str, *, max_bytes: int = 1 << 20) -> Optional[bytes]:
    """A file's bytes at the commit; None when it is larger than `max_bytes`."""
    data = git_output(["cat-file", "blob", f"{require_sha(sha)}:{path}"], cwd=mirror_dir)
    return data if len(data) <= max_bytes else None
