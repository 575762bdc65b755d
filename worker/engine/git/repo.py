"""git as a subprocess: mirrors, credentials, and reading objects.

Credentials never appear on a command line, in a URL git sees, or in an
error message: tokens go through GIT_ASKPASS, SSH keys through a private
temporary file, and every message is redacted before it leaves this module.
"""

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from collections import OrderedDict, deque
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

# Settings that make git's output the same whatever the user's configuration.
GIT_CONFIG = (
    "-c", "core.quotePath=false",
    "-c", "color.ui=never",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "diff.renames=true",
    "-c", "log.showSignature=false",
    "-c", "core.pager=cat",
    "-c", "credential.helper=",  # the operator's stored credentials are never offered, nor ours stored
)

_ASKPASS = """#!/bin/sh
case "$1" in
  Username*) printf '%s\\n' "$COMMITGYM_GIT_USERNAME" ;;
  *) printf '%s\\n' "$COMMITGYM_GIT_PASSWORD" ;;
esac
"""


class GitError(Exception):
    """A git operation failed; `code` is a reason code, the message is safe to show."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


_SHA = re.compile(r"[0-9a-f]{40}")
_OBJECT_ID = re.compile(r"[0-9a-f]{7,40}")


def require_sha(value: str) -> str:
    """Revisions reach git only as full hex shas, never as something git could read as an option."""
    if not _SHA.fullmatch(value):
        raise GitError("git_failed", f"not a commit sha: {value[:60]!r}")
    return value


@dataclass(frozen=True)
class GitCredentials:
    username: str = ""
    token: str = ""
    ssh_key: str = ""

    def secrets(self) -> list[str]:
        return [s for s in (self.token, self.ssh_key) if s]

    def redact(self, text: str) -> str:
        for secret in self.secrets():
            text = text.replace(secret, "***")
        # A URL with credentials in it (user:password@ or token@, or a token in its query string),
        # however it got into the message.
        text = re.sub(r"(://)[^/\s@]+@", r"\1***@", text)
        return _QUERY_CREDENTIAL.sub(r"\1***", text)


# Query parameters that carry a credential: OAuth's access_token, GitLab's private_token, signed URLs.
_CREDENTIAL_PARAMETERS = ("access_token", "private_token", "oauth_token", "token", "auth", "password", "passwd",
                          "secret", "api_key", "apikey", "key", "sig", "signature", "x-amz-signature",
                          "x-amz-credential", "x-goog-signature", "x-goog-credential")
_QUERY_CREDENTIAL = re.compile(r"(?i)([?&;](?:%s)=)[^&;#\s'\"<>]+" % "|".join(map(re.escape, _CREDENTIAL_PARAMETERS)))


def url_split_credentials(url: str) -> tuple[str, GitCredentials]:
    """`https://user:token@host/x` or `https://host/x?access_token=token` -> (`https://host/x`,
    credentials): the URL kept and shown never holds one."""
    parts = urlsplit(url)
    if not parts.scheme or parts.scheme == "file":
        return url, GitCredentials()
    query = parse_qsl(parts.query, keep_blank_values=True)
    in_query = [value for name, value in query if name.lower() in _CREDENTIAL_PARAMETERS and value]
    kept_query = urlencode([(name, value) for name, value in query if name.lower() not in _CREDENTIAL_PARAMETERS])
    username = token = ""
    host = parts.netloc
    if "@" in parts.netloc and not (parts.scheme == "ssh" and not parts.password):
        userinfo, host = parts.netloc.rsplit("@", 1)
        username, _, token = (unquote(part) for part in userinfo.partition(":"))
        if not token:
            username, token = "", username
    if not token and in_query:
        token = in_query[0]  # offered the way git asks for it: as the password
    if not token:
        return url, GitCredentials()
    clean = urlunsplit((parts.scheme, host, parts.path, kept_query, parts.fragment))
    return clean, GitCredentials(username=username, token=token)


@contextmanager
def git_environment(credentials: GitCredentials = GitCredentials()) -> Iterator[dict]:
    """The environment for a git process: never prompts, and carries credentials privately."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    # Neither the machine's nor the user's git configuration applies (credential helpers, hooks, aliases).
    env.update(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="/bin/false", LC_ALL="C",
               GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new")
    with tempfile.TemporaryDirectory(prefix="commitgym-git-") as tmp:
        if credentials.token:
            askpass = Path(tmp) / "askpass"
            askpass.write_text(_ASKPASS)
            askpass.chmod(0o700)
            env.update(
                GIT_ASKPASS=str(askpass),
                COMMITGYM_GIT_USERNAME=credentials.username or "git",
                COMMITGYM_GIT_PASSWORD=credentials.token,
            )
        if credentials.ssh_key:
            key = Path(tmp) / "key"
            key.touch(mode=0o600)
            key.write_text(credentials.ssh_key.strip() + "\n")
            env["GIT_SSH_COMMAND"] = (
                f"ssh -i {key} -o IdentitiesOnly=yes -o BatchMode=yes "
                "-o StrictHostKeyChecking=accept-new"
            )
        yield env


def _failure_code(stderr: str) -> str:
    text = stderr.lower()
    if any(s in text for s in (
        "authentication failed", "could not read username", "could not read password",
        "permission denied (publickey", "invalid username or password",
        "the requested url returned error: 401", "the requested url returned error: 403",
    )):
        return "auth_failed"
    if any(s in text for s in (
        "does not appear to be a git repository", "not a git repository",
        "does not exist", "repository not found", "returned error: 404", "repository not exported",
    )):
        return "not_a_repository"
    if any(s in text for s in (
        "could not resolve host", "connection refused", "timed out", "unable to access",
        "network is unreachable", "no route to host", "could not resolve hostname",
    )):
        return "unreachable"
    return "git_failed"


def git_run(
    args: list[str],
    *,
    cwd: Optional[Path] = None,
    credentials: GitCredentials = GitCredentials(),
    timeout: float = 600,
    input: Optional[str] = None,
) -> str:
    """Run git (with `input` on its standard input), return its standard output; raise GitError
    with a redacted message."""
    return git_output(args, cwd=cwd, credentials=credentials, timeout=timeout, input=input).decode("utf-8", "replace")


def git_output(
    args: list[str],
    *,
    cwd: Optional[Path] = None,
    credentials: GitCredentials = GitCredentials(),
    timeout: float = 600,
    input: Optional[str] = None,
) -> bytes:
    """git_run's standard output as git wrote it: what is not text stays as it was."""
    with git_environment(credentials) as env:
        try:
            done = subprocess.run(
                ["git", *GIT_CONFIG, *args], cwd=cwd, env=env, capture_output=True, timeout=timeout,
                **({"input": input.encode()} if input is not None else {"stdin": subprocess.DEVNULL}),
            )
        except subprocess.TimeoutExpired:
            raise GitError("timeout", f"git {args[0]} took longer than {timeout:.0f} s") from None
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", "replace").strip()
        raise GitError(_failure_code(stderr), credentials.redact(stderr) or f"git {args[0]} failed")
    return done.stdout


def mirror_sync(
    url: str, mirror_dir: Path, *, credentials: GitCredentials = GitCredentials(), timeout: float = 1800
) -> None:
    """Clone a bare mirror, or fetch into the one we have."""
    if (mirror_dir / "HEAD").exists():
        git_run(["fetch", "--prune", "--quiet", "--", url, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
                cwd=mirror_dir, credentials=credentials, timeout=timeout)
        _default_branch_follow(url, mirror_dir, credentials=credentials, timeout=timeout)
        return
    mirror_dir.parent.mkdir(parents=True, exist_ok=True)
    partial = mirror_dir.with_name(mirror_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        git_run(["clone", "--mirror", "--quiet", "--", url, str(partial)], credentials=credentials, timeout=timeout)
    except GitError:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    partial.rename(mirror_dir)


def _default_branch_follow(url: str, mirror_dir: Path, *, credentials: GitCredentials, timeout: float) -> None:
    """Point the mirror's HEAD where the remote's points now (its default branch may have been renamed)."""
    out = git_run(["ls-remote", "--symref", "--", url, "HEAD"], credentials=credentials, timeout=timeout)
    for line in out.splitlines():
        if line.startswith("ref: refs/heads/") and line.endswith("\tHEAD"):
            git_run(["symbolic-ref", "HEAD", line[len("ref: "):-len("\tHEAD")]], cwd=mirror_dir)
            return


def default_branch_tip(mirror_dir: Path) -> tuple[str, str]:
    """(branch name, sha) of the mirror's default branch."""
    branch = git_run(["symbolic-ref", "--short", "HEAD"], cwd=mirror_dir).strip()
    try:
        sha = git_run(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"], cwd=mirror_dir)
    except GitError:
        raise GitError("empty_repository", "The repository has no commits on its default branch.") from None
    return branch, sha.strip()


def commit_exists(mirror_dir: Path, sha: str) -> bool:
    try:
        require_sha(sha)
        git_run(["cat-file", "-e", f"{sha}^{{commit}}"], cwd=mirror_dir)
        return True
    except GitError:
        return False


def commit_count(mirror_dir: Path, tip: str, exclude: list[str]) -> int:
    revisions = [require_sha(tip), *[f"^{require_sha(sha)}" for sha in exclude]]
    out = git_run(["rev-list", "--count", *revisions], cwd=mirror_dir)
    return int(out.strip() or 0)


def tree_paths(mirror_dir: Path, sha: str) -> list[str]:
    """Every file's path in the commit's tree."""
    out = git_run(["ls-tree", "-r", "-z", "--name-only", require_sha(sha)], cwd=mirror_dir)
    return [path for path in out.split("\0") if path]


def commit_patch(mirror_dir: Path, sha: str, *, max_bytes: int = 4_000_000) -> tuple[str, bool]:
    """The commit's unified diff against its parent (3 lines of context); (text, truncated)."""
    with git_environment() as env:
        proc = subprocess.Popen(
            ["git", *GIT_CONFIG, "show", "--format=", "--patch", "--no-ext-diff", "--no-textconv",
             "--src-prefix=a/", "--dst-prefix=b/", "-U3", require_sha(sha), "--"],
            cwd=mirror_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        data = proc.stdout.read(max_bytes + 1)
        proc.kill()
        proc.wait()
    truncated = len(data) > max_bytes
    return data[:max_bytes].decode("utf-8", "replace"), truncated


class BlobReader:
    """Reads objects through one long-lived `git cat-file --batch`.

    Objects can be asked for ahead (`ask`): git reads them while the caller
    works on, and `read_objects` takes the answers later. Blobs named by their
    (possibly abbreviated) id never change, so the most recent ones are kept
    (up to `cache_bytes`): the file a commit changes is usually the file its
    parent changed too."""

    # Names asked and not yet answered stay under the pipe's smallest size, so
    # writing them never blocks while git waits for its answers to be read.
    _ASKED_BYTES = 32 << 10
    # Names are sent to git in bursts: waking git for every few names costs more than its work.
    _BURST_BYTES = 4 << 10

    def __init__(self, mirror_dir: Path, *, cache_bytes: int = 4 << 20, max_blob_bytes: int = 5 << 20):
        with git_environment() as env:
            self._proc = subprocess.Popen(
                ["git", *GIT_CONFIG, "cat-file", "--batch"], cwd=mirror_dir, env=env, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=1 << 16,
            )
        pipe_enlarge(self._proc.stdout)
        # A system short of pipe memory may give pipes of a page or two: ask within what fits.
        self._asked_limit = min(self._ASKED_BYTES, pipe_enlarge(self._proc.stdin) // 2)
        self._asked: deque[str] = deque()  # in the order git answers
        self._waiting: set[str] = set()  # the same names
        self._asked_bytes = 0
        self._unsent_bytes = 0  # written to our buffer, not yet to git
        self._answers: dict[str, Optional[bytes]] = {}  # read from git, not yet taken
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cache_bytes, self._cache_limit = 0, cache_bytes
        self._max_blob_bytes = max_blob_bytes  # a larger object is skipped, not held: read as None

    def ask(self, names: list[str]) -> None:
        """Have git start reading these objects."""
        if any("\n" in name for name in names):
            raise ValueError("object name with a newline")
        new = [name for name in dict.fromkeys(names)
               if name not in self._cache and name not in self._answers and name not in self._waiting]
        for name in new:
            line = f"{name}\n".encode()
            while self._asked and self._asked_bytes + len(line) > self._asked_limit:
                self._answer_read()
            self._proc.stdin.write(line)
            self._asked.append(name)
            self._waiting.add(name)
            self._asked_bytes += len(line)
            self._unsent_bytes += len(line)
        if self._unsent_bytes >= self._BURST_BYTES:
            self._send()

    def _send(self) -> None:
        self._proc.stdin.flush()
        self._unsent_bytes = 0

    def read_objects(self, names: list[str]) -> list[Optional[bytes]]:
        """Each object's bytes (a blob id, or `rev:path`), or None where there is no such blob."""
        self.ask(names)
        found = {name: self._take(name) for name in dict.fromkeys(names)}
        return [found[name] for name in names]

    def _take(self, name: str) -> Optional[bytes]:
        while True:
            if name in self._answers:
                data = self._answers.pop(name)
                if data is not None and _OBJECT_ID.fullmatch(name):
                    self._remember(name, data)
                return data
            if name in self._cache:
                self._cache.move_to_end(name)
                return self._cache[name]
            if name not in self._waiting:
                self.ask([name])  # it left the cache since it was asked for
            self._answer_read()

    def _answer_read(self) -> None:
        if self._unsent_bytes:
            self._send()
        name = self._asked.popleft()
        self._waiting.discard(name)
        self._asked_bytes -= len(name.encode()) + 1
        self._answers[name] = self._read_one()

    def _remember(self, name: str, data: bytes) -> None:
        self._cache[name] = data
        self._cache_bytes += len(data)
        while self._cache_bytes > self._cache_limit and self._cache:
            _, evicted = self._cache.popitem(last=False)
            self._cache_bytes -= len(evicted)

    def _read_one(self) -> Optional[bytes]:
        header = self._proc.stdout.readline()
        if not header or header.endswith((b" missing\n", b" ambiguous\n")):
            return None  # no content follows (the name, which may hold spaces, is echoed first)
        _, kind, size = header.split()
        if int(size) > self._max_blob_bytes:
            left = int(size) + 1  # its bytes and the newline after them, read and dropped
            while left > 0:
                chunk = self._proc.stdout.read(min(1 << 20, left))
                if not chunk:
                    break
                left -= len(chunk)
            return None
        data = self._proc.stdout.read(int(size))
        self._proc.stdout.read(1)
        return data if kind == b"blob" else None

    def close(self) -> None:
        """Answers still owed (the reader stopped early) would keep git writing for ever."""
        if self._asked:
            self._proc.kill()
        with suppress(BrokenPipeError):  # names not yet sent to a git that is gone
            self._proc.stdin.close()
        self._proc.stdout.close()
        self._proc.wait(timeout=10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def pipe_enlarge(pipe, size: int = 1 << 20) -> int:
    """A bigger pipe lets git run on while the reader is busy; where the system
    allows less, the default size still works, only slower. Returns the pipe's size."""
    try:
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, size)
    except OSError:
        pass
    return fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ)
