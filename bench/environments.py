"""Environments: how many of a history's kept commits get one, how long each takes, how many are reused.

For each source and backend, the kept commits (the mining filters' defaults, as bench/validate.py
keeps them: a parent, and no drop reason) are spread evenly over the history, the first and the
last included, at most BENCH_ENV_COMMITS of them (default 20). Oldest first, each commit gets an
environment as the product gets one: environments built earlier in this run from the same install
recipe are tried first (the one built for the commit nearest in date first, at most 3), else one
is built as of the commit's committer date.

Sources (BENCH_ENV_SOURCES, default "sample,era,repo"): the bundled sample repository; the bundled
era repository (worker/demo/era_repo.py, one packaging style per era, 2013 to 2026); a local git clone named in BENCH_ENV_REPO
(read through a bare clone sharing its objects: nothing is written into it). Backends:
BENCH_ENV_BACKENDS, default "local,docker"; one that cannot run here is left out with a line on
stderr. Each commit's outcome (built, reused, failed and why, the winning strategy, the cutoffs
lifted, the seconds) goes to stderr, one line per commit.

Figures, per source and backend:
- environments: the share of the chosen commits that got an environment. Baseline: the share a
  single fixed recipe would get, i.e. commits whose environment worked on the first strategy
  tried on the first Python (built with exactly one attempt, or reused from an environment that
  was).
- environment seconds: the mean wall time per commit to get its environment (reading the
  recipe, the reuse checks, the build; writing the working copy is left out). Baseline: the mean
  seconds of the first attempt of each build in the same run, i.e. what one install with one
  fixed recipe costs a commit, with no search and no reuse (sandbox time of the attempt's steps).
- environments of a Python here: the same share among the commits not refused as no_python_for_era
  (Python 2 code, syntax or standard-library names no Python here has), with how many were.
- environments reused: the share of the chosen commits that reused an environment. Baseline:
  the share for which an environment of the same install recipe had been built earlier in the
  run, the most the recipe rule lets reuse reach (the ratio: how often the reuse check agreed).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.demo.era_repo import era_repo_write  # noqa: E402
from worker.demo.sample_repo import sample_repo_write  # noqa: E402
from worker.engine.env.builder import Attempt, BuiltEnvironment, EnvironmentBuilder, EnvironmentFailed  # noqa: E402
from worker.engine.env.recipes import build_packages, install_recipe, recipe_key  # noqa: E402
from worker.engine.env.runtimes import default_images, docker_runtimes, local_runtimes  # noqa: E402
from worker.engine.git.patches import commit_patches  # noqa: E402
from worker.engine.git.repo import GitError  # noqa: E402
from worker.engine.git.working_copy import working_copy_write  # noqa: E402
from worker.engine.sandbox.docker import DockerSandbox  # noqa: E402
from worker.engine.sandbox.index_proxy import index_hosts_from  # noqa: E402
from worker.engine.sandbox.local import LocalSandbox  # noqa: E402
from worker.engine.test_files import TestFileRules
from worker.engine.validate.pipeline import test_files_present  # noqa: E402
from _kept_commits import kept_commits  # noqa: E402
from _report import report  # noqa: E402

COMMITS = int(os.environ.get("BENCH_ENV_COMMITS", "20"))
BACKENDS = [name.strip() for name in os.environ.get("BENCH_ENV_BACKENDS", "local,docker").split(",") if name.strip()]
# Which sources to measure: "sample", "era", "repo" (BENCH_ENV_REPO); all by default.
SOURCES = {name.strip() for name in os.environ.get("BENCH_ENV_SOURCES", "sample,era,repo").split(",")}
INDEX_HOSTS = index_hosts_from(os.environ.get("COMMITGYM_INDEX_HOSTS", ""))  # as the product reads it
REUSE_TRIES = 3


def note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Source:
    name: str
    mirror: Path  # a repository working_copy_write and commits_walk read
    commits: list[tuple[str, str, datetime]]  # the chosen kept commits (sha, parent, committer date), oldest first
    kept: int  # kept commits in the whole history


@dataclass
class Outcome:
    sha: str
    date: datetime
    outcome: str  # "built", "reused" or "failed"
    reason: str = ""  # why it failed: a reason code
    strategy: str = ""  # of the winning attempt (of the last attempt, for a failure)
    lifted: dict = field(default_factory=dict)
    build: frozenset = frozenset()  # what building the commit's package needs (lifted together)
    seconds: float = 0.0
    attempts: int = 0  # builder attempts and reuse checks
    first_try: bool = False  # worked on the first strategy on the first Python
    reusable: bool = False  # an environment of the same recipe had been built earlier in the run
    first_attempt_seconds: Optional[float] = None  # of the build's first attempt, where it built


@dataclass
class _Built:
    environment: BuiltEnvironment
    date: datetime  # of the commit it was built for
    first_try: bool


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def spread(items: list, count: int) -> list:
    """`count` of `items` spread evenly, the first and the last included."""
    if count <= 0 or len(items) <= count:
        return list(items)
    if count == 1:
        return [items[-1]]
    return [items[i] for i in sorted({round(i * (len(items) - 1) / (count - 1)) for i in range(count)})]


def source_make(name: str, mirror: Path) -> Source:
    kept = kept_commits(mirror, git(mirror, "rev-parse", "HEAD"))
    return Source(name, mirror, spread(kept, COMMITS), len(kept))


def sources(place: Path) -> list[Source]:
    found = []
    if "sample" in SOURCES:
        sample = place / "sources" / "sample"
        sample_repo_write(sample)
        found.append(source_make("sample", sample))
    if "era" in SOURCES:
        era = place / "sources" / "era"
        era_repo_write(era)
        found.append(source_make("era", era))
    clone = os.environ.get("BENCH_ENV_REPO", "")
    if clone and "repo" in SOURCES:
        clone_path = Path(clone).expanduser().resolve()
        tip = git(clone_path, "rev-parse", "HEAD")
        # A bare clone borrowing the clone's objects: working_copy_write writes into the repository's
        # info/attributes, which must not be the clone's own.
        mirror = place / "sources" / "repo.git"
        subprocess.run(["git", "clone", "--quiet", "--bare", "--shared", str(clone_path), str(mirror)], check=True)
        started = time.monotonic()
        kept = kept_commits(mirror, tip)
        note(f"environments {clone_path.name}: {len(kept)} kept commits, walked in {time.monotonic() - started:.1f} s")
        name = os.environ.get("BENCH_ENV_NAME", clone_path.name)
        found.append(Source(name, mirror, spread(kept, COMMITS), len(kept)))
    return found


def builders(place: Path, source: Source) -> list[tuple[str, EnvironmentBuilder]]:
    uv = Path(sys.executable).parent / "uv"
    made = []
    for backend in BACKENDS:
        common = dict(env_root=place / "envs" / backend / source.name, uv=uv, namespace=f"bench-{source.name}",
                      backend=backend)
        if backend == "local":
            if not LocalSandbox.available():
                note(f"environments {source.name} local: not measured (bubblewrap is not installed)")
                continue
            made.append((backend, EnvironmentBuilder(
                **common, sandbox_factory=partial(LocalSandbox, index_hosts=INDEX_HOSTS), runtimes=local_runtimes())))
        elif backend == "docker":
            runtimes = docker_runtimes(default_images()) if DockerSandbox.available() else ()
            if not runtimes:
                note(f"environments {source.name} docker: not measured (no Docker engine answers, or it has no "
                     "Python image: manage.py build_base_images builds them)")
                continue
            made.append((backend, EnvironmentBuilder(
                **common, sandbox_factory=partial(DockerSandbox, index_hosts=INDEX_HOSTS), runtimes=runtimes)))
        else:
            note(f"environments {source.name} {backend}: not measured (no such backend; local or docker)")
    return made


def environment_get(builder: EnvironmentBuilder, workdir: Path, date: datetime, probe: list[str],
                    built: dict[str, list[_Built]]) -> Outcome:
    """Reuse an environment of the same recipe (nearest in date first), else build one; `probe` is
    the commit's own test files, as validation gives them."""
    outcome = Outcome(sha="", date=date, outcome="failed")
    recipe = install_recipe(workdir / "repo")
    key = recipe_key(recipe)
    outcome.build = frozenset(build_packages(recipe))
    candidates = [b for b in built.get(key, []) if builder.runs(b.environment)]
    outcome.reusable = bool(candidates)
    nearest = {}  # one try per distinct environment
    for candidate in sorted(candidates, key=lambda b: abs((b.date - date).total_seconds())):
        nearest.setdefault(candidate.environment.key, candidate)
    for candidate in list(nearest.values())[:REUSE_TRIES]:
        check = builder.reuse_check(candidate.environment, workdir, probe)
        outcome.attempts += 1
        if check.status == "ok":
            winner = _winner(candidate.environment.attempts)
            outcome.outcome, outcome.first_try = "reused", candidate.first_try
            outcome.strategy = f"reuse ({winner.strategy})" if winner else "reuse"
            outcome.lifted = dict(winner.lifted) if winner else {}
            return outcome
    try:
        environment = builder.build(workdir, as_of=date, probe=probe)
    except EnvironmentFailed as failed:
        outcome.attempts += len(failed.attempts)
        outcome.reason = failed.reason
        last: Optional[Attempt] = failed.attempts[-1] if failed.attempts else None
        outcome.strategy, outcome.lifted = (last.strategy, dict(last.lifted)) if last else ("", {})
        outcome.first_attempt_seconds = failed.attempts[0].seconds if failed.attempts else None
        return outcome
    winner = _winner(environment.attempts)
    outcome.outcome, outcome.attempts = "built", outcome.attempts + len(environment.attempts)
    outcome.first_try = len(environment.attempts) == 1
    outcome.strategy, outcome.lifted = (winner.strategy, dict(winner.lifted)) if winner else ("", {})
    outcome.first_attempt_seconds = environment.attempts[0].seconds if environment.attempts else None
    built.setdefault(key, []).append(_Built(environment, date, outcome.first_try))
    return outcome


def _winner(attempts: list[Attempt]) -> Optional[Attempt]:
    return next((attempt for attempt in reversed(attempts) if attempt.status == "ok"), None)


def source_measure(place: Path, source: Source, backend: str, builder: EnvironmentBuilder) -> list[Outcome]:
    note(f"\nenvironments {source.name} {backend}: {len(source.commits)} of {source.kept} kept commits")
    note(f"{'sha':<10}  {'date':<25}  {'outcome':<7}  {'reason':<28}  {'seconds':>7}  {'tries':>5}  strategy  lifted")
    built: dict[str, list[_Built]] = {}
    outcomes = []
    for index, (sha, parent, date) in enumerate(source.commits):
        workdir = place / "work" / f"{source.name}-{backend}-{index}"
        try:
            working_copy_write(source.mirror, sha, workdir)
            test_files = commit_patches(source.mirror, sha, parent, TestFileRules()).test_files
        except GitError as refused:
            outcome = Outcome(sha=sha[:10], date=date, outcome="failed", reason=f"git:{refused.code}")
        else:
            probe = test_files_present(test_files, workdir / "repo")
            started = time.monotonic()
            outcome = environment_get(builder, workdir, date, probe, built)
            outcome.sha, outcome.seconds = sha[:10], time.monotonic() - started
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        outcomes.append(outcome)
        note(f"{outcome.sha:<10}  {outcome.date.isoformat():<25}  {outcome.outcome:<7}  {outcome.reason or '-':<28}  "
             f"{outcome.seconds:>7.1f}  {outcome.attempts:>5}  {outcome.strategy or '-'}  {_lifted_said(outcome)}")
    return outcomes


def _lifted_said(outcome: Outcome) -> str:
    """The cutoffs lifted, the build packages (all lifted to one date, the Python's) said once."""
    lifted = dict(outcome.lifted)
    build_cutoffs = [cutoff for package, cutoff in lifted.items() if package in outcome.build]
    said = []
    if len(build_cutoffs) > 1:
        common = max(set(build_cutoffs), key=build_cutoffs.count)
        said.append(f"{build_cutoffs.count(common)} build packages={common}")
        lifted = {package: cutoff for package, cutoff in lifted.items()
                  if package not in outcome.build or cutoff != common}
    said += [f"{package}={cutoff}" for package, cutoff in sorted(lifted.items())]
    return ",".join(said) or "-"


def figures(source: Source, backend: str, outcomes: list[Outcome]) -> None:
    count = len(outcomes)
    if not count:
        note(f"environments {source.name} {backend}: not measured (no kept commits)")
        return
    got = sum(o.outcome != "failed" for o in outcomes)
    first_try = sum(o.outcome != "failed" and o.first_try for o in outcomes)
    report(f"environments {source.name} {backend}", got / count, "share", first_try / count)
    # Of the commits whose code some Python here can run: what the search reaches where the era allows.
    of_era = [o for o in outcomes if o.reason != "no_python_for_era"]
    if of_era:
        report(f"environments of a Python here {source.name} {backend}",
               sum(o.outcome != "failed" for o in of_era) / len(of_era), "share",
               sum(o.outcome != "failed" and o.first_try for o in of_era) / len(of_era),
               f"share ({count - len(of_era)} of {count} commits need an older Python)")
    firsts = [o.first_attempt_seconds for o in outcomes if o.first_attempt_seconds is not None]
    report(f"environment seconds {source.name} {backend}", sum(o.seconds for o in outcomes) / count, "s",
           sum(firsts) / len(firsts) if firsts else 0.0, "s of a first attempt")
    reused = sum(o.outcome == "reused" for o in outcomes)
    reusable = sum(o.reusable for o in outcomes)
    report(f"environments reused {source.name} {backend}", reused / count, "share", reusable / count,
           "share with an environment of the same recipe")


def main() -> None:
    place = Path(tempfile.mkdtemp(prefix="commitgym-bench-environments-"))
    place.chmod(0o755)  # the sandboxes' users go through it to their working copies
    try:
        for source in sources(place):
            for backend, builder in builders(place, source):
                figures(source, backend, source_measure(place, source, backend, builder))
                shutil.rmtree(place / "envs" / backend / source.name, ignore_errors=True)
    finally:
        shutil.rmtree(place, ignore_errors=True)


if __name__ == "__main__":
    main()
