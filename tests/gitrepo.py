"""Build small git repositories for tests, one commit at a time."""

import os
import subprocess
from pathlib import Path


class GitRepo:
    def __init__(self, path: Path):
        self.path = path
        self._tick = 0
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        self._tick += 1
        date = f"2026-01-01T00:{self._tick // 60 % 60:02d}:{self._tick % 60:02d}+00:00"
        env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        done = subprocess.run(
            ["git", "-c", "user.name=Test Author", "-c", "user.email=author@example.com",
             "-c", "commit.gpgsign=false", *args],
            cwd=self.path, env=env, check=True, capture_output=True,
        )
        return done.stdout.decode("utf-8", "replace").strip()

    def commit(self, message: str | bytes, files: dict[str, str | bytes | None]) -> str:
        """Write (or, with None, delete) files and commit them; return the sha."""
        for name, content in files.items():
            target = self.path / name
            if content is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode() if isinstance(content, str) else content)
        self.git("add", "-A")
        message_file = self.path.parent / f".{self.path.name}-message"
        message_file.write_bytes(message.encode() if isinstance(message, str) else message)
        self.git("commit", "-q", "--allow-empty", "-F", str(message_file))
        return self.git("rev-parse", "HEAD")
