"""Write scripted git histories: file changes applied in order, commits with fixed authors and dates.

Shared by the bundled sample repositories (sample_repo.py, era_repo.py). Standard library only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional, Union


@dataclass(frozen=True)
class Author:
    name: str
    email: str
    tz: str  # "+HHMM", how git shows the date


# A file change: ("write", path, text-or-bytes) or ("edit", path, old, new); `old` must occur exactly once.
def write(path: str, content: Union[str, bytes]) -> tuple:
    return ("write", path, content)


def edit(path: str, old: str, new: str) -> tuple:
    return ("edit", path, old, new)


def git_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"})
    return env


GIT_CONFIG = (
    "-c", "commit.gpgsign=false",
    "-c", "init.defaultBranch=main",
    "-c", "core.autocrlf=false",
    "-c", "user.name=textkit",
    "-c", "user.email=textkit@example.org",
)  # fmt: skip


def git(path: Path, *args: str, env: dict[str, str], stdin: bytes = b"") -> str:
    result = subprocess.run(
        ["git", *GIT_CONFIG, *args], cwd=path, env=env, input=stdin, capture_output=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {result.stderr.decode(errors='replace')}")
    return result.stdout.decode("utf-8", errors="replace").strip()


def change_apply(path: Path, change: tuple) -> None:
    target = path / change[1]
    target.parent.mkdir(parents=True, exist_ok=True)
    if change[0] == "write":
        content = change[2]
        target.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        return
    _op, name, old, new = change
    text = target.read_text(encoding="utf-8")
    if text.count(old) != 1:
        raise ValueError(f"{name}: expected exactly one {old!r}, found {text.count(old)}")
    target.write_text(text.replace(old, new), encoding="utf-8")


def author_env(env: dict[str, str], author: Author, date: str) -> dict[str, str]:
    """`env` with `author` as the author and committer of the next commit, at `date` (git's format)."""
    return {**env, "GIT_AUTHOR_NAME": author.name, "GIT_AUTHOR_EMAIL": author.email, "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": author.name, "GIT_COMMITTER_EMAIL": author.email, "GIT_COMMITTER_DATE": date}


def history_main(module: str, history_write: Callable[[Path], Iterable], line: Callable[[object], str],
                 argv: Optional[list[str]] = None) -> int:
    """`python -m <module> PATH`: writes the repository at PATH and prints a line per commit."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print(f"usage: python -m {module} PATH", file=sys.stderr)
        return 2
    for commit in history_write(Path(args[0])):
        print(line(commit))
    return 0
