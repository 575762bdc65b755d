"""Walk a repository's history in one streaming `git log -p` and measure each commit.

One git process writes every commit's diff; this module reads it line by line
and keeps counters, file names (at most MAX_LISTED_FILES) and the numbers of
changed lines in Python files (at most MAX_TRACKED_LINES a file), so memory
does not grow with history and stays bounded for any one commit.
"""

import fcntl
import io
import queue
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from worker.engine.commit_filters import CommitStats, TestFileRules
from worker.engine.git_repo import GIT_CONFIG, BlobReader, GitError, git_environment, require_sha
from worker.engine.python_change import ChangeBlock, is_semantic_python_change

_COMMIT_MARK = b"\x00\x01"
_HEADER_FIELDS = 7  # sha, parents, author name, author email, author date, committer date, message
_LOG_FORMAT = "%x00%x01%H%x00%P%x00%an%x00%ae%x00%aI%x00%cI%x00%B%x00"
_PIPE_BYTES = 1 << 20
_QUEUED_CHUNKS = 32  # chunks of git's output read ahead (at most 8 MB)
# Stored file lists are capped; the counts stay exact.
MAX_LISTED_FILES = 1000
# Past this many changed lines in one .py file, its change counts as semantic unread.
MAX_TRACKED_LINES = 20_000


@dataclass
class MinedCommit:
    sha: str
    parent_sha: str  # "" for a root commit
    author_name: str
    author_email: str
    authored_at: str  # ISO 8601
    committed_at: str
    message: str
    stats: CommitStats = field(default_factory=CommitStats)
    python_changes: list["PythonFileChange"] = field(default_factory=list)


@dataclass
class PythonFileChange:
    """A non-test .py file's change: its paths (None where the file did not exist) and changed line numbers."""

    old_path: Optional[str]
    new_path: Optional[str]
    old_blob: Optional[str]  # abbreviated blob ids from the diff's index line
    new_blob: Optional[str]
    blocks: list[ChangeBlock]  # runs of changed lines: (line numbers in the old file, in the new file)
    complete: bool = True  # False when too many lines changed to track


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").replace("\x00", "")


def _unquote(raw: bytes) -> bytes:
    """Undo git's C-style quoting of a path ("a\\tb" or octal escapes)."""
    if not (raw.startswith(b'"') and raw.endswith(b'"')):
        return raw
    out, i, body = bytearray(), 0, raw[1:-1]
    escapes = {ord("n"): 10, ord("t"): 9, ord('"'): 34, ord("\\"): 92, ord("a"): 7,
               ord("b"): 8, ord("f"): 12, ord("r"): 13, ord("v"): 11}
    while i < len(body):
        c = body[i]
        if c == 92 and i + 1 < len(body):
            nxt = body[i + 1]
            if 48 <= nxt <= 55:
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
                continue
            out.append(escapes.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out)


def _header_path(rest: bytes, prefix: bytes) -> Optional[bytes]:
    rest = rest.rstrip(b"\n").rstrip(b"\t")
    if rest == b"/dev/null":
        return None
    rest = _unquote(rest)
    return rest[len(prefix):] if rest.startswith(prefix) else rest


def _diff_git_paths(line: bytes) -> tuple[bytes, bytes]:
    """Paths from `diff --git a/X b/Y`; exact when X == Y, else fixed later by other headers."""
    rest = line[len(b"diff --git "):].rstrip(b"\n")
    if rest.startswith(b'"'):
        end = rest.index(b'" ', 1) + 1
        old, new = _unquote(rest[:end]), _unquote(rest[end + 1:])
        return old[2:], new[2:]
    half = (len(rest) - 5) // 2
    if len(rest) % 2 == 1 and rest[2 + half:5 + half] == b" b/":
        return rest[2:2 + half], rest[5 + half:]
    old, _, new = rest.partition(b" b/")
    return old[2:], new


class _FileSection:
    __slots__ = ("old", "new", "binary", "added", "deleted", "chars", "in_hunks", "old_blob", "new_blob",
                 "track", "old_line", "new_line", "blocks", "block", "tracked")

    def __init__(self, line: bytes):
        self.old, self.new = _diff_git_paths(line)
        self.binary = False
        self.added = self.deleted = 0
        self.chars = 0
        self.in_hunks = False
        self.old_blob = self.new_blob = None
        # Line numbers are tracked for Python files only.
        self.track = line.rstrip(b"\n").rstrip(b'"').endswith(b".py")
        self.old_line = self.new_line = 0
        self.blocks: list[ChangeBlock] = []
        self.block: Optional[ChangeBlock] = None  # the run of -/+ lines being read
        self.tracked = 0

    def changed(self, deleted: bool) -> None:
        if self.block is None:
            self.block = ([], [])
            self.blocks.append(self.block)
        if deleted:
            self.block[0].append(self.old_line)
            self.old_line += 1
        else:
            self.block[1].append(self.new_line)
            self.new_line += 1
        self.tracked += 1
        if self.tracked >= MAX_TRACKED_LINES:
            self.track, self.blocks, self.block = False, [], None

    def hunk_start(self, line: bytes) -> None:
        old, new = line.split(b" ", 3)[1:3]
        self.old_line = int(old[1:].split(b",")[0])
        self.new_line = int(new[1:].split(b",")[0])
        self.block = None


def _add_section(commit: MinedCommit, section: _FileSection, rules: TestFileRules) -> None:
    path = _text(section.new if section.new is not None else section.old)
    stats = commit.stats
    stats.has_binary |= section.binary
    kind = rules.kind(path)
    if kind == "test":
        stats.test_file_count += 1
        if len(stats.test_files) < MAX_LISTED_FILES:
            stats.test_files.append(path)
        return
    stats.lines_added += section.added
    stats.lines_deleted += section.deleted
    stats.patch_chars += section.chars
    if kind == "source":
        stats.source_file_count += 1
        if len(stats.source_files) < MAX_LISTED_FILES:
            stats.source_files.append(path)
            commit.python_changes.append(PythonFileChange(
                old_path=None if section.old is None else _text(section.old),
                new_path=None if section.new is None else _text(section.new),
                old_blob=section.old_blob, new_blob=section.new_blob,
                blocks=section.blocks, complete=section.track,
            ))
    else:
        stats.other_file_count += 1
        if len(stats.other_files) < MAX_LISTED_FILES:
            stats.other_files.append(path)


def _parse_header(raw: bytes) -> MinedCommit:
    sha, parents, name, email, authored, committed, message = raw[len(_COMMIT_MARK):].split(b"\x00")[:_HEADER_FIELDS]
    parent_list = parents.split()
    return MinedCommit(
        sha=sha.decode(), parent_sha=parent_list[0].decode() if parent_list else "",
        author_name=_text(name), author_email=_text(email), authored_at=authored.decode(),
        committed_at=committed.decode(), message=_text(message).strip("\n"),
    )


def _line_chars(line: bytes) -> int:
    return len(line.decode("utf-8", "replace"))


def commits_walk(
    mirror_dir: Path, tip: str, *, exclude: tuple[str, ...] = (), rules: TestFileRules = TestFileRules(),
    max_count: Optional[int] = None,
) -> Iterator[MinedCommit]:
    """Yield the non-merge commits reachable from `tip` and not from `exclude`, newest first."""
    limit = [f"--max-count={max_count}"] if max_count else []
    args = ["git", *GIT_CONFIG, "log", "--no-merges", *limit, "--patch", "-U3", "--no-ext-diff", "--no-textconv",
            "--src-prefix=a/", "--dst-prefix=b/", f"--format={_LOG_FORMAT}", require_sha(tip),
            *[f"^{require_sha(sha)}" for sha in exclude], "--"]
    with git_environment() as env:
        proc = subprocess.Popen(args, cwd=mirror_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        chunks = _DrainedPipe(proc.stdout)
        try:
            yield from _parse_log(chunks.lines(), rules)
            proc.wait()
            if proc.returncode != 0:
                message = proc.stderr.read().decode("utf-8", "replace").strip()
                raise GitError("git_failed", message or "git log failed")
        finally:
            chunks.stop()
            proc.kill()
            proc.wait()
            chunks.join()
            proc.stdout.close()
            proc.stderr.close()


class _DrainedPipe:
    """Reads a pipe in a thread so the writer never waits while the reader works.

    The thread only moves bytes (it barely holds the GIL, so the consumer's own
    round trips to git and the database are not slowed); the chunks waiting are
    bounded, so memory is too."""

    _CHUNK = 256 << 10

    def __init__(self, pipe):
        self._pipe = pipe
        # While the consumer holds the GIL this thread waits up to a switch interval (5 ms) to
        # run again; a 64 KB pipe would stall git in the meantime, a 1 MB one rarely does.
        try:
            fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        except OSError:
            pass  # a smaller system limit: the default size still works, only slower
        self._chunks: queue.Queue = queue.Queue(maxsize=_QUEUED_CHUNKS)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._drain, name="git-output", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while chunk := self._pipe.read1(self._CHUNK):
            if not self._put(chunk):
                return
        self._put(b"")

    def _put(self, chunk: bytes) -> bool:
        while not self._stopped.is_set():
            try:
                self._chunks.put(chunk, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def lines(self) -> Iterator[bytes]:
        pending = b""
        while chunk := self._chunks.get():
            for line in io.BytesIO(pending + chunk):
                if line.endswith(b"\n"):
                    yield line
                else:
                    pending = line
                    break
            else:
                pending = b""
        if pending:
            yield pending

    def stop(self) -> None:
        self._stopped.set()

    def join(self) -> None:
        self._thread.join()


def _parse_log(stream, rules: TestFileRules) -> Iterator[MinedCommit]:
    commit: Optional[MinedCommit] = None
    section: Optional[_FileSection] = None
    header: Optional[bytes] = None
    for line in stream:
        if header is not None:
            header += line
            if header.count(b"\x00") > _HEADER_FIELDS:
                commit, header = _parse_header(header), None
            continue
        if line.startswith(_COMMIT_MARK):
            if section is not None:
                _add_section(commit, section, rules)
                section = None
            if commit is not None:
                yield commit
            commit, header = None, line
            if header.count(b"\x00") > _HEADER_FIELDS:
                commit, header = _parse_header(header), None
            continue
        if line.startswith(b"diff --git "):
            if section is not None:
                _add_section(commit, section, rules)
            section = _FileSection(line)
            section.chars = _line_chars(line)
            continue
        if section is None:
            continue
        section.chars += len(line) if line.isascii() else _line_chars(line)
        first = line[:1]
        if section.in_hunks:
            if first == b"+":
                section.added += 1
                if section.track:
                    section.changed(deleted=False)
            elif first == b"-":
                section.deleted += 1
                if section.track:
                    section.changed(deleted=True)
            elif first == b" ":
                section.old_line += 1
                section.new_line += 1
                section.block = None
            elif first == b"@":
                section.hunk_start(line)
        elif first == b"@":
            section.in_hunks = True
            section.hunk_start(line)
        elif line.startswith(b"index "):
            old_blob, _, new_blob = line[6:].split(b" ", 1)[0].rstrip(b"\n").partition(b"..")
            section.old_blob = None if old_blob.strip(b"0") == b"" else old_blob.decode()
            section.new_blob = None if new_blob.strip(b"0") == b"" else new_blob.decode()
        elif line.startswith(b"--- "):
            section.old = _header_path(line[4:], b"a/")
        elif line.startswith(b"+++ "):
            section.new = _header_path(line[4:], b"b/")
        elif line.startswith(b"new file mode"):
            section.old = None
        elif line.startswith(b"deleted file mode"):
            section.new = None
        elif line.startswith(b"rename from "):
            section.old = _unquote(line[12:].rstrip(b"\n"))
        elif line.startswith(b"rename to "):
            section.new = _unquote(line[10:].rstrip(b"\n"))
        elif line.startswith((b"Binary files ", b"GIT binary patch")):
            section.binary = True
    if section is not None:
        _add_section(commit, section, rules)
    if commit is not None:
        yield commit


def python_change_check(blobs: BlobReader, commit: MinedCommit) -> bool:
    """Whether any non-test .py file changes beyond comments and docstrings."""
    changes = commit.python_changes
    if not all(change.complete for change in changes):
        return True
    # A pure rename has no index line: read the file by its paths then.
    sides = [
        (change.old_blob or (change.old_path and commit.parent_sha and f"{commit.parent_sha}:{change.old_path}"),
         change.new_blob or (change.new_path and f"{commit.sha}:{change.new_path}"))
        for change in changes
    ]
    names = [name for pair in sides for name in pair if name]
    try:
        found = dict(zip(names, blobs.read_objects(names)))
    except ValueError:
        return True
    if any(data is None for data in found.values()):
        return True  # a side that cannot be read proves nothing: count the change
    return any(
        is_semantic_python_change(found[old] if old else b"", found[new] if new else b"", change.blocks)
        for change, (old, new) in zip(changes, sides)
    )
