"""Write a synthetic Python project's history quickly with `git fast-import`.

Each commit edits one to four modules of a package (with the occasional test
file, README edit or large refactor), so `git log -p` has realistic work to do.
"""

import random
import subprocess
from pathlib import Path

MODULES = 60
LINES_PER_MODULE = 120


def _module_text(rng: random.Random, lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def history_write(path: Path, commits: int, *, seed: int = 7, start: int = 1_600_000_000) -> None:
    """Create a repository at `path` with `commits` commits on `main`."""
    rng = random.Random(seed)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    modules = {
        f"pkg/mod{i:02d}.py": [f"def f{i}_{j}(x):\n    return x + {j}" for j in range(LINES_PER_MODULE // 2)]
        for i in range(MODULES)
    }
    stream = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=path, stdin=subprocess.PIPE)
    out = stream.stdin
    for n in range(commits):
        changed = {}
        roll = rng.random()
        touched = rng.sample(sorted(modules), 12 if roll < 0.05 else rng.randint(1, 4))
        for name in touched:
            lines = modules[name]
            for _ in range(40 if roll < 0.05 else rng.randint(1, 6)):
                k = rng.randrange(len(lines))
                lines[k] = f"def g{n}_{k}(x):\n    return x * {rng.randint(2, 99)}  # revised {n}"
            changed[name] = _module_text(rng, lines)
        if rng.random() < 0.3:
            changed[f"tests/test_mod{rng.randrange(MODULES):02d}.py"] = (
                f"def test_case_{n}():\n    assert {n} == {n}\n".encode())
        if rng.random() < 0.1:
            changed["README.md"] = f"# pkg\n\nRelease {n}\n".encode()
        when = start + n * 3600
        message = f"Change {n}: revise {', '.join(touched[:2])}\n".encode()
        out.write(b"commit refs/heads/main\n")
        out.write(f"committer Bench Author <bench@example.com> {when} +0000\n".encode())
        out.write(b"data %d\n%s\n" % (len(message), message))
        for name, data in changed.items():
            out.write(f"M 100644 inline {name}\n".encode())
            out.write(b"data %d\n%s\n" % (len(data), data))
    out.close()
    if stream.wait() != 0:
        raise RuntimeError("git fast-import failed")
    subprocess.run(["git", "checkout", "-q", "main"], cwd=path, check=True)


def commits_append(path: Path, count: int, *, start_index: int) -> None:
    """Add `count` small commits on top, as new upstream work would."""
    for n in range(start_index, start_index + count):
        target = path / "pkg" / f"mod{n % MODULES:02d}.py"
        target.write_text(target.read_text() + f"\n\ndef added_{n}(x):\n    return x - {n}\n")
        subprocess.run(["git", "-c", "user.name=Bench", "-c", "user.email=b@example.com", "commit", "-qam",
                        f"Add added_{n}"], cwd=path, check=True)
