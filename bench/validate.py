"""Validation in the local sandbox: warm overhead, environment reuse, disk per task.

- Warm overhead: a task whose test file takes over 10 s per run, validated with an
  environment already built, against pytest run directly (no sandbox, no report
  plugin) in the same environment on the same tests as many times. Goal: <= 1.5x.
- Fresh copies: of the warm validation, the time spent copying a fresh working copy for
  each run (nothing one run writes is seen by the next).
- Copy or overlay: a fresh working copy of a 3,000-file tree handed to a run's own user,
  by copying it (what runs use) against mounting an overlay of the read-only tree (root only).
  The hand-over changes every file's owner, which an overlay can only do by copying it up.
- Reuse: the share of the sample repository's kept commits that reuse an existing
  environment. Goal: >= 80%.
- Disk: what a validated task leaves behind beyond the environments (its stored
  runs, outputs and attempts; working copies are deleted). Goal: <= 1 GB per 1,000.
- Cost: the CPU seconds a validated commit costs (environments already built), and the same
  in units of one run of the commit's own test files (medians over the valid commits),
  against the way validation worked before its runs became grades (the code of BASELINE, run
  in the same bench); then whether any commit's verdict, F2P, P2P or flaky list differs
  between them. On the sample repository, and on a local clone named in BENCH_VALIDATE_REPO
  (at most BENCH_VALIDATE_COMMITS of its kept commits, default 12, spread evenly over its
  history since BENCH_VALIDATE_SINCE, an ISO date, if given). Goal: at most half the seconds, at most 5 units, no verdict changed.
"""

import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.gitrepo import GitRepo  # noqa: E402
from worker.demo.sample_repo import sample_repo_write  # noqa: E402
from worker.engine.env.builder import EnvironmentBuilder  # noqa: E402
from worker.engine.env.runtimes import default_images, docker_runtimes  # noqa: E402
from worker.engine.git.working_copy import working_copy_clone  # noqa: E402
from worker.engine.sandbox.base import SANDBOX_UIDS, hand_over  # noqa: E402
from worker.engine.sandbox.docker import DockerSandbox  # noqa: E402
from worker.engine.validate.pipeline import CommitToValidate, ValidationSettings, task_validate  # noqa: E402
from _kept_commits import kept_commits  # noqa: E402
from _report import report  # noqa: E402

AS_OF = datetime(2026, 6, 1, tzinfo=timezone.utc)
# The last commit whose validation ran the commit's test files three times a side, the suite, and the
# gold and empty patches as plain runs.
BASELINE = "f3508b1f8aaec9271d9d701af1c74cb0c6899e79"
SLOW_TESTS = 24  # x 0.45 s: a run of the file takes over 10 s


def slow_repository(path: Path) -> tuple[str, str]:
    repo = GitRepo(path)
    tests = "import time\nfrom pkg.core import double\n\n" + "".join(
        f"def test_{i}():\n    time.sleep(0.45)\n    assert double({i}) == {2 * i}\n\n" for i in range(SLOW_TESTS))
    parent = repo.commit("init", {
        "pyproject.toml": '[project]\nname = "pkg"\nversion = "0"\n[project.optional-dependencies]\ntest = ["pytest"]\n',
        "pkg/__init__.py": "", "pkg/core.py": "def double(x):\n    return x + x if x != 3 else 7\n",
        "tests/test_core.py": tests.replace("assert double(3) == 6", "assert double(3) == 7"),
    })
    fix = repo.commit("Fix double(3)", {"pkg/core.py": "def double(x):\n    return x + x\n",
                                        "tests/test_core.py": tests})
    return parent, fix


def warm_overhead(place: Path, builder: EnvironmentBuilder, name: str) -> None:
    parent, fix = slow_repository(place / f"slow-{name}")
    settings = ValidationSettings(reruns=0, per_test_timeout=60, suite_seconds=600)
    commit = CommitToValidate(mirror_dir=place / f"slow-{name}", sha=fix, parent_sha=parent, committed_at=AS_OF)
    cold = task_validate(commit, builder=builder, work_root=place, settings=settings)
    assert cold.verdict == "valid", (cold.verdict, cold.reason)
    started = time.monotonic()
    warm = task_validate(commit, builder=builder, work_root=place, settings=settings, reusable=[cold.environment])
    validation_seconds = time.monotonic() - started
    assert warm.environment_reused and warm.verdict == "valid"
    work = place / f"direct-{name}"
    subprocess.run(f"git -C {place / f'slow-{name}'} archive {fix} | (mkdir -p {work} && tar -x -C {work})",
                   shell=True, check=True)
    # Directly on this machine, with the environment's packages: the same interpreter the sandboxes use.
    site = next(cold.environment.path.glob("lib/python3*/site-packages"))
    python = "/usr/bin/python3"
    started = time.monotonic()
    for _ in warm.runs:
        subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_core.py"], cwd=work,
                       check=False, capture_output=True,
                       env={"PYTHONPATH": f"{work}:{site}", "PATH": "/usr/bin:/bin"})
    direct_seconds = time.monotonic() - started
    report(f"validate.warm_overhead_{name}", validation_seconds, "s", direct_seconds)
    # Each run tests a fresh copy of its side's working copy: that copying, against the whole validation.
    report(f"validate.fresh_copies_{name}", warm.copy_seconds, "s", validation_seconds)


def copy_or_overlay(place: Path) -> None:
    tree = place / "tree"
    for i in range(3000):
        (tree / f"pkg{i % 100}").mkdir(parents=True, exist_ok=True)
        (tree / f"pkg{i % 100}" / f"module_{i}.py").write_text(f"VALUE = {i}\n" + "# filler\n" * 400)

    def copied(target: Path) -> float:
        started = time.monotonic()
        working_copy_clone(tree, target / "repo")
        hand_over(target, SANDBOX_UIDS[0])
        seconds = time.monotonic() - started
        shutil.rmtree(target)
        return seconds

    def overlaid(target: Path) -> float:
        started = time.monotonic()
        for name in ("upper", "work", "repo"):
            (target / name).mkdir(parents=True)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={tree},upperdir={target / 'upper'},"
                        f"workdir={target / 'work'}", str(target / "repo")], check=True, capture_output=True)
        try:
            hand_over(target / "repo", SANDBOX_UIDS[0])
            return time.monotonic() - started
        finally:
            subprocess.run(["umount", str(target / "repo")], check=True)
            shutil.rmtree(target)

    try:
        overlaid(place / "probe")
    except (subprocess.CalledProcessError, OSError) as refused:
        print(f"validate.fresh_copy_by_overlay: not measured (no overlay mount here: {refused})", flush=True)
        return
    copies, overlays = [], []
    for i in range(5):  # in turn, so both see the same machine
        copies.append(copied(place / f"copy-{i}"))
        overlays.append(overlaid(place / f"overlay-{i}"))
    report("validate.fresh_copy_by_overlay", sorted(overlays)[2], "s", sorted(copies)[2], "s by copying")


def reuse_and_disk(place: Path, builder: EnvironmentBuilder) -> None:
    repo = place / "sample"
    sample_repo_write(repo)
    tip = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    kept = kept_commits(repo, tip)
    settings = ValidationSettings(reruns=0, per_test_timeout=30, suite_seconds=120)
    environments, reused, stored_bytes = [], 0, 0
    for sha, parent_sha, _ in kept:
        result = task_validate(
            CommitToValidate(mirror_dir=repo, sha=sha, parent_sha=parent_sha, committed_at=AS_OF),
            builder=builder, work_root=place, settings=settings, reusable=environments[-3:])
        reused += result.environment_reused
        if result.environment and not result.environment_reused:
            environments.append(result.environment)
        stored_bytes += sum(len(r.run.output) + len(json.dumps(r.run.outcomes)) for r in result.runs)
        stored_bytes += sum(len(a.output) for a in result.attempts)
    share = 100 * reused / len(kept)
    print(f"validate.environment_reuse_sample: {share:.1f} % of {len(kept)} tasks "
          f"({len(environments)} environments built; goal >= 80 %)", flush=True)
    env_bytes = sum(f.stat().st_size for env in environments for f in env.path.rglob("*") if f.is_file())
    report("validate.stored_bytes_per_1000_tasks", stored_bytes / len(kept) * 1000 / 1e6, "MB",
           1000.0, "MB (the goal: 1 GB)")
    print(f"validate.environment_bytes: {env_bytes / 1e6:.1f} MB for {len(environments)} distinct environments",
          flush=True)


def _way_measured(place: Path, name: str, code: Path, commits: Path) -> dict[str, dict]:
    """Each commit's figures and findings, validated by the code under `code` in a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "_validate_cost.py"), str(commits),
                           str(place / f"envs-{name}"), str(place)], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"validating the {name} way failed: {done.stderr[-2000:]}")
    return {row["sha"]: row for row in map(json.loads, done.stdout.splitlines())}


def validation_cost(place: Path, repo: Path, name: str, at_most: int = 0, since: str = "") -> None:
    tip = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    kept = [commit for commit in kept_commits(repo, tip) if not since or commit[2].isoformat() >= since]
    if at_most and len(kept) > at_most:  # spread evenly, the first and the last included
        kept = [kept[round(i * (len(kept) - 1) / (at_most - 1))] for i in range(at_most)]
    commits = place / f"cost-commits-{name}.json"
    commits.write_text(json.dumps({"mirror": str(repo), "commits": [
        [sha, parent, date.isoformat()] for sha, parent, date in kept]}))
    baseline_code = place / "baseline-code"
    if not baseline_code.is_dir():
        baseline_code.mkdir()
        subprocess.run(f"git -C {ROOT} archive {BASELINE} worker | tar -x -C {baseline_code}", shell=True,
                       check=True)
    before = _way_measured(place, f"baseline-{name}", baseline_code, commits)
    now = _way_measured(place, f"today-{name}", ROOT, commits)
    valid = [sha for sha, row in now.items() if row["verdict"] == "valid" and row["unit"]]
    for way, rows in (("baseline", before), ("today", now)):
        ends = collections.Counter(f"{row['verdict']} {row['reason']}".strip() for row in rows.values())
        print(f"validate.verdicts_{name} ({way}): " + ", ".join(f"{end} {n}" for end, n in ends.most_common()),
              flush=True)
    if not valid:
        print(f"validate.cost_{name}: not measured (none of {len(kept)} commits validated)", flush=True)
        print(findings_compared(before, now), flush=True)
        return

    def median(rows, key):
        return statistics.median(key(rows[sha]) for sha in valid)

    report(f"validate.cpu_seconds_per_valid_commit_{name}", median(now, lambda r: r["cpu"]), "s",
           median(before, lambda r: r["cpu"]))
    report(f"validate units per valid commit ({name}, {len(valid)} valid of {len(kept)})",
           median(now, lambda r: r["cpu"] / now[r["sha"]]["unit"]), "units",
           median(before, lambda r: r["cpu"] / now[r["sha"]]["unit"]))
    report(f"validate.wall_seconds_all_commits_{name}", sum(row["wall"] for row in now.values()), "s",
           sum(row["wall"] for row in before.values()))
    print(findings_compared(before, now), flush=True)


def findings_compared(before: dict[str, dict], now: dict[str, dict]) -> str:
    """`verdicts changed: N`, N the commits whose verdict, reason, F2P, P2P or flaky list differs
    between the ways, then one line for each. A test either way found flaky in any commit is left out
    of the lists: whether one run a side saw it pass is chance (the sample repository has one by design)."""
    flaky = {test for rows in (before, now) for row in rows.values() for test in row["flaky"]}
    lists = ("fail_to_pass", "pass_to_pass", "flaky")

    def findings(row: dict) -> dict:
        return {"verdict": row["verdict"], "reason": row["reason"],
                **{key: sorted(set(row[key]) - flaky) for key in lists}}

    lines = []
    for sha in now:
        was, is_now = findings(before[sha]), findings(now[sha])
        differs = [f"{key} {was[key]} -> {is_now[key]}" for key in was if was[key] != is_now[key]]
        if differs:
            lines.append(f"  {sha[:12]}: " + "; ".join(differs))
    return "\n".join([f"verdicts changed: {len(lines)} of {len(now)} commits "
                      f"(tests found flaky left out: {', '.join(sorted(flaky)) or 'none'})", *lines])


def main() -> None:
    place = Path(tempfile.mkdtemp(prefix="commitgym-bench-validate-"))
    place.chmod(0o755)
    try:
        uv = Path(sys.executable).parent / "uv"
        builder = EnvironmentBuilder(env_root=place / "envs", uv=uv)
        warm_overhead(place, builder, "local")  # goal <= 1.5x
        if DockerSandbox.available():
            docker = EnvironmentBuilder(env_root=place / "envs-docker", uv=uv, sandbox_factory=DockerSandbox,
                                        backend="docker", runtimes=docker_runtimes(default_images()))
            warm_overhead(place, docker, "docker")  # goal <= 2.5x
        else:
            print("validate.warm_overhead_docker: not measured (no Docker engine answers)", flush=True)
        copy_or_overlay(place)
        reuse_and_disk(place, builder)
        sample = place / "cost-sample"
        sample_repo_write(sample)
        validation_cost(place, sample, "sample")
        if os.environ.get("BENCH_VALIDATE_REPO"):
            real = Path(os.environ["BENCH_VALIDATE_REPO"])
            validation_cost(place, real, real.name, int(os.environ.get("BENCH_VALIDATE_COMMITS", "12")),
                            os.environ.get("BENCH_VALIDATE_SINCE", ""))
    finally:
        shutil.rmtree(place, ignore_errors=True)


if __name__ == "__main__":
    main()
