"""Writes for repositories and mining. Views, commands and Celery jobs call these."""

import logging
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

from celery.exceptions import SoftTimeLimitExceeded
from cryptography.fernet import InvalidToken
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.accounts.roles import ADMIN, user_roles
from apps.bulk_insert import commits_flushed_later, rows_insert
from apps.jobs.leases import LeaseLost
from apps.jobs.models import Job
from apps.jobs.services import (
    JobCancelled,
    JobFailed,
    JobRefused,
    job_cancel,
    job_start,
)
from worker.engine.git.location import (
    LocationCheck,
    local_repository_refusal,
    remote_probe,
    scheme_refusal,
    ssh_key_refusal,
)
from worker.engine.git.repo import (
    BlobReader,
    GitCredentials,
    GitError,
    commit_count,
    commit_exists,
    default_branch_tip,
    mirror_sync,
    url_split_credentials,
)
from worker.engine.mine.filters import drop_reason, size_drop_reason
from worker.engine.mine.walk import MinedCommit, commits_walk, python_changes_checked
from worker.engine.reasons import IMPORT_REASONS

from .models import Commit, MiningJob, Repository
from .registry import COMMITS_DROPPED, COMMITS_KEPT, REPOSITORY_DELETING
from .secrets import secret_encrypt

log = logging.getLogger(__name__)

BATCH_SIZE = 500
MERGE_COMMIT = "merge_commit"  # a reason of its own: no filter measures a merge


# --- repositories -------------------------------------------------------------


def _is_remote(location: str) -> bool:
    return "://" in location or re.match(r"^[\w.-]+@[\w.-]+:", location) is not None


def location_normalize(location: str) -> str:
    """Local paths become absolute; URLs stay as given."""
    location = location.strip()
    if _is_remote(location):
        return location
    return str(Path(location).expanduser().resolve())


MAX_NAME_CHARS = 200  # Repository.name's column
# owner/name, in the characters task ids use; no "__" in the owner, so `owner__name` reads back one way.
REPOSITORY_NAME = re.compile(r"(?![^/]*__)[A-Za-z0-9._-]+/[A-Za-z0-9._-]+")


class RepositoryRefused(ValueError):
    """The location or name cannot be registered; the message says why, `field` which input."""

    def __init__(self, message: str, *, field: str = "location"):
        super().__init__(message)
        self.field = field


def _name_part(text: str) -> str:
    return re.sub(r"_{2,}", "_", re.sub(r"[^A-Za-z0-9._-]+", "-", text)).strip("-") or "repository"


def repository_name_from_location(location: str) -> str:
    """`https://host/owner/repo.git` -> `owner/repo`; a local path -> `local/<folder>`; each part cut
    so that the name, with a "-N" to tell it from another, fits its column."""
    if _is_remote(location):
        path = urlsplit(location).path if "://" in location else location.split(":", 1)[1]
        parts = [p for p in path.strip("/").split("/") if p]
        parts = [re.sub(r"\.git$", "", p) for p in parts[-2:]] or ["repository"]
        owner, name = parts if len(parts) == 2 else ["remote", parts[0]]
    else:
        owner, name = "local", re.sub(r"\.git$", "", Path(location).name)
    return f"{_name_part(owner)[:60].strip('-')}/{_name_part(name)[:MAX_NAME_CHARS - 70].strip('-') or 'repository'}"


def _local_path(location: str, *, resolved: bool = True):
    """The folder a location reads from this machine (as written, or with every link resolved),
    or None for a remote one. Schemes are compared as git does, whatever their case."""
    if _is_remote(location) and urlsplit(location).scheme.lower() != "file":
        return None
    path = Path(urlsplit(location).path) if _is_remote(location) else Path(location)
    return path.resolve() if resolved else path


def _location_check(location: str, user) -> None:
    """Local folders are read by the worker with its own rights: the mirrors are never
    registered, and people who are not admins register only folders under the allowed roots."""
    path = _local_path(location)
    if path is None:
        return
    mirrors = Path(settings.COMMITGYM_MIRROR_DIR).resolve()
    if path == mirrors or mirrors in path.parents:
        raise RepositoryRefused("This folder holds commitgym's own mirrors and cannot be registered.")
    if user is None or ADMIN in user_roles(user):
        return
    roots = [Path(root).resolve() for root in settings.COMMITGYM_LOCAL_ROOTS]
    if not any(path == root or root in path.parents for root in roots):
        raise RepositoryRefused(
            "Local folders can be registered only by an admin, or under a folder the operator allowed "
            "(COMMITGYM_LOCAL_ROOTS). Use the repository's URL instead.")


def _location_recheck(repository: Repository) -> None:
    """Before every fetch: a local folder must still be the one registered (not replaced by a link,
    to another repository's folder or a mirror), still allowed to whoever registered it, and must
    not borrow objects from another repository (git follows a repository's alternates)."""
    written = _local_path(repository.url, resolved=False)
    if written is None:
        return
    resolved = written.resolve()
    if resolved != written.absolute():
        raise RepositoryRefused(f"The folder {written} is now a link to {resolved}: it is not fetched. "
                                "Register the repository where it is now.")
    _location_check(repository.url, repository.created_by)
    for git_dir in (resolved, resolved / ".git"):
        alternates = git_dir / "objects" / "info" / "alternates"
        if alternates.exists() or alternates.is_symlink():
            raise RepositoryRefused(f"The repository at {written} borrows objects from another one "
                                    f"({alternates.relative_to(resolved)}): it is not fetched.")


def repository_fetch(repository: Repository, credentials: GitCredentials) -> None:
    """Bring the repository's mirror up to date, its location checked again first."""
    try:
        _location_recheck(repository)
    except RepositoryRefused as refused:
        raise GitError("location_refused", str(refused)) from None
    mirror_sync(repository.url, repository.mirror_dir, credentials=credentials, timeout=settings.COMMITGYM_GIT_TIMEOUT)


def repository_find(*, location: str):
    """A registered repository by its name, URL or path (credentials in a URL are ignored)."""
    clean, _ = url_split_credentials(location.strip())
    return (
        Repository.objects.filter(Q(name=location.strip()) | Q(url=clean) | Q(url=location_normalize(clean)))
        .order_by("id")
        .first()
    )


def repository_register(
    *, location: str, name: str = "", ssh_key: str = "", user=None, allowed_groups=()
) -> Repository:
    """Register a repository by URL or local path; a token in the URL is stored as a secret.
    `user` None is the command line, which may register any local folder."""
    if scheme_refusal(location.strip()):
        raise RepositoryRefused(scheme_refusal(location.strip()))
    url, credentials = url_split_credentials(location.strip())
    url = location_normalize(url)
    if name.strip() and not (REPOSITORY_NAME.fullmatch(name.strip()) and len(name.strip()) <= MAX_NAME_CHARS):
        raise RepositoryRefused(f"A name is owner/name, at most {MAX_NAME_CHARS} characters, in letters, digits, '.', "
                                "'-' and '_' (no '__' in the owner).", field="name")
    _location_check(url, user)
    if ssh_key_refusal(ssh_key):
        raise RepositoryRefused(ssh_key_refusal(ssh_key), field="ssh_key")
    checked = _location_reachable(url, GitCredentials(credentials.username, credentials.token, ssh_key.strip()))
    base = name.strip() or repository_name_from_location(url)
    # The checks above ran outside any transaction: a slow host holds no lock of the database.
    with transaction.atomic():
        repository = _repository_create(base, url, credentials, ssh_key, user, allowed_groups)
    repository.registration_warning = checked.warning  # for the page or the command to say
    return repository


def _repository_create(base: str, url: str, credentials, ssh_key: str, user, allowed_groups) -> Repository:
    unique, n = base, 1
    while Repository.objects.filter(name=unique).exists():
        n += 1
        unique = f"{base}-{n}"
    repository = Repository.objects.create(
        name=unique,
        url=url,
        credential_username=credentials.username,
        credential_token=secret_encrypt(credentials.token),
        credential_ssh_key=secret_encrypt(ssh_key.strip()),
        created_by=user,
    )
    if allowed_groups:
        repository.allowed_groups.set(allowed_groups)
    return repository


def _location_reachable(url: str, credentials: GitCredentials) -> LocationCheck:
    """A local folder must be a repository; a remote one is asked for its branches, briefly."""
    path = _local_path(url)
    checked = LocationCheck(refusal=local_repository_refusal(path)) if path is not None else \
        remote_probe(url, credentials)
    if checked.refusal:
        raise RepositoryRefused(checked.refusal)
    return checked


def repository_delete(*, repository: Repository) -> None:
    """Remove the repository's rows, its jobs' and its mirror. A worker still running one of its jobs
    finds the job gone at its next report and stops."""
    mirror = repository.mirror_dir
    with transaction.atomic():
        REPOSITORY_DELETING.call(repository)
        Job.objects.filter(subject_type="repositories.repository", subject_id=repository.pk).delete()
        repository.delete()
    shutil.rmtree(mirror, ignore_errors=True)


class RepositoryBusy(Exception):
    """The change has to wait until the repository's mining job ends."""


def repository_filters_update(
    *, repository: Repository, max_files: int, max_lines: int, max_patch_chars: int,
    test_file_globs: list[str], test_dir_names: list[str], user=None,
) -> MiningJob:
    """Save the filters and start the job that applies them. New limits are re-applied to
    the stored commits without walking history; new test-file rules need every diff
    measured again, so they start a full mining run."""
    rules_changed = (list(test_file_globs), list(test_dir_names)) != (
        list(repository.test_file_globs), list(repository.test_dir_names))
    asked = {"max_files": max_files, "max_lines": max_lines, "max_patch_chars": max_patch_chars,
             "test_file_globs": list(test_file_globs), "test_dir_names": list(test_dir_names)}
    with transaction.atomic():
        job, created = mining_job_start(repository=repository, user=user, refilter_only=not rules_changed,
                                        filters=asked)
        if not created:
            raise RepositoryBusy("A mining job is running for this repository; change the filters when it ends.")
        repository.max_files, repository.max_lines, repository.max_patch_chars = max_files, max_lines, max_patch_chars
        repository.test_file_globs, repository.test_dir_names = list(test_file_globs), list(test_dir_names)
        fields = list(FILTER_FIELDS)
        if rules_changed:
            repository.mined_head = ""
            fields.append("mined_head")
        repository.save(update_fields=fields)
    return job


# --- commits --------------------------------------------------------------------


def _python_change_for(blobs: BlobReader, repository: Repository, commit: Commit) -> bool:
    """Measure one stored commit's diff again, for the Python check the walk skipped."""
    walk = commits_walk(repository.mirror_dir, commit.sha, rules=repository.test_file_rules(), max_count=1,
                        hunks_up_to=repository.mining_filters().max_patch_chars,
                        max_blob_bytes=settings.COMMITGYM_MAX_BLOB_BYTES)
    try:
        (mined,) = python_changes_checked(walk, blobs)
    finally:
        walk.close()
    return mined.stats.python_change


def commits_refilter(*, repository: Repository) -> dict[str, int]:
    """Apply the repository's filters to its stored commits, without walking history."""
    filters = repository.mining_filters()
    changed, newly_kept, newly_dropped = [], [], []
    blobs = None
    try:
        for commit in Commit.objects.filter(repository=repository, kept_by__isnull=True, kept_at__isnull=True) \
                .exclude(drop_reason=MERGE_COMMIT).iterator(chunk_size=2000):
            stats = commit.stats
            checked = stats.python_change is None and stats.source_file_count and not size_drop_reason(stats, filters)
            if checked:
                blobs = blobs or BlobReader(repository.mirror_dir, max_blob_bytes=settings.COMMITGYM_MAX_BLOB_BYTES)
                commit.python_change = stats.python_change = _python_change_for(blobs, repository, commit)
            reason = drop_reason(stats, filters) or ""
            if not reason and commit.drop_reason:
                newly_kept.append(commit)
            elif reason and not commit.drop_reason:
                newly_dropped.append(commit)
            if checked or reason != commit.drop_reason:
                commit.drop_reason = reason
                changed.append(commit)
    finally:
        if blobs:
            blobs.close()
    with transaction.atomic():
        Commit.objects.bulk_update(changed, ["drop_reason", "python_change"], batch_size=1000)
        COMMITS_KEPT.call(repository)
        COMMITS_DROPPED.call([c.id for c in newly_dropped])
    return {"kept": len(newly_kept), "dropped": len(newly_dropped)}


class CommitNotKept(ValueError):
    """A commit that cannot be kept by hand; the message says why."""


def commit_keep(*, commit: Commit, user, note: str) -> Commit:
    """Keep a commit a filter dropped, with who and why: it gets a task, and filters applied again
    keep it."""
    note = (note or "").strip()
    if commit.kept:
        raise CommitNotKept("it is kept already")
    if commit.drop_reason == MERGE_COMMIT:
        raise CommitNotKept("a merge has no diff of its own: keep the commits it merges")
    if commit.drop_reason in IMPORT_REASONS:
        raise CommitNotKept("it was named by an import, not mined")
    if not note:
        raise CommitNotKept("say why it is kept")
    if MiningJob.objects.filter(repository=commit.repository_id, job__state__in=Job.ACTIVE_STATES).exists():
        raise CommitNotKept("a mining job is running on the repository: keep it once the job ends")
    with transaction.atomic():
        Commit.objects.filter(id=commit.id).update(kept_by=user, kept_note=note[:5000], kept_at=timezone.now(),
                                                   kept_reason=commit.drop_reason, drop_reason="")
        COMMITS_KEPT.call(commit.repository)
    return Commit.objects.get(id=commit.id)


def _commit_row(repository: Repository, mined: MinedCommit, reason: str) -> dict:
    stats = mined.stats
    return dict(
        repository_id=repository.id, sha=mined.sha, parent_sha=mined.parent_sha,
        author_name=mined.author_name[:255], author_email=mined.author_email[:255],
        authored_at=datetime.fromisoformat(mined.authored_at),
        committed_at=datetime.fromisoformat(mined.committed_at),
        message=mined.message, source_files=stats.source_files, test_files=stats.test_files,
        other_files=stats.other_files, source_file_count=stats.source_file_count,
        test_file_count=stats.test_file_count, other_file_count=stats.other_file_count,
        has_binary=stats.has_binary, has_large_file=stats.has_large_file,
        lines_added=stats.lines_added, lines_deleted=stats.lines_deleted,
        patch_chars=stats.patch_chars, python_change=stats.python_change,
        tests_changed=stats.tests_changed, drop_reason=reason,
    )


_MEASURED_FIELDS = [
    "source_files", "test_files", "other_files", "source_file_count", "test_file_count", "other_file_count",
    "has_binary", "has_large_file", "lines_added", "lines_deleted", "patch_chars", "python_change", "tests_changed",
    "drop_reason",
]


def commits_store(*, repository: Repository, batch: list[MinedCommit], maybe_stored: bool = True) -> int:
    """Filter and store one batch of mined commits, Python-checked where the size filters
    pass (`python_changes_checked`); return how many were new.

    Commits stored before (measured again after the test-file rules changed)
    are updated in place, and the tasks of those now dropped go; kept commits get
    their tasks from COMMITS_KEPT. A caller that knows none of the batch can be
    stored yet says `maybe_stored=False`."""
    filters = repository.mining_filters()
    rows = [_commit_row(repository, mined, MERGE_COMMIT if mined.merge else drop_reason(mined.stats, filters) or "")
            for mined in batch]
    with transaction.atomic():
        known = dict(Commit.objects.filter(repository=repository, sha__in=[row["sha"] for row in rows])
                     .values_list("sha", "id")) if maybe_stored else {}
        rows_insert(Commit, [row for row in rows if row["sha"] not in known])  # an import may add a base commit
        if known:
            by_hand = set(Commit.objects.filter(id__in=known.values(), kept_at__isnull=False)
                          .values_list("id", flat=True))
            for row in rows:  # a person kept it: measured again, still kept
                if known.get(row["sha"]) in by_hand:
                    row["drop_reason"] = ""
            remeasured = [Commit(id=known[row["sha"]], **row) for row in rows if row["sha"] in known]
            Commit.objects.bulk_update(remeasured, _MEASURED_FIELDS, batch_size=500)
            COMMITS_DROPPED.call([row.pk for row in remeasured if row.drop_reason])
    return len(rows) - len(known)


# --- mining jobs ------------------------------------------------------------------


FILTER_FIELDS = ("max_files", "max_lines", "max_patch_chars", "test_file_globs", "test_dir_names")


def mining_job_start(*, repository: Repository, user=None, refilter_only: bool = False,
                     filters: Optional[dict] = None) -> tuple[MiningJob, bool]:
    """Queue a mining job; if one is already queued or running, return that one. The job records
    the filters it applies (`filters`, else the repository's); a re-filter says so in what the jobs
    page shows of its subject."""
    with transaction.atomic():
        job, created = job_start(kind="mining", subject=repository, user=user)
        if not created:
            return MiningJob.objects.select_related("job").get(job=job), False
        filters = filters or {field: getattr(repository, field) for field in FILTER_FIELDS}
        if refilter_only:
            label = (f"{repository.name}: re-filter (≤ {filters['max_files']} files, ≤ {filters['max_lines']} lines, "
                     f"≤ {filters['max_patch_chars']:,} patch characters)")
            Job.objects.filter(id=job.id).update(subject_label=label[:255])
        return MiningJob.objects.create(job=job, repository=repository, refilter_only=refilter_only,
                                        filters=filters), True


def mining_job_cancel(*, job: MiningJob) -> None:
    """Queued jobs stop at once; a running job stops at its next batch, keeping what it stored."""
    try:
        job_cancel(job=job.job)
    except JobRefused:
        pass  # it ended meanwhile: nothing to stop


def mining_job_retry(*, job: MiningJob, user=None) -> MiningJob:
    """A new job doing what the given one was for."""
    return mining_job_start(repository=job.repository, user=user, refilter_only=job.refilter_only)[0]


def mining_job_retry_job(job, user):
    """The registered `retry`: the same work on the same repository, as a new job."""
    return mining_job_retry(job=MiningJob.objects.select_related("repository").get(job=job), user=user).job


def _commit_count_or_none(mirror: Path, tip: str, exclude: list[str]) -> Optional[int]:
    """How many commits the walk will yield, for the progress shown; None where git could not say
    (the walk itself says what is wrong, if anything is)."""
    try:
        return commit_count(mirror, tip, exclude)
    except GitError:
        return None


def _batches(iterable, size):
    iterator = iter(iterable)
    while batch := list(islice(iterator, size)):
        yield batch


def mining_job_work(job, progress) -> None:
    """The registered `run`: mine the repository's new history (or re-apply its filters) and store
    what was found. Errors are said in words, with the repository's credentials taken out."""
    mining = MiningJob.objects.select_related("repository").get(job=job)
    redact = GitCredentials().redact
    try:
        credentials = mining.repository.git_credentials()
        redact = credentials.redact
        work = _refilter if mining.refilter_only else _mine
        seconds = work(progress, mining, credentials)
    except (JobCancelled, LeaseLost):
        raise
    except SoftTimeLimitExceeded:
        raise JobFailed("timeout", "The job ran past its time limit (CELERY_TASK_SOFT_TIME_LIMIT).") from None
    except InvalidToken:
        raise JobFailed("credentials_unreadable",
                        "The stored credentials cannot be decrypted with this SECRET_KEY.") from None
    except GitError as error:
        raise JobFailed(error.code, redact(str(error))[:4000]) from None
    except Exception as error:
        log.exception("mining job %s failed", job.id)
        raise JobFailed("worker_error", redact(f"{type(error).__name__}: {error}")[:4000]) from None
    if progress.holding():
        MiningJob.objects.filter(id=mining.id).update(seconds=seconds)


def _refilter(progress, mining: MiningJob, credentials) -> float:
    started = time.monotonic()
    repository = mining.repository
    if not (repository.mirror_dir / "HEAD").exists():
        repository_fetch(repository, credentials)
    total = Commit.objects.filter(repository=repository).count()
    progress.report(0, total)
    commits_refilter(repository=repository)
    progress.report(total)
    return time.monotonic() - started


def _mine(progress, mining: MiningJob, credentials) -> float:
    """Walk the history past the last mined head and store it; the job's `new_commits` counts what each
    batch stored, with the batch: a worker that takes the job over adds to what the first one stored."""
    started = time.monotonic()
    repository = mining.repository
    mirror = repository.mirror_dir
    repository_fetch(repository, credentials)
    branch, tip = default_branch_tip(mirror)
    exclude = (repository.mined_head,) if repository.mined_head and commit_exists(mirror, repository.mined_head) else ()
    progress.report(0)
    # git counts the commits beside the walk: the count is only for the progress shown.
    counting = ThreadPoolExecutor(1, thread_name_prefix="commit-count")
    total = counting.submit(_commit_count_or_none, mirror, tip, list(exclude))
    counting.shutdown(wait=False)
    done = 0
    filters = repository.mining_filters()
    # Only this job writes the repository's commits: with none stored, none of the walk can be.
    maybe_stored = Commit.objects.filter(repository=repository).exists()

    def needs_check(mined: MinedCommit) -> bool:
        return bool(mined.stats.source_file_count) and not size_drop_reason(mined.stats, filters)

    with BlobReader(mirror, max_blob_bytes=settings.COMMITGYM_MAX_BLOB_BYTES) as blobs, commits_flushed_later():
        walk = commits_walk(mirror, tip, exclude=exclude, rules=repository.test_file_rules(),
                            hunks_up_to=filters.max_patch_chars, max_blob_bytes=settings.COMMITGYM_MAX_BLOB_BYTES)
        try:
            for batch in _batches(python_changes_checked(walk, blobs, needs_check=needs_check), BATCH_SIZE):
                newest = Commit.objects.order_by("-id").values_list("id", flat=True).first() or 0
                with transaction.atomic():
                    stored = commits_store(repository=repository, batch=batch, maybe_stored=maybe_stored)
                    MiningJob.objects.filter(id=mining.id).update(new_commits=F("new_commits") + stored)
                # The new ones' tasks now, while git walks on, not all at the end once it has stopped.
                COMMITS_KEPT.call(repository, stored_after=newest)
                done += len(batch)
                progress.report(done, total.result() if total.done() else None)
        except (JobCancelled, SoftTimeLimitExceeded, GitError):
            COMMITS_KEPT.call(repository)  # what was stored stays whole
            raise
        finally:
            walk.close()
        COMMITS_KEPT.call(repository)
    progress.report(done, total.result())
    Repository.objects.filter(id=repository.id).update(mined_head=tip, default_branch=branch)
    return time.monotonic() - started
