"""Walk a repository's history in one streaming `git log -p` and measure each commit.

One git process writes every commit's diff. This module takes git's output in
runs of whole lines and works on each file's part of the diff with bytes
methods (find, count) rather than line by line in Python, which cost several
times git's own work. It keeps counters, file names (at most MAX_LISTED_FILES)
and, for commits short enough to need the Python check, the hunks of their
Python files, so memory does not grow with history and stays bounded for any
one commit.
"""

import queue
import re
import subprocess
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from worker.engine.git.headers import diff_git_paths, path_unquoted
from worker.engine.git.repo import GIT_CONFIG, BlobReader, GitError, git_environment, pipe_enlarge, require_sha
from worker.engine.mine.filters import CommitStats
from worker.engine.mine.python_change import ChangeBlock, LineEdit, edit_is_semantic, is_semantic_python_change
from worker.engine.test_files import TestFileRules

_COMMIT_MARK = b"\x00\x01"
_HEADER_FIELDS = 7  # sha, parents, author name, author email, author date, committer date, message
LOG_FORMAT = "%x00%x01%H%x00%P%x00%an%x00%ae%x00%aI%x00%cI%x00%B%x00"
_BOUNDARIES = (_COMMIT_MARK, b"diff --git ")  # the lines that start a commit or a file's diff
_BOUNDARY_AFTER_NEWLINE = re.compile(b"\n(?:\x00\x01|diff --git )")
_QUEUED_CHUNKS = 32  # chunks of git's output read ahead (at most 8 MB)
_LONG_LINE = 64 << 10  # a line longer than this is passed on in parts
_KNOWN_PATHS = 100_000  # paths whose kind is remembered during a walk
# Stored file lists are capped; the counts stay exact.
MAX_LISTED_FILES = 1000
# Python hunks are kept while the commit's diff is at most this long; past it the change counts as semantic unread.
MAX_KEPT_CHARS = 1_000_000
# Files larger than this are never read whole: git diffs them as binary, and a commit changing one is dropped.
MAX_BLOB_BYTES = 5 << 20


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
    binary_blobs: list[str] = field(default_factory=list)  # of files git diffed as binary (the first few)
    merge: bool = False  # more than one parent: no diff of its own, dropped as merge_commit


@dataclass
class PythonFileChange:
    """A non-test .py file's change: its paths (None where the file did not exist) and its hunks."""

    old_path: Optional[str]
    new_path: Optional[str]
    old_blob: Optional[str]  # abbreviated blob ids from the diff's index line
    new_blob: Optional[str]
    hunks: bytes  # the file's part of the diff from its first "@@" line on
    complete: bool = True  # False when the hunks were not kept: the commit's diff was too long

    @property
    def edits(self) -> list[LineEdit]:
        return _line_edits(self.hunks)

    @property
    def blocks(self) -> list[ChangeBlock]:
        """Runs of changed lines: (line numbers in the old file, in the new file)."""
        return [edit.numbers for edit in self.edits]


def _line_edits(hunks: bytes) -> list[LineEdit]:
    edits: list[LineEdit] = []
    edit: Optional[LineEdit] = None
    old_line = new_line = 0
    for line in hunks.split(b"\n"):
        first = line[:1]
        if first == b"-" or first == b"+":
            if edit is None:
                edit = LineEdit(old_at=old_line, new_at=new_line, deleted=[], added=[])
                edits.append(edit)
            if first == b"-":
                edit.deleted.append(line[1:])
                old_line += 1
            else:
                edit.added.append(line[1:])
                new_line += 1
        elif first == b" ":
            old_line += 1
            new_line += 1
            edit = None
        elif first == b"@":
            # An empty range names the line before it.
            (old_line, old_count), (new_line, new_count) = _hunk_ranges(line)
            old_line, new_line = old_line + (old_count == 0), new_line + (new_count == 0)
            edit = None
    return edits


def _hunk_ranges(line: bytes) -> tuple[tuple[int, int], tuple[int, int]]:
    """(start, count) in the old and the new file from `@@ -start,count +start,count @@`
    (a count left out is 1)."""
    old, new = line.split(b" ", 3)[1:3]
    return tuple((int(start), int(count or b"1")) for start, _, count in
                 (side[1:].partition(b",") for side in (old, new)))


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").replace("\x00", "")


def _written_text(raw: bytes) -> str:
    """A commit's message or author as people wrote it. git has already re-encoded what an encoding
    header declared; bytes that are still not UTF-8 are read as Latin-1, which real histories
    without that header hold (and which never fails), not as U+FFFD."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return text.replace("\x00", "")


def _chars(raw: bytes) -> int:
    return len(raw) if raw.isascii() else len(raw.decode("utf-8", "replace"))


def _header_path(rest: bytes, prefix: bytes) -> Optional[bytes]:
    rest = rest.rstrip(b"\n").rstrip(b"\t")
    if rest == b"/dev/null":
        return None
    rest = path_unquoted(rest)
    return rest[len(prefix):] if rest.startswith(prefix) else rest


class _FileSection:
    """One file's part of a commit's diff, taken in pieces as git writes it."""

    __slots__ = ("old", "new", "paths_known", "binary", "added", "deleted", "chars", "in_hunks", "old_blob",
                 "new_blob", "hunks", "keep_chars")

    def __init__(self, line: bytes, keep_chars: int):
        self.old, self.new = diff_git_paths(line)
        # One path on both sides is exact; then the "---"/"+++" lines say nothing the mode lines do not.
        self.paths_known = self.old == self.new
        self.binary = False
        self.added = self.deleted = 0
        self.chars = _chars(line)
        self.in_hunks = False
        self.old_blob = self.new_blob = None
        # Hunks are kept for Python files only, and only while the commit's diff is short enough.
        self.hunks: Optional[list[bytes]] = [] if line.rstrip(b"\n").rstrip(b'"').endswith(b".py") else None
        self.keep_chars = keep_chars

    def feed(self, piece: bytes, line_start: bool) -> None:
        """More of the section; `line_start` says whether the piece begins a line."""
        self.chars += _chars(piece)
        if not self.in_hunks:
            at = 0 if line_start and piece.startswith(b"@@") else (piece.find(b"\n@@") + 1 or len(piece))
            self._header_lines(piece[:at], line_start)
            if at == len(piece):
                return
            self.in_hunks, piece, line_start = True, piece[at:], True
        if line_start:
            self.added += piece.startswith(b"+")
            self.deleted += piece.startswith(b"-")
        self.added += piece.count(b"\n+")
        self.deleted += piece.count(b"\n-")
        if self.hunks is not None:
            if self.chars > self.keep_chars:
                self.hunks = None
            else:
                self.hunks.append(piece)

    def _header_lines(self, text: bytes, line_start: bool) -> None:
        lines = text.split(b"\n")
        for line in lines if line_start else lines[1:]:  # the rest of a line begun earlier is no header
            first = line[:1]
            if first == b"i" and line.startswith(b"index "):
                old_blob, _, new_blob = line[6:].split(b" ", 1)[0].partition(b"..")
                self.old_blob = None if old_blob.strip(b"0") == b"" else old_blob.decode()
                self.new_blob = None if new_blob.strip(b"0") == b"" else new_blob.decode()
            elif first == b"-" or first == b"+":
                if not self.paths_known:
                    self._path_line(line)
            elif first and first in b"ndrBG":
                self._rare_header_line(line)

    def _path_line(self, line: bytes) -> None:
        if line.startswith(b"--- "):
            self.old = _header_path(line[4:], b"a/")
        elif line.startswith(b"+++ "):
            self.new = _header_path(line[4:], b"b/")

    def _rare_header_line(self, line: bytes) -> None:
        if line.startswith(b"new file mode"):
            self.old = None
        elif line.startswith(b"deleted file mode"):
            self.new = None
        elif line.startswith(b"rename from "):
            self.old = path_unquoted(line[12:])
        elif line.startswith(b"rename to "):
            self.new = path_unquoted(line[10:])
        elif line.startswith((b"Binary files ", b"GIT binary patch")):
            self.binary = True

    def python_change(self, old: Optional[str], new: Optional[str]) -> "PythonFileChange":
        return PythonFileChange(
            old_path=old, new_path=new, old_blob=self.old_blob, new_blob=self.new_blob,
            hunks=b"".join(self.hunks or ()), complete=self.hunks is not None,
        )


def _add_section(commit: MinedCommit, section: _FileSection, path: str, kind: str) -> None:
    stats = commit.stats
    stats.has_binary |= section.binary
    if section.binary and len(commit.binary_blobs) < MAX_LISTED_FILES:
        commit.binary_blobs += [blob for blob in (section.new_blob, section.old_blob) if blob]
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
            commit.python_changes.append(section.python_change(
                None if section.old is None else _text(section.old),
                None if section.new is None else _text(section.new),
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
        author_name=_written_text(name), author_email=_written_text(email), authored_at=authored.decode(),
        committed_at=committed.decode(), message=_written_text(message).strip("\n"), merge=len(parent_list) > 1,
    )


def commits_walk(
    mirror_dir: Path, tip: str, *, exclude: tuple[str, ...] = (), rules: TestFileRules = TestFileRules(),
    max_count: Optional[int] = None, hunks_up_to: int = MAX_KEPT_CHARS, max_blob_bytes: int = MAX_BLOB_BYTES,
) -> Iterator[MinedCommit]:
    """Yield the commits reachable from `tip` and not from `exclude`, newest first; merges come
    with no diff (git shows none for them), marked `merge`.

    Python hunks (for `python_changes_checked`) are kept for commits whose diff (its
    non-test part) is at most `hunks_up_to` characters: a caller whose filters
    drop longer commits need not hold them. git diffs a file over `max_blob_bytes` as
    binary without reading it whole; such a commit has `stats.has_large_file`."""
    limit = [f"--max-count={max_count}"] if max_count else []
    args = ["git", *GIT_CONFIG, "-c", f"core.bigFileThreshold={max_blob_bytes}", "log", *limit,
            "--patch", "-U3", "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/",
            f"--format={LOG_FORMAT}", require_sha(tip), *[f"^{require_sha(sha)}" for sha in exclude], "--"]
    parser = LogParser(rules, min(hunks_up_to, MAX_KEPT_CHARS))
    # git's errors go to a file: a pipe read only at the end could fill (a warning per path) and stop git.
    with git_environment() as env, BlobSizes(mirror_dir) as sizes, tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(args, cwd=mirror_dir, env=env, stdout=subprocess.PIPE, stderr=errors)
        chunks = _DrainedPipe(proc.stdout)
        try:
            for run in chunks.runs():
                yield from _sizes_checked(parser.feed(run), sizes, max_blob_bytes)
            yield from _sizes_checked(parser.finish(), sizes, max_blob_bytes)
            proc.wait()
            if proc.returncode != 0:
                errors.seek(0)
                raise GitError("git_failed", _git_log_failure(proc.returncode, errors.read(4000)))
        finally:
            chunks.stop()
            proc.kill()
            proc.wait()
            chunks.join()
            proc.stdout.close()


def _sizes_checked(commits: list[MinedCommit], sizes: "BlobSizes", max_blob_bytes: int) -> list[MinedCommit]:
    for commit in commits:
        if commit.binary_blobs:
            commit.stats.has_large_file = any(size > max_blob_bytes for size in sizes.of(commit.binary_blobs))
    return commits


def _git_log_failure(returncode: int, stderr: bytes) -> str:
    message = stderr.decode("utf-8", "replace").strip()
    if returncode < 0:
        return (f"git log stopped on signal {-returncode} while reading the history (a tree nested "
                f"thousands of folders deep does this).")
    return message or f"git log failed (exit {returncode})"


class BlobSizes:
    """Sizes of objects, from one `git cat-file --batch-check` started when first asked."""

    def __init__(self, mirror_dir: Path):
        self._mirror_dir, self._proc = mirror_dir, None

    def __enter__(self) -> "BlobSizes":
        return self

    def __exit__(self, *exc) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc.stdin.close()
            self._proc.stdout.close()

    def of(self, names: list[str]) -> list[int]:
        """Each object's size in bytes (0 where there is no such object)."""
        if self._proc is None:
            with git_environment() as env:
                self._proc = subprocess.Popen(["git", *GIT_CONFIG, "cat-file", "--batch-check"], cwd=self._mirror_dir,
                                              env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=subprocess.DEVNULL)
        sizes = []
        for name in names:
            if "\n" in name:
                sizes.append(0)
                continue
            self._proc.stdin.write(name.encode() + b"\n")
            self._proc.stdin.flush()
            fields = self._proc.stdout.readline().split()
            sizes.append(int(fields[2]) if len(fields) == 3 and fields[2].isdigit() else 0)
        return sizes


class _DrainedPipe:
    """Reads a pipe in a thread so the writer never waits while the reader works.

    The thread only moves bytes (it barely holds the GIL, so the consumer's own
    round trips to git and the database are not slowed); the chunks waiting are
    bounded, so memory is too."""

    _CHUNK = 256 << 10
    # After a read that found little, the next waits this long: git's output gathers in the pipe
    # meanwhile. Woken by each of git's writes instead (one a commit), this thread took git's core
    # from it thousands of times a walk, and git took 10 to 15% longer than alone.
    _GATHER_SECONDS = 0.002

    def __init__(self, pipe):
        self._pipe = pipe
        # While the consumer holds the GIL this thread waits up to a switch interval (5 ms) to
        # run again; a 64 KB pipe would stall git in the meantime, a 1 MB one rarely does (git
        # fills it in 25 ms at the least), nor does the wait above.
        self._gather = self._GATHER_SECONDS if pipe_enlarge(pipe) >= 1 << 20 else 0.0
        self._chunks: queue.Queue = queue.Queue(maxsize=_QUEUED_CHUNKS)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._drain, name="git-output", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while chunk := self._pipe.read1(self._CHUNK):
            if not self._put(chunk):
                return
            if self._gather and len(chunk) < self._CHUNK // 4:
                time.sleep(self._gather)
        self._put(b"")

    def _put(self, chunk: bytes) -> bool:
        while not self._stopped.is_set():
            try:
                self._chunks.put(chunk, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def runs(self) -> Iterator[bytes]:
        """The output in runs that end where a line ends, except within a very long line."""
        return line_runs(iter(self._chunks.get, b""))

    def stop(self) -> None:
        self._stopped.set()

    def join(self) -> None:
        self._thread.join()


def line_runs(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Chunks cut anywhere, as runs that end where a line ends; a line longer than _LONG_LINE
    is passed on in parts, each ending between two UTF-8 characters."""
    pending = b""
    for chunk in chunks:
        data = pending + chunk if pending else chunk
        cut = data.rfind(b"\n") + 1
        if len(data) - cut > _LONG_LINE:
            cut = _utf8_boundary(data)
        if cut:
            yield data[:cut]
        pending = data[cut:]
    if pending:
        yield pending


def _utf8_boundary(data: bytes) -> int:
    """The end of `data`, or where its last character begins if `data` ends inside it."""
    end = len(data)
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte < 0x80:
            return end
        if byte >= 0xC0:  # the first byte of a character of 2, 3 or 4 bytes
            size = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return end if back >= size else end - back
    return end


class LogParser:
    """Turns git's output, fed in runs, into MinedCommits."""

    def __init__(self, rules: TestFileRules, hunks_up_to: int):
        self.rules, self.hunks_up_to = rules, hunks_up_to
        self.kinds: dict[bytes, tuple[str, str]] = {}  # a path's text and kind, for paths seen before
        self.commit: Optional[MinedCommit] = None
        self.header: Optional[bytearray] = None  # a commit's header while it is read
        self.header_nuls = 0
        self.section: Optional[_FileSection] = None
        self.line_start = True  # whether the next run begins a line

    def feed(self, data: bytes) -> list[MinedCommit]:
        """The commits that ended in this run."""
        ended = []
        pos, end = 0, len(data)
        while pos < end:
            if self.header is not None:
                pos = self._header_feed(data, pos)
                continue
            line_start = data[pos - 1] == 10 if pos else self.line_start
            if line_start and data.startswith(_BOUNDARIES, pos):
                stop = pos
            else:
                found = _BOUNDARY_AFTER_NEWLINE.search(data, pos)
                stop = found.start() + 1 if found else end
            if stop > pos and self.section is not None:
                self.section.feed(data[pos:stop], line_start)
            if stop == end:
                break
            self._section_end()
            if data.startswith(_COMMIT_MARK, stop):
                if self.commit is not None:
                    ended.append(self.commit)
                self.commit, self.header, self.header_nuls = None, bytearray(), 0
                pos = stop
            else:
                pos = data.find(b"\n", stop) + 1 or end
                self.section = _FileSection(data[stop:pos], self.hunks_up_to - self.commit.stats.patch_chars)
        self.line_start = data.endswith(b"\n")
        return ended

    def finish(self) -> list[MinedCommit]:
        self._section_end()
        return [self.commit] if self.commit is not None else []

    def _header_feed(self, data: bytes, pos: int) -> int:
        """Read the header up to its last field's NUL; return where it ended (or the run's end)."""
        at = pos
        while self.header_nuls <= _HEADER_FIELDS:
            nul = data.find(b"\x00", at)
            if nul < 0:
                self.header += data[pos:]
                return len(data)
            self.header_nuls += 1
            at = nul + 1
        self.header += data[pos:at]
        self.commit, self.header = _parse_header(bytes(self.header)), None
        return at

    def _section_end(self) -> None:
        section = self.section
        if section is None:
            return
        raw = section.new if section.new is not None else section.old
        known = self.kinds.get(raw)
        if known is None:
            if len(self.kinds) >= _KNOWN_PATHS:
                self.kinds.clear()
            path = _text(raw)
            known = self.kinds[raw] = (path, self.rules.kind(path))
        _add_section(self.commit, section, *known)
        self.section = None


_CHECK_AHEAD = 200  # commits whose files git reads while the walk goes on


def python_changes_checked(
    commits: Iterable[MinedCommit], blobs: BlobReader, *,
    needs_check: Callable[[MinedCommit], bool] = lambda commit: True,
) -> Iterator[MinedCommit]:
    """The commits, in order, with `stats.python_change` filled in for those that `needs_check`:
    whether any non-test .py file changes beyond comments and docstrings.

    Each commit's files are asked of git _CHECK_AHEAD commits before they are
    needed, so git reads them while the walk goes on rather than one round trip
    at a time, which would cost more than the check itself. Only one side of a
    file is read: the other is rebuilt from it and the diff."""
    window: deque[tuple[MinedCommit, Optional[list[str]]]] = deque()
    for commit in commits:
        names = [_side_name(commit, change) for change in commit.python_changes] if needs_check(commit) else None
        if names and _hunks_complete(commit) and not any("\n" in name for name in names):
            blobs.ask(names)
        window.append((commit, names))
        if len(window) > _CHECK_AHEAD:
            yield _python_checked(blobs, *window.popleft())
    while window:
        yield _python_checked(blobs, *window.popleft())


def _hunks_complete(commit: MinedCommit) -> bool:
    return all(change.complete for change in commit.python_changes)


def _side_name(commit: MinedCommit, change: PythonFileChange, *, before: bool = False) -> str:
    """The object name of the file after the commit (before it, if asked or if the commit deleted
    the file). A pure rename has no index line: the file is read by its path then."""
    if before or change.new_path is None:
        return change.old_blob or f"{commit.parent_sha}:{change.old_path}"
    return change.new_blob or f"{commit.sha}:{change.new_path}"


def _python_checked(blobs: BlobReader, commit: MinedCommit, names: Optional[list[str]]) -> MinedCommit:
    if names is not None:
        commit.stats.python_change = _python_change(blobs, commit, names)
    return commit


def _python_change(blobs: BlobReader, commit: MinedCommit, names: list[str]) -> bool:
    if not _hunks_complete(commit) or any("\n" in name for name in names):
        return True
    for change, data in zip(commit.python_changes, blobs.read_objects(names)):
        edits = change.edits
        if change.new_path is None:
            old, new = data, b""
        else:
            new = data
            known = None if change.old_path is None or new is None else edit_is_semantic(new, edits)
            if known is not None:  # told from the diff and the file after it
                if known:
                    return True
                continue
            old = b"" if change.old_path is None or new is None else file_before_change(new, change.hunks)
            if old is None and new is not None and commit.parent_sha:
                (old,) = blobs.read_objects([_side_name(commit, change, before=True)])
        if old is None or new is None:
            return True  # a side that cannot be read proves nothing: count the change
        if is_semantic_python_change(old, new, [edit.numbers for edit in edits]):
            return True
    return False


def file_before_change(after: bytes, hunks: bytes) -> Optional[bytes]:
    """The file before the change, rebuilt from the file after it and the change's hunks;
    None where the two do not agree."""
    lines = after.split(b"\n")
    before: list[bytes] = []
    at = 0  # lines of `after` used so far
    previous = b""  # the kind of the line before a "\\ No newline at end of file"
    before_ends_bare = after_ends_bare = False
    for line in hunks.split(b"\n"):
        first = line[:1]
        if first == b" " or first == b"+":
            if at >= len(lines) or lines[at] != line[1:]:
                return None
            if first == b" ":
                before.append(lines[at])
            at += 1
        elif first == b"-":
            before.append(line[1:])
        elif first == b"@":
            _, (start, count) = _hunk_ranges(line)
            hunk_at = start - (count != 0)  # an empty range names the line before it
            if hunk_at < at:
                return None
            before.extend(lines[at:hunk_at])
            at = hunk_at
        elif first == b"\\":
            before_ends_bare |= previous in (b"-", b" ")
            after_ends_bare |= previous == b"+"
        previous = first
    before.extend(lines[at:])
    text = b"\n".join(before)
    if before_ends_bare and text.endswith(b"\n"):
        return text[:-1]
    if after_ends_bare and not before_ends_bare and not text.endswith(b"\n"):
        return text + b"\n"
    return text
