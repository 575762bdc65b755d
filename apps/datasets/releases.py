"""Releases: a dataset's, repository's or saved view's tasks in the chosen states, written once as
NAME@N (SWE-bench's instance JSONL, the same rows in Parquet, and a manifest with every file's
checksum), by a job that streams the rows to files. A version is never written twice and its rows
and files never edited (its manifest gains only its environments' image ids, from release_images): a
new one is made when anything changed, and a withdrawn one is kept, marked, with why.
Exports (training data from one release's tasks) are jobs of their own, written beside it."""

import json
import re
import shutil
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Iterator, Optional

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.http import Http404
from django.utils import timezone as django_timezone

from apps.environments.models import Environment
from apps.jobs.on_demand import job_waited
from apps.jobs.services import JobFailed, job_start
from apps.repositories.models import Repository
from apps.tasks.models import (
    CurationSettings,
    GeneratedTest,
    IssueVersion,
    Review,
    SavedView,
    Task,
    Validation,
    current_issue,
)
from apps.tasks.selectors import task_base_sha, tasks_visible
from worker.engine.env.index_hashes import lock_hashes, simple_page
from worker.engine.git.archive import archive_write, file_at, top_level_files
from worker.engine.git.patches import NO_PATCHES, commits_patches
from worker.engine.git.repo import GitError, commit_exists
from worker.engine.env.rebuild import (
    ENVIRONMENTS,
    EXTRA_CA,
    EnvironmentToRelease,
    default_base,
    environment_folder_write,
    unreleasable,
    release_readme,
)
from worker.engine.release.licences import licence_files, licence_spdx
from worker.engine.release.records import ReleasedTask, instance_row, release_schema
from worker.engine.release.training import judge_row, trajectory_row
from worker.engine.release.writers import MANIFEST, JsonLines, ParquetRows, WrittenFile, file_sha256, manifest_write
from worker.engine.verify.reproduction import files_added_patch

from .models import RESOLVED, Candidate, Dataset, HackingReview, Import, Release
from .registry import PEOPLE_LABELS
from .selectors import dataset_tasks, dataset_tasks_visible

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
CHUNK = 1000  # tasks read and written at a time
INSTANCES_JSONL, INSTANCES_PARQUET = "instances.jsonl", "instances.parquet"
# Ground truths a judge can learn from: the rest (no patch, errors, timeouts, untrusted runs) say
# nothing about the patch.
JUDGE_LABELS = {"resolved": True, "partial": False, "no": False, "does_not_apply": False}
# Judge data leaves out the empty patch (nothing to read) and the style probe's rewrites (copies).
NOT_FOR_JUDGES = (Candidate.Source.EMPTY, Candidate.Source.PROBE)


class ReleaseRefused(ValueError):
    """A release or export that cannot be made as asked; the message says why."""


def commitgym_version() -> str:
    try:
        return package_version("commitgym")
    except PackageNotFoundError:
        return "unknown"


# --- asking for a release ----------------------------------------------------------------------


@dataclass(frozen=True)
class ReleaseScope:
    kind: str  # Release.Scope
    label: str
    dataset: Optional[Dataset] = None
    repository: Optional[Repository] = None
    view_task_ids: tuple[int, ...] = ()

    @property
    def kind_label(self) -> str:
        return Release.Scope(self.kind).label.lower()


def scope_of_dataset(dataset: Dataset) -> ReleaseScope:
    return ReleaseScope(Release.Scope.DATASET, dataset.name, dataset=dataset)


def scope_of_repository(repository: Repository) -> ReleaseScope:
    return ReleaseScope(Release.Scope.REPOSITORY, repository.name, repository=repository)


def scope_of_view(view: SavedView, task_ids: list[int]) -> ReleaseScope:
    """A saved view's tasks as they match now (for the person asking): the release keeps that list."""
    return ReleaseScope(Release.Scope.VIEW, view.name, view_task_ids=tuple(task_ids))


def states_chosen(text: str) -> tuple[str, ...]:
    """Comma-separated task states, in the states' own order; ReleaseRefused naming the unknown ones."""
    chosen = {part.strip() for part in text.split(",") if part.strip()}
    unknown = sorted(chosen - set(Task.State.values))
    if unknown or not chosen:
        raise ReleaseRefused(f"unknown task state {', '.join(unknown) or '(none given)'}: choose from "
                             f"{', '.join(Task.State.values)}")
    return tuple(state for state in Task.State.values if state in chosen)  # in one order: the same ask is equal


def release_scope_of_dataset(dataset: Dataset, *, user):
    """What releasing the dataset covers; Http404 when the person sees none of it, PermissionDenied when
    it holds tasks of repositories they may not see."""
    if not dataset_tasks_visible(dataset, user=user).exists():
        raise Http404("No such dataset.")
    if dataset_tasks(dataset).exclude(id__in=tasks_visible(user=user)).exists():
        raise PermissionDenied("This dataset holds tasks of repositories you may not see: an admin can release it.")
    return scope_of_dataset(dataset)


def release_start(*, name: str, scope: ReleaseScope, states: tuple[str, ...] = (Task.State.ACCEPTED,),
                  since: Optional[date] = None, out: Optional[Path] = None, user=None) -> Release:
    """Queue the writing of the next version of `name`. What can be checked now is: the name, the
    folder, and that some task would be released (ReleaseRefused says what is wrong)."""
    if not NAME.fullmatch(name or ""):
        raise ReleaseRefused(f"{name!r} cannot name a release: use letters, digits, '.', '_' and '-' (at most 100, "
                             "starting with a letter or digit)")
    states = states_chosen(",".join(states))
    folder = Path(out or settings.COMMITGYM_RELEASE_DIR).resolve()
    if folder.exists() and not folder.is_dir():
        raise ReleaseRefused(f"{folder} is a file, not a folder for releases")
    count = _scope_tasks(scope, states, since).count()
    if not count:
        raise ReleaseRefused(f"no task of the {scope.kind_label} {scope.label!r} is "
                             f"{' or '.join(states)}"
                             f"{f' with a commit after {since}' if since else ''}: nothing to release")
    writing = release_writing(name)
    if writing is not None:
        raise ReleaseRefused(f"a version of {name} is being written already (job {writing.job_id}): wait for "
                             "it to end")
    with transaction.atomic():
        release = Release.objects.create(
            kind=Release.Kind.INSTANCES, name=name, scope=scope.kind, scope_label=scope.label[:300],
            dataset=scope.dataset, repository=scope.repository, view_task_ids=list(scope.view_task_ids),
            states=list(states), since=since, preview=set(states) != {Task.State.ACCEPTED}, folder=str(folder),
            created_by=user if getattr(user, "pk", None) else None)
        release.job, _ = job_start(kind="release", subject=release, user=user)
        release.save(update_fields=["job"])
    return release


def release_writing(name: str) -> Optional[Release]:
    """The version of `name` being written now, if one is."""
    return Release.objects.filter(name=name, kind=Release.Kind.INSTANCES, job__state__in=Release.ACTIVE_STATES) \
        .select_related("job").first()


def release_asked_again(*, name: str, dataset, states: tuple, since: Optional[date], user) -> Optional[Release]:
    """The version of `name` being written now when the same person asked it of the same dataset, states
    and date (asked twice: that one, not a second); None otherwise (release_start then says why not)."""
    writing = release_writing(name)
    if writing is not None and writing.dataset_id == dataset.pk and writing.created_by_id == user.pk \
            and set(writing.states) == set(states) and writing.since == since:
        return writing
    return None


def _scope_tasks(scope: ReleaseScope, states, since: Optional[date]):
    if scope.kind == Release.Scope.DATASET:
        tasks = dataset_tasks(scope.dataset)
    elif scope.kind == Release.Scope.REPOSITORY:
        tasks = Task.objects.filter(repository=scope.repository)
    else:
        tasks = Task.objects.filter(id__in=scope.view_task_ids)
    tasks = tasks.filter(state__in=states)
    if since:
        tasks = tasks.filter(commit__committed_at__date__gt=since)
    return tasks


def _release_scope(release: Release) -> ReleaseScope:
    if release.scope == Release.Scope.DATASET and release.dataset is None or \
            release.scope == Release.Scope.REPOSITORY and release.repository is None:
        raise JobFailed("scope_gone", f"the {release.scope} {release.scope_label!r} was deleted")
    return ReleaseScope(release.scope, release.scope_label, release.dataset, release.repository,
                        tuple(release.view_task_ids))


# --- writing a release -------------------------------------------------------------------------


def release_job_work(job, progress) -> None:
    """The registered `run` of a release: the rows streamed to a folder of this attempt's own, then,
    unless they are the latest version's rows again, the folder renamed to NAME@N as N is recorded.
    Safe to run twice: another attempt's folder is removed and the rows written again."""
    release = Release.objects.select_related("dataset", "repository").get(job=job)
    task_ids = list(_scope_tasks(_release_scope(release), release.states, release.since)
                    .order_by("instance_id").values_list("id", flat=True))
    if not task_ids:
        raise JobFailed("nothing_to_release", "no task of its scope is in the states asked for any more")
    work = _attempt_folder(Path(release.folder), release.name, job, progress)
    try:
        files, summary = _instances_write(work, task_ids, progress)
        same = _same_as(release, files)
        if same is None:
            sources, licences = _sources_write(work, summary, progress)
            files, summary.sources_written, summary.licences = [*files, *sources], sources, licences
            files += _environments_write(work, summary, f"{release.name}")
        if same is not None:
            progress.complete(lambda: Release.objects.filter(id=release.id).update(
                same_as=same, task_count=len(task_ids), files=[]))
            return
        _publish(release, work, files, summary, task_ids, progress)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _attempt_folder(base: Path, stem: str, job, progress) -> Path:
    """A hidden folder of this attempt's own beside where the files end up (its worker's lease in
    its name: a worker that lost the job never writes into the folder of the one that took it);
    earlier attempts' folders of the job are removed."""
    base.mkdir(parents=True, exist_ok=True)
    for earlier in base.glob(f".{stem}.job{job.id}-*"):
        shutil.rmtree(earlier, ignore_errors=True)
    work = base / f".{stem}.job{job.id}-{progress.lease.token[:12]}"
    work.mkdir()
    return work


def _target_free(target: Path, release: Release) -> None:
    """Make way for a release's folder: only a folder this very release left (an attempt whose
    version was never recorded) is removed; anything else there stops the job."""
    if not target.exists():
        return
    try:
        uid = json.loads((target / MANIFEST).read_text()).get("uid")
    except (OSError, ValueError, AttributeError):
        uid = None
    if uid != str(release.uid):
        raise JobFailed("release_folder_taken", f"{target} exists and is not this release's: move it away, or "
                                                "release into another folder (--out)")
    shutil.rmtree(target)


def _instances_write(work: Path, task_ids: list[int], progress) -> tuple[list[WrittenFile], "Summary"]:
    jsonl, parquet = JsonLines(work / INSTANCES_JSONL), ParquetRows(work / INSTANCES_PARQUET, release_schema())
    summary, environments = Summary(), {}
    progress.report(0, len(task_ids))
    for start in range(0, len(task_ids), CHUNK):
        chunk = task_ids[start:start + CHUNK]
        rows = [instance_row(task) for task in released_tasks(chunk, summary, environments)]
        jsonl.write(rows)
        parquet.write(rows)
        progress.report(start + len(chunk), len(task_ids))
    return [jsonl.close(), parquet.close()], summary


def _same_as(release: Release, files: list[WrittenFile]) -> Optional[Release]:
    """The latest version of the name, when it was asked for the same way and its rows are these
    rows: nothing changed, so no version is made."""
    latest = (Release.objects.filter(name=release.name, kind=Release.Kind.INSTANCES, version__isnull=False,
                                     withdrawn_at__isnull=True).order_by("-version").first())
    asked = lambda one: (one.scope, one.scope_label, one.states, one.since)  # noqa: E731
    if latest is None or asked(latest) != asked(release):
        return None
    rows = {file["name"]: file["sha256"] for file in latest.files}
    # A version written before releases carried their environments is made again with them.
    carries = "environments" in latest.manifest
    return latest if carries and rows.get(INSTANCES_JSONL) == files[0].sha256 else None


def _publish(release: Release, work: Path, files: list[WrittenFile], summary: "Summary", task_ids: list[int],
             progress) -> None:
    def store():
        # Every row of the name is locked: two releases of one name are numbered one after the
        # other. Versions only grow: a withdrawn version's number is never given again.
        versions = list(Release.objects.select_for_update().filter(name=release.name, kind=Release.Kind.INSTANCES)
                        .values_list("version", flat=True))
        number = max(filter(None, versions), default=0) + 1
        target = Path(release.folder) / f"{release.name}@{number}"
        _target_free(target, release)
        manifest = release_manifest(release, number, summary, files)
        written = manifest_write(work, manifest)
        work.rename(target)
        Release.objects.filter(id=release.id).update(
            version=number, folder=str(target), files=[file.described() for file in [*files, written]],
            manifest=manifest, task_count=len(task_ids), task_ids=task_ids)
    progress.complete(store)


@dataclass
class Summary:
    """What the manifest says of the rows, gathered as they are made."""

    repositories: Counter = field(default_factory=Counter)
    states: Counter = field(default_factory=Counter)
    sources: Counter = field(default_factory=Counter)
    first_commit: Optional[datetime] = None
    last_commit: Optional[datetime] = None
    fail_to_pass: int = 0
    pass_to_pass: int = 0
    sources_written: list = field(default_factory=list)  # WrittenFile of each source archive and licence file
    licences: dict = field(default_factory=dict)  # repository name -> {file, spdx, commit} (file None: none found)
    issue_models: defaultdict = field(default_factory=lambda: defaultdict(set))  # (model, prompt, version) -> tasks
    test_models: defaultdict = field(default_factory=lambda: defaultdict(set))
    datasets: set = field(default_factory=set)
    # repository name -> (its mirror, {base commit: its commit date}): what the source archives are made of
    bases: dict = field(default_factory=dict)
    # environment key -> (the environment, its setup commit, its repository's name, [(instance id, base
    # commit)]), and the tasks
    # with none (imported ones)
    environments: dict = field(default_factory=dict)
    without_environment: int = 0
    environments_written: list = field(default_factory=list)  # the manifest's entries

    def add(self, task: Task, released: ReleasedTask, environment: Optional[Environment] = None,
            setup: str = "") -> None:
        mirror, bases = self.bases.setdefault(task.repository.name, (task.repository.mirror_dir, {}))
        if released.base_commit:
            bases.setdefault(released.base_commit, task.commit.committed_at)
        if environment is None:
            self.without_environment += 1
        else:
            _, setup, _, tasks = self.environments.setdefault(environment.key,
                                                              (environment, setup, task.repository.name, []))
            tasks.append((released.instance_id, released.base_commit))
            if setup:  # the environment stage installs the project from this tree
                bases.setdefault(setup, None)
        self.repositories[task.repository.name] += 1
        self.states[task.state] += 1
        self.sources[task.source] += 1
        when = task.commit.committed_at
        self.first_commit = min(filter(None, (self.first_commit, when)))
        self.last_commit = max(filter(None, (self.last_commit, when)))
        self.fail_to_pass += len(released.fail_to_pass)
        self.pass_to_pass += len(released.pass_to_pass)


def release_manifest(release: Release, number: int, summary: Summary, files: list[WrittenFile]) -> dict:
    repositories = sorted(summary.repositories)
    imports = sorted(Import.objects.filter(kind=Import.Kind.INSTANCES, dataset_id__in=summary.datasets)
                     .values_list("file_name", flat=True).distinct())
    return {
        "release": release.name, "version": number, "uid": str(release.uid), "preview": release.preview,
        "created_at": django_timezone.now().isoformat(), "commitgym_version": commitgym_version(),
        "scope": {"kind": release.scope, "name": release.scope_label},
        "states": release.states, "since": release.since.isoformat() if release.since else None,
        "counts": {"tasks": sum(summary.states.values()), "states": dict(sorted(summary.states.items())),
                   "sources": dict(sorted(summary.sources.items())), "repositories": len(repositories),
                   "fail_to_pass_tests": summary.fail_to_pass, "pass_to_pass_tests": summary.pass_to_pass},
        "sources": {
            "repositories": [{"name": name, "tasks": summary.repositories[name]} for name in repositories],
            "commit_dates": {"first": _day(summary.first_commit), "last": _day(summary.last_commit)},
            "imports": imports,
        },
        "source_archives": [{"repository": name, "commit": commit, "file": archive}
                            for name, commit, archive in _archives_listed(summary) if archive],
        "source_archives_missing": [{"repository": name, "commit": commit}
                                    for name, commit, archive in _archives_listed(summary) if not archive],
        "licences": summary.licences,
        "environments": summary.environments_written,
        "tasks_without_environment": summary.without_environment,
        "rules": {"curation": _curation_rules(), "mining_filters": _mining_filters(repositories)},
        "models": {"issues": _models_listed(summary.issue_models), "tests": _models_listed(summary.test_models)},
        "files": [file.described() for file in files],
    }


SOURCES, LICENCES = "sources", "licences"


def _slug(repository: str) -> str:
    return repository.replace("/", "__")


def _archive_name(repository: str, commit: str) -> str:
    return f"{SOURCES}/{_slug(repository)}-{commit}.tar.gz"


def _archives_listed(summary: Summary) -> list[tuple[str, str, str]]:
    """(repository, base commit, its archive's name or "" where none could be made)."""
    written = {file.name for file in summary.sources_written}
    return [(name, commit, _archive_name(name, commit) if _archive_name(name, commit) in written else "")
            for name, (_, bases) in sorted(summary.bases.items()) for commit in sorted(bases)]


def _sources_write(work: Path, summary: Summary, progress) -> tuple[list[WrittenFile], dict]:
    """Per repository: a source archive at each base commit of its released tasks (what a task's image
    adds to its environment's), and its licence files as of the newest of them, each with its SPDX
    identifier where the text is a common licence. A base commit no mirror here holds (an imported
    instance's, say) gets no archive, and the manifest says so; any other git failure fails the job."""
    (work / SOURCES).mkdir()
    (work / LICENCES).mkdir()
    written, licences = [], {}
    tasks = sum(summary.repositories.values())
    for name, (mirror, bases) in sorted(summary.bases.items()):
        archived = []
        for commit in sorted(bases):
            progress.report(tasks, tasks)  # every row is written; a cancel asked meanwhile stops here
            if not (mirror.is_dir() and commit_exists(mirror, commit)):
                continue
            target = work / _archive_name(name, commit)
            archive_write(mirror, commit, target, prefix=_slug(name))
            written.append(_described(work, target))
            archived.append(commit)
        if not archived:
            licences[name] = {"commit": None, "files": [],
                              "why": "no mirror of the repository here holds its base commits"}
            continue
        newest = max(archived, key=lambda commit: str(bases[commit] or ""))
        licences[name] = _licences_copied(work, mirror, name, newest, written)
    return written, licences


def _environments_write(work: Path, summary: Summary, release: str) -> list[WrittenFile]:
    """Per environment the released tasks use: its Dockerfile, lock, task list and generated files
    (worker.engine.env.rebuild), then the folder's README and the empty extra CA file the
    Dockerfiles copy. The manifest's entries are kept in the summary."""
    written = {file.name for file in summary.sources_written}
    archive = lambda name, commit: _archive_name(name, commit) if _archive_name(name, commit) in written else ""  # noqa: E731
    files, releasable, unreachable = [], [], []
    for key, (environment, setup, name, tasks) in sorted(summary.environments.items()):
        hashes, missing = ({}, unreachable) if unreachable else _index_hashes(environment.lock)
        if missing and missing[-1].startswith("the index "):
            unreachable = missing[-1:]  # asked once: an index that cannot be reached is not asked again
        one = EnvironmentToRelease(
            key=key, python_version=environment.python_version, lock=environment.lock,
            strategy=environment.strategy, setup_archive=archive(name, setup) if setup else "",
            tasks=tuple((instance, archive(name, base)) for instance, base in tasks), tool_version=_uv_version(),
            as_of=environment.as_of, lifted=dict(environment.lifted), generated=tuple(environment.generated_files),
            image=environment.image, hashes=hashes)
        why = unreleasable(one)
        if why:  # no files: the manifest says why, and its tasks have no image
            summary.environments_written.append({"key": key, "tasks": [instance for instance, _ in tasks],
                                                 "dockerfile": None, "why": why})
            continue
        files += [_described(work, path) for path in environment_folder_write(work, one, release)]
        releasable.append(one)
        summary.environments_written.append({
            "key": key, "python_version": one.python_version, "built_by": one.tool, "base": default_base(one),
            "install_strategy": one.strategy, "setup_commit": setup or None, "setup_archive": one.setup_archive or None,
            "lock": f"{ENVIRONMENTS}/{key}/requirements.lock",
            "lock_sha256": file_sha256(work / ENVIRONMENTS / key / "requirements.lock"), "lock_unhashed": missing,
            "dockerfile": f"{ENVIRONMENTS}/{key}/Dockerfile", "as_of": one.as_of or None, "lifted": one.lifted,
            "tasks": [instance for instance, _ in tasks], "image_id": None,
            **({} if all(source for _, source in one.tasks) else
               {"why": "some base commits have no source archive here: those tasks' images cannot be built"})})
    (work / EXTRA_CA).write_text("")
    (work / "README.md").write_text(release_readme(release, releasable))
    return [*files, _described(work, work / "README.md")]


def _index_hashes(lock: str) -> tuple[dict, list[str]]:
    """The index's hashes of the lock's files (worker.engine.env.index_hashes), through this machine's CA."""
    cafile = settings.COMMITGYM_CA_BUNDLE or None
    return lock_hashes(lock, index=settings.COMMITGYM_INDEX_URL,
                       page=lambda url: simple_page(url, timeout=20, cafile=cafile))


def _uv_version() -> str:
    try:
        return package_version("uv")
    except PackageNotFoundError:
        return ""


def _licences_copied(work: Path, mirror: Path, name: str, commit: str, written: list) -> dict:
    """Every licence file at the top of the tree (a project under the LGPL keeps the GPL beside it; a
    dual-licensed one, both), each with its SPDX identifier or null."""
    files = []
    for found in licence_files(top_level_files(mirror, commit)):
        data = file_at(mirror, commit, found)
        if data is None:
            files.append({"file": None, "spdx": None, "name": found, "why": "larger than a licence file"})
            continue
        target = work / LICENCES / f"{_slug(name)}-{found}"
        target.write_bytes(data)
        written.append(_described(work, target))
        files.append({"file": f"{LICENCES}/{target.name}", "spdx": licence_spdx(data.decode("utf-8", "replace"))})
    return {"commit": commit, "files": files, **({} if files else {"why": "none found"})}


def _described(work: Path, path: Path) -> WrittenFile:
    return WrittenFile(str(path.relative_to(work)), path.stat().st_size, file_sha256(path))


def _day(when: Optional[datetime]) -> Optional[str]:
    return when.date().isoformat() if when else None


def _curation_rules() -> dict:
    rules = CurationSettings.current()
    return {"required_reviews": rules.required_reviews, "underspecified_below": rules.underspecified_below,
            "false_negative_below": rules.false_negative_below}


def _mining_filters(names: list[str]) -> dict:
    mined = Repository.objects.filter(name__in=names, tasks__source=Task.Source.MINED).distinct()
    return {repository.name: {"max_files": repository.max_files, "max_lines": repository.max_lines,
                              "max_patch_chars": repository.max_patch_chars,
                              "test_file_globs": repository.test_file_globs,
                              "test_dir_names": repository.test_dir_names} for repository in mined}


def _models_listed(tasks_by_model: dict) -> list[dict]:
    return [{"model": model, "prompt": prompt, "prompt_version": prompt_version, "tasks": len(tasks)}
            for (model, prompt, prompt_version), tasks in sorted(tasks_by_model.items(), key=str)]


# --- the rows ----------------------------------------------------------------------------------


# What a release reads of a task's commit and repository: not their long texts and lists.
_TASK_UNREAD = ("commit__message", "commit__source_files", "commit__test_files", "commit__other_files",
                "repository__credential_token", "repository__credential_ssh_key")


def released_tasks(task_ids: list[int], summary: Optional[Summary] = None,
                   environments: Optional[dict] = None) -> list[ReleasedTask]:
    """The tasks as released, in the order of `task_ids`: a few queries and one git process per
    repository, however many tasks. `environments` keeps what was read of the environments (and
    where each was set up) from one call to the next: thousands of tasks share a few."""
    summary = summary if summary is not None else Summary()
    environments = environments if environments is not None else {}
    latest = (Validation.objects.filter(task=OuterRef("pk"), verdict="valid", job__state=Validation.State.SUCCEEDED)
              .order_by("generated", "-created_at", "-id").values("id")[:1])
    tasks = {task.id: task for task in Task.objects.filter(id__in=task_ids)
             .select_related("repository", "commit", "imported_instance").defer(*_TASK_UNREAD)
             .annotate(oracle_id=Subquery(latest))}
    validations = {validation.id: validation for validation in Validation.objects.filter(
        id__in=[task.oracle_id for task in tasks.values() if task.oracle_id]).only(
        "id", "task_id", "generated", "fail_to_pass", "pass_to_pass", "environment_id")}
    _environments_read({v.environment_id for v in validations.values() if v.environment_id}, environments)
    issues = _issues(task_ids, summary)
    patches = _patches([task for task in tasks.values() if not task.imported])
    generated = _generated_files([validation for validation in validations.values() if validation.generated],
                                 summary)
    difficulty = _difficulties(task_ids)
    summary.datasets.update(Dataset.objects.filter(memberships__task_id__in=task_ids).values_list("id", flat=True))
    released = []
    for task_id in task_ids:
        task = tasks[task_id]
        validation = validations.get(task.oracle_id)
        environment, setup = environments.get(validation.environment_id, (None, "")) if validation else (None, "")
        one = _released(task, validation, environment, setup, issues.get(task_id, ""), patches.get(task_id, NO_PATCHES),
                        generated.get(task.oracle_id, {}), difficulty.get(task_id, ""))
        summary.add(task, one, environment, setup)
        released.append(one)
    return released


def _released(task: Task, validation: Optional[Validation], environment: Optional[Environment], setup: str,
              issue: str, patches, generated: dict, difficulty: str) -> ReleasedTask:
    excluded = set(task.excluded_tests)
    if task.imported:
        instance = task.imported_instance
        fields = dict(patch=instance.patch, test_patch=instance.test_patch, hints_text=instance.hints_text,
                      created_at=instance.created_at, version=instance.version,
                      environment_setup_commit=instance.environment_setup_commit,
                      fail_to_pass=instance.fail_to_pass, pass_to_pass=instance.pass_to_pass)
    else:
        fields = dict(patch=patches.source_patch, test_patch=patches.test_patch + files_added_patch(generated),
                      created_at=task.commit.committed_at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                      version=environment.key[:12] if environment else "",
                      environment_setup_commit=setup,
                      fail_to_pass=validation.fail_to_pass if validation else [],
                      pass_to_pass=validation.pass_to_pass if validation else [])
    owner, name = task.repository.owner_and_name
    return ReleasedTask(
        instance_id=task.instance_id, repo=task.repository.name if task.imported else f"{owner}/{name}",
        base_commit=task_base_sha(task), problem_statement=issue,
        **{**fields, "fail_to_pass": tuple(t for t in fields["fail_to_pass"] if t not in excluded),
           "pass_to_pass": tuple(t for t in fields["pass_to_pass"] if t not in excluded)},
        python_version=environment.python_version if environment else "",
        lock=environment.lock if environment else "", install_strategy=environment.strategy if environment else "",
        suite_args=tuple(environment.suite_args) if environment else (),
        environment_key=environment.key if environment else "", mutation_score=task.mutation_score,
        underspecified=task.underspecified, false_negative=task.false_negative, difficulty=difficulty)


def _issues(task_ids: list[int], summary: Summary) -> dict[int, str]:
    """Each task's problem statement (its current issue version), counting the models that wrote them."""
    by_task = defaultdict(list)
    for version in IssueVersion.objects.filter(task_id__in=task_ids).select_related("model_call").only(
            "task_id", "number", "author", "text", "model_call__model", "model_call__prompt_name",
            "model_call__prompt_version"):
        by_task[version.task_id].append(version)
    texts = {}
    for task_id, versions in by_task.items():
        issue = current_issue(versions)
        texts[task_id] = issue.text
        if issue.model_call_id:
            call = issue.model_call
            summary.issue_models[call.model, call.prompt_name, call.prompt_version].add(task_id)
    return texts


def _patches(tasks: list[Task]) -> dict[int, object]:
    """Mined tasks' source and test patches, one git process per repository."""
    by_repository = defaultdict(list)
    for task in tasks:
        by_repository[task.repository].append(task)
    found = {}
    for repository, repository_tasks in by_repository.items():
        try:
            pairs = [(task.commit.sha, task.commit.parent_sha) for task in repository_tasks]
            split = commits_patches(repository.mirror_dir, pairs, repository.test_file_rules())
        except (GitError, OSError) as error:
            raise JobFailed("no_mirror", f"the patches of {repository.name} cannot be read from its mirror: "
                                         f"{error}") from None
        found.update({task.id: split[task.commit.sha] for task in repository_tasks})
    return found


def _generated_files(validations: list[Validation], summary: Summary) -> dict[int, dict[str, str]]:
    """{validation id: {path: text}} of the generated tests a validation kept, for tasks whose oracle
    they are: the release's test patch adds them."""
    found = defaultdict(dict)
    for test in GeneratedTest.objects.filter(validation__in=validations, state=GeneratedTest.State.KEPT) \
            .select_related("model_call"):
        found[test.validation_id][test.path] = test.content
        if test.model_call_id:
            call = test.model_call
            summary.test_models[call.model, call.prompt_name, call.prompt_version].add(test.task_id)
    return found


def _environments_read(environment_ids: set[int], environments: dict) -> None:
    """{environment id: (the environment, the base commit of the task whose validation built it:
    SWE-bench's environment_setup_commit)} for those not read yet."""
    missing = environment_ids - set(environments)
    if not missing:
        return
    setup = {}
    for row in (Validation.objects.filter(environment_id__in=missing, environment_reused=False)
                .order_by("created_at", "id").select_related("task__commit")
                .only("environment_id", "task__source", "task__commit__sha", "task__commit__parent_sha")):
        setup.setdefault(row.environment_id, task_base_sha(row.task))
    for environment in Environment.objects.filter(id__in=missing):
        environments[environment.id] = (environment, setup.get(environment.id, ""))


def _difficulties(task_ids: list[int]) -> dict[int, str]:
    """The difficulty most of a task's current reviews gave (the harder one on a tie)."""
    votes = defaultdict(Counter)
    for task_id, difficulty in Review.objects.filter(task_id__in=task_ids, current=True).exclude(difficulty="") \
            .values_list("task_id", "difficulty"):
        votes[task_id][difficulty] += 1
    order = [value for value, _ in Review.DIFFICULTY_CHOICES]
    return {task_id: max(counted, key=lambda d: (counted[d], order.index(d) if d in order else -1))
            for task_id, counted in votes.items()}


def release_waited(release: Release, *, stderr, timeout: float) -> Release:
    """For a command: wait for a release's (or export's) job to end, a worker started for it on the
    embedded default; CommandError unless it succeeded."""
    job_waited(release.job_id, queues="curation", what=f"the {release.get_kind_display().lower()}", stderr=stderr,
               timeout=timeout)
    return Release.objects.select_related("job", "of", "same_as").get(id=release.id)


# --- withdrawing -------------------------------------------------------------------------------


def release_file_found(release: Release, name: str) -> Optional[Path]:
    """The path of a file the release lists, while it is on disk at the size written; else None."""
    described = next((file for file in release.files if file["name"] == name), None)
    path = Path(release.folder) / name
    if described is None or not path.is_file() or path.stat().st_size != described["bytes"]:
        return None
    return path


def release_withdraw(*, release: Release, user, reason: str) -> Release:
    """Mark a written version withdrawn, with why; its files and its number are kept."""
    reason = (reason or "").strip()
    if release.kind != Release.Kind.INSTANCES or release.version is None:
        raise ReleaseRefused("only a written release version can be withdrawn")
    if not reason:
        raise ReleaseRefused("say why the release is withdrawn")
    if release.withdrawn_at:
        raise ReleaseRefused(f"{release} was withdrawn already, on {release.withdrawn_at:%Y-%m-%d}")
    Release.objects.filter(id=release.id).update(withdrawn_at=django_timezone.now(), withdrawn_by=user,
                                                 withdrawn_reason=reason[:5000])
    release.refresh_from_db()
    return release


def release_named(text: str) -> Release:
    """NAME@N, or NAME for its latest version; ReleaseRefused when there is none."""
    named = re.fullmatch(r"(?P<name>[^@]+)(@(?P<number>[0-9]{1,9}))?", text or "")
    if named is None:
        raise ReleaseRefused(f"{text!r} is not NAME or NAME@VERSION")
    versions = Release.objects.filter(kind=Release.Kind.INSTANCES, name=named["name"], version__isnull=False)
    number = named["number"]
    found = versions.filter(version=int(number)).first() if number else versions.order_by("-version").first()
    if found is None:
        raise ReleaseRefused(f"no release {text}")
    return found


# --- exports -----------------------------------------------------------------------------------


def export_start(*, release: Release, kind: str, user=None) -> Release:
    """Queue an export of training data (Release.Kind.TRAJECTORIES or JUDGE) from a written,
    current release's tasks."""
    if kind not in (Release.Kind.TRAJECTORIES, Release.Kind.JUDGE):
        raise ReleaseRefused(f"unknown export {kind!r}: choose trajectories or judge")
    if release.kind != Release.Kind.INSTANCES or release.version is None:
        raise ReleaseRefused("exports are made from a written release version")
    if release.withdrawn_at:
        raise ReleaseRefused(f"{release} is withdrawn: export from a current version")
    with transaction.atomic():
        export = Release.objects.create(kind=kind, name=release.name, of=release, scope=release.scope,
                                        scope_label=release.scope_label, states=release.states,
                                        preview=release.preview, folder=f"{release.folder}.exports",
                                        created_by=user if getattr(user, "pk", None) else None)
        export.job, _ = job_start(kind="export", subject=export, user=user)
        export.save(update_fields=["job"])
    return export


def export_job_work(job, progress) -> None:
    """The registered `run` of an export: its rows streamed to `<release>.exports/<kind>-<id>/`."""
    export = Release.objects.select_related("of").get(job=job)
    target = Path(export.folder) / f"{export.kind}-{export.id}"
    work = _attempt_folder(Path(export.folder), export.kind, job, progress)
    try:
        writer = JsonLines(work / f"{export.kind}.jsonl")
        counts = Counter()
        task_ids = export.of.task_ids
        progress.report(0, len(task_ids))
        for start in range(0, len(task_ids), CHUNK):
            chunk = task_ids[start:start + CHUNK]
            writer.write(list(export_rows(export.kind, chunk, counts)))
            progress.report(start + len(chunk), len(task_ids))
        written = writer.close()
        manifest = {"export": export.kind, "release": str(export.of), "preview": export.preview,
                    "created_at": django_timezone.now().isoformat(), "commitgym_version": commitgym_version(),
                    "counts": dict(sorted(counts.items())), "files": [written.described()]}

        def store():
            described = manifest_write(work, manifest)
            shutil.rmtree(target, ignore_errors=True)
            work.rename(target)
            Release.objects.filter(id=export.id).update(folder=str(target), manifest=manifest,
                                                        files=[written.described(), described.described()],
                                                        task_count=len(task_ids))
        progress.complete(store)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def export_rows(kind: str, task_ids: list[int], counts: Counter) -> Iterator[dict]:
    tasks = {task.id: task for task in Task.objects.filter(id__in=task_ids).select_related("repository")}
    issues = _issues(task_ids, Summary())
    candidates = (Candidate.objects.filter(task_id__in=task_ids).exclude(source__in=NOT_FOR_JUDGES)
                  .select_related("run").order_by("task__instance_id", "id"))
    # A resolved candidate the hacking detector flagged is left out until a curator clears it (its
    # resolution is in doubt); one a curator confirmed games the tests: a judge learns it is wrong.
    doubted = candidates.filter(outcome="resolved", suspicious=True)
    if kind == Release.Kind.TRAJECTORIES:
        doubted = doubted.exclude(trajectory=[])
        candidates = candidates.filter(RESOLVED).exclude(trajectory=[])
    else:
        doubted = doubted.exclude(hacking_review=HackingReview.CONFIRMED)
        candidates = candidates.filter(outcome__in=list(JUDGE_LABELS)).exclude(id__in=doubted.values("id"))
    left_out = doubted.count()
    if left_out:
        counts["suspicious_left_out"] += left_out
    people = PEOPLE_LABELS.context(task_ids=task_ids) if kind == Release.Kind.JUDGE else {}
    for candidate in candidates.iterator(chunk_size=500):
        task = tasks[candidate.task_id]
        common = dict(instance_id=task.instance_id, candidate_id=candidate.id, run=candidate.run.name
                      if candidate.run_id else candidate.kind, problem_statement=issues.get(task.id, ""))
        if kind == Release.Kind.TRAJECTORIES:
            counts["trajectories"] += 1
            yield trajectory_row(**common, repo=task.repository.name, steps=candidate.trajectory,
                                 patch=candidate.patch)
        else:
            label = JUDGE_LABELS[candidate.outcome] and candidate.resolved
            label_source = ("curator:hacking_confirmed" if JUDGE_LABELS[candidate.outcome] != label else
                            f"hidden_tests:{candidate.outcome_source or 'graded'}")
            if candidate.id in people:  # people's final label is the truth the tests are measured against
                label, label_source = people[candidate.id]
                counts["labelled_by_people"] += 1
            counts["right" if label else "wrong"] += 1
            yield judge_row(**common, source=candidate.source, patch=candidate.patch,
                            steps=candidate.trajectory or None, resolved=label, label_source=label_source)
