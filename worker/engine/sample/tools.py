"""The agent's tools: list, read, search, replace and write run in this process on a working copy that
may be hostile; commands run in the sandbox, through a runner made here.

A path is relative to the working copy's root and is refused when it starts at `/`, climbs out with
`..` or goes into `.git`. Every component is opened without following a link, so a link the
repository (or a command) planted leads nowhere. What is read, listed and searched is capped, and a
regular expression is refused when its search time could blow up (REGEX_REPEATS).
"""

import os
import re
import re._parser as regex_parser  # the standard library's parse tree of a pattern: no public equivalent
import stat
import time
from collections import deque
from pathlib import Path, PurePosixPath
from typing import Callable, Optional

from worker.engine.env.builder import BuiltEnvironment, EnvironmentBuilder
from worker.engine.env.files import environment_files_lay
from worker.engine.env.recipes import ENV, REPO
from worker.engine.sandbox.base import SANDBOX_PATH, Limits, sandbox_file_create, sandbox_file_open

LIST_ENTRIES = 300
READ_BYTES = 1 << 20  # a file larger than this is read up to here
EDIT_BYTES = 1 << 20  # a file larger than this is not edited
SEARCH_FILE_BYTES = 256 << 10  # larger files are not searched
SEARCH_FILES = 5_000
SEARCH_MATCHES = 40
SEARCH_SECONDS = 5.0
SEARCH_LINE_CHARS = 300  # each line is searched and shown up to here: a pattern's time grows with it
REGEX_REPEATS = 3  # repetitions in a pattern, at most (with 3, a 300-character line takes under a second)
SKIPPED_FOLDERS = frozenset({".git", "__pycache__", ".pytest_cache"})
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW

CommandRunner = Callable[[str], tuple[Optional[int], str]]


class Refused(Exception):
    """What the agent asked cannot be done; the message says why, for the observation."""


def path_parts(path: str) -> tuple[str, ...]:
    """The components of a path the tools accept ("" and "." are the root)."""
    if "\0" in path or "\n" in path:
        raise Refused("a path holds no NUL or newline character")
    if path.startswith("/"):
        raise Refused(f"{path}: paths are relative to the repository's root (no leading /)")
    parts = tuple(part for part in PurePosixPath(path).parts if part != ".")
    if ".." in parts:
        raise Refused(f"{path}: a path may not climb out of the repository with ..")
    if any(part.lower() == ".git" for part in parts):
        raise Refused(f"{path}: .git is off limits")
    return parts


def _folder_open(repo: Path, parts: tuple[str, ...]) -> int:
    """A descriptor of the folder `parts` below `repo`, no link followed on the way (OSError if none)."""
    folder = os.open(repo, _FOLDER)
    try:
        for part in parts:
            below = os.open(part, _FOLDER, dir_fd=folder)
            os.close(folder)
            folder = below
    except OSError:
        os.close(folder)
        raise
    return folder


def _walk(repo: Path, parts: tuple[str, ...], limit: int, depth: Optional[int] = None
          ) -> tuple[list[tuple[str, str]], bool]:
    """(path, "file" | "dir" | "link" | "other") below the folder `parts`, breadth first, caches and
    .git skipped, at most `limit`; and whether there were more."""
    found: list[tuple[str, str]] = []
    queue = deque([parts])
    while queue:
        folder = queue.popleft()
        fd = _folder_open(repo, folder)
        try:  # the kinds are read while the folder is open: an entry may need a stat below it
            entries = sorted((entry.name, _kind(entry)) for entry in os.scandir(fd)
                             if entry.name not in SKIPPED_FOLDERS and "\n" not in entry.name)
        finally:
            os.close(fd)
        for name, kind in entries:
            if len(found) == limit:
                return found, True
            found.append(("/".join((*folder, name)), kind))
            if kind == "dir" and (depth is None or len(folder) + 1 < depth):
                queue.append((*folder, name))
    return found, False


def _kind(entry: os.DirEntry) -> str:
    if entry.is_symlink():
        return "link"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    return "file" if entry.is_file(follow_symlinks=False) else "other"


def files_list(repo: Path, folder: str = "", *, limit: int = LIST_ENTRIES, depth: Optional[int] = None) -> str:
    parts = path_parts(folder)
    try:
        entries, more = _walk(repo, parts, limit, depth)
    except OSError:
        raise Refused(f"{folder}: no such folder in the repository (links are not followed)") from None
    marks = {"file": "", "dir": "/", "link": "@ (a link, not followed)", "other": " (not a plain file)"}
    lines = [path + marks[kind] for path, kind in entries]
    if more:
        lines.append(f"[... more than {limit} entries: list a folder below to see the rest]")
    return "\n".join(lines) or "(an empty folder)"


def _read(repo: Path, path: str, max_bytes: int) -> bytes:
    """Up to `max_bytes` + 1 bytes of a plain file (one more tells it was larger)."""
    path_parts(path)
    with sandbox_file_open(repo, path) as file:
        if file is None:
            raise Refused(f"{path}: no such plain file in the repository (links are not followed)")
        return file.read(max_bytes + 1)


def _text(data: bytes, path: str) -> str:
    if b"\0" in data:
        raise Refused(f"{path}: a binary file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(f"{path}: not UTF-8 text") from None


def file_read(repo: Path, path: str, first: int = 1, last: Optional[int] = None, *, chars: int = 4000) -> str:
    """Lines `first` to `last` of a text file (as many as fit `chars`), with where they sit in it."""
    data = _read(repo, path, READ_BYTES)
    lines = _text(data[:READ_BYTES], path).splitlines()
    first = max(first, 1)
    last = min(last or len(lines), len(lines))
    shown, size = [], 0
    for line in lines[first - 1:last]:
        size += len(line) + 1
        if shown and size > chars:
            break
        shown.append(line)
    end = first + len(shown) - 1
    cut = f" (the file goes on past {READ_BYTES >> 20} MB, not read)" if len(data) > READ_BYTES else ""
    header = f"{path}: lines {first}-{end} of {len(lines)}{cut}" if shown else f"{path}: {len(lines)} lines{cut}"
    more = f"\n[... read on with: ACTION: read_file {path} {end + 1}]" if end < last else ""
    return header + "\n" + "\n".join(shown) + more


def regex_compile(pattern: str) -> re.Pattern:
    """The pattern, if its search time stays bounded: at most REGEX_REPEATS repetitions, none inside
    another or around alternatives, no back-reference."""
    try:
        tree = regex_parser.parse(pattern)
        compiled = re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as error:
        raise Refused(f"not a regular expression: {error}") from None
    if _repetitions(tree, inside=False) > REGEX_REPEATS:
        raise Refused(f"a pattern may hold at most {REGEX_REPEATS} repetitions (*, +, ?, {{m,n}}): search a "
                      "plainer text")
    return compiled


def _repetitions(items, *, inside: bool) -> int:
    count = 0
    for op, value in items:
        name = str(op)
        if name.startswith("GROUPREF"):
            raise Refused("a pattern with a back-reference is not searched")
        if name in _REPEATS:
            if inside:
                raise Refused("a repetition inside a repetition is not searched: search a plainer text")
            count += 1 + _repetitions(value[2], inside=True)
        elif name == "BRANCH":
            if inside:
                raise Refused("alternatives inside a repetition are not searched: search a plainer text")
            count += sum(_repetitions(branch, inside=inside) for branch in value[1])
        elif name == "SUBPATTERN":
            count += _repetitions(value[3], inside=inside)
        elif name in ("ASSERT", "ASSERT_NOT"):
            count += _repetitions(value[1], inside=inside)
        elif name == "ATOMIC_GROUP":
            count += _repetitions(value, inside=inside)
    return count


def text_search(repo: Path, pattern: str, *, regex: bool = False, clock: Callable[[], float] = time.monotonic
                ) -> str:
    """`path:line: text` for each line of the repository's text files holding `pattern`."""
    if not pattern:
        raise Refused("give the text to search for")
    matches = regex_compile(pattern).search if regex else (lambda line: pattern in line)
    files, more_files = _walk(repo, (), SEARCH_FILES)
    deadline = clock() + SEARCH_SECONDS
    found, skipped, stopped = [], 0, ""
    for path, kind in files:
        text = _searchable(repo, path) if kind == "file" else ""
        if text is None:
            skipped += 1
            continue
        for number, line in enumerate(text.split("\n") if text else (), start=1):
            if clock() > deadline:  # each line: a pattern may take long on one
                stopped = f"[... the search stopped after {SEARCH_SECONDS:.0f} s]"
                break
            line = line[:SEARCH_LINE_CHARS]
            if matches(line):
                found.append(f"{path}:{number}: {line.strip()}")
                if len(found) == SEARCH_MATCHES:
                    stopped = f"[... more than {SEARCH_MATCHES} matches: search a longer text]"
                    break
        if stopped:
            break
    notes = [stopped] if stopped else []
    if more_files:
        notes.append(f"[only the first {SEARCH_FILES} files were searched]")
    if skipped:
        notes.append(f"[{skipped} binary files or files over {SEARCH_FILE_BYTES >> 10} KB were not searched]")
    return "\n".join(found + notes) if found else "\n".join(["no match", *notes])


def _searchable(repo: Path, path: str) -> Optional[str]:
    with sandbox_file_open(repo, path) as file:
        if file is None or os.fstat(file.fileno()).st_size > SEARCH_FILE_BYTES:
            return None
        data = file.read(SEARCH_FILE_BYTES + 1)
    if len(data) > SEARCH_FILE_BYTES or b"\0" in data:
        return None
    return data.decode("utf-8", "replace")


def text_replace(repo: Path, path: str, old: str, new: str) -> str:
    """`old`, found once and exactly in the file, made `new`."""
    if not old:
        raise Refused("the first block, the text to replace, is empty")
    data = _read(repo, path, EDIT_BYTES)
    if len(data) > EDIT_BYTES:
        raise Refused(f"{path}: larger than {EDIT_BYTES >> 20} MB, not edited here")
    text = _text(data, path)
    found = text.count(old)
    if found == 0:
        hint = " (the lines are there with other indentation or spaces: copy them exactly)" \
            if _squeezed(old) in _squeezed(text) else ""
        raise Refused(f"{path}: the text of the first block is not in the file{hint}; read the file and copy "
                      "the lines to change exactly")
    if found > 1:
        raise Refused(f"{path}: the text of the first block is there {found} times: add lines around it so that "
                      "it is there once")
    if old == new:
        raise Refused("the two blocks are the same: nothing to change")
    file_replace(repo, path, text.replace(old, new, 1))
    return f"{path}: replaced {_lines(old)} lines by {_lines(new)}"


def _lines(text: str) -> int:
    return text.count("\n") + 1


def _squeezed(text: str) -> str:
    return " ".join(text.split())


def file_write(repo: Path, path: str, text: str) -> str:
    """A whole file, new or replacing a plain file's text."""
    parts = path_parts(path)
    if not parts:
        raise Refused("give the path of the file to write")
    data = text.encode("utf-8", "replace")
    if len(data) > EDIT_BYTES:
        raise Refused(f"larger than {EDIT_BYTES >> 20} MB: not written")
    if sandbox_file_create(repo, path, data):
        return f"{path}: written, a new file of {len(text.splitlines())} lines"
    file_replace(repo, path, text)
    return f"{path}: written, {len(text.splitlines())} lines"


def file_replace(repo: Path, path: str, text: str) -> None:
    """The new text of a plain file, written beside it and renamed over it (its mode kept), no link
    followed; Refused when a link, a folder or nothing stands there."""
    parts = path_parts(path)
    try:
        folder = _folder_open(repo, parts[:-1])
    except OSError:
        raise Refused(f"{path}: its folder is not in the repository (links are not followed)") from None
    name, spare = parts[-1], f".{parts[-1]}.agent-{os.getpid()}-{time.monotonic_ns()}"
    try:
        try:
            mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
        except FileNotFoundError:
            mode = None
        if mode is None or not stat.S_ISREG(mode):
            raise Refused(f"{path}: not a plain file (a link, a folder or something else stands there)")
        fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder)
        with os.fdopen(fd, "wb") as file:
            file.write(text.encode("utf-8", "replace"))
            os.fchmod(file.fileno(), stat.S_IMODE(mode))
        os.replace(spare, name, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(folder)


def sandbox_command_runner(builder: EnvironmentBuilder, environment: BuiltEnvironment, repo: Path,
                           limits: Limits) -> CommandRunner:
    """Runs a command with bash in the environment's sandbox, with no network: the working copy `repo`
    is its only writable place, seen where the environment was installed against (REPO), with the
    environment's interpreter first on PATH. The files the environment's install generated are laid
    into `repo` here: make the runner before the loop starts, so the patch leaves them out."""
    sandbox = builder.environment_sandbox(environment)
    environment_files_lay(environment.path, repo)
    env = {"PATH": f"{ENV}/bin:{SANDBOX_PATH}", "VIRTUAL_ENV": ENV}

    def run(command: str) -> tuple[Optional[int], str]:
        result = sandbox.run(["bash", "-c", command], workdir=repo, network=False, limits=limits, env=env,
                             mount_at=REPO, cwd=REPO)
        output = result.output.decode("utf-8", "replace")
        if result.status not in ("ok", "failed"):
            output += f"\n[the sandbox stopped it: {result.status}, after {result.seconds:.0f} s]"
        return result.exit_code, output

    return run
