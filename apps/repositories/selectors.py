"""Reads for repositories and mining."""

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, Prefetch, Q, QuerySet

from apps.accounts.roles import ADMIN, user_roles
from worker.engine.reasons import MINING_DROP_REASONS

from .models import Commit, MiningJob, Repository


def repositories_visible(*, user) -> QuerySet:
    """Repositories restricted to groups are seen only by those groups' members and admins."""
    repositories = Repository.objects.all()
    if ADMIN in user_roles(user):
        return repositories
    return repositories.filter(Q(allowed_groups__isnull=True) | Q(allowed_groups__in=user.groups.all())).distinct()


@dataclass(frozen=True)
class FunnelStep:
    label: str
    remaining: int
    dropped: int
    reason: str  # the reason code of the commits this step drops; "" for the first step


def repository_drop_counts(*, repository: Repository) -> dict[str, int]:
    """{reason: n} for dropped commits, and "" for kept ones."""
    rows = Commit.objects.filter(repository=repository).values("drop_reason").annotate(n=Count("id"))
    return {row["drop_reason"]: row["n"] for row in rows}


def repository_funnel(*, repository: Repository) -> list[FunnelStep]:
    """Commits left after each filter, in the order the filters run."""
    counts = repository_drop_counts(repository=repository)
    remaining = sum(counts.values())
    steps = [FunnelStep("Commits in the history", remaining, 0, "")]
    labels = {
        "merge_commit": "Not a merge",
        "file_too_large": f"No file over {settings.COMMITGYM_MAX_BLOB_BYTES / (1 << 20):g} MiB",
        "binary_file": "Text files only",
        "too_many_files": f"≤ {repository.max_files} non-test files",
        "too_many_lines": f"≤ {repository.max_lines} edited lines",
        "patch_too_long": f"≤ {repository.max_patch_chars:,} patch characters",
        "no_python_change": "Python change beyond comments",
    }
    for reason in MINING_DROP_REASONS:
        dropped = counts.get(reason, 0)
        remaining -= dropped
        steps.append(FunnelStep(labels[reason], remaining, dropped, reason))
    return steps


def repository_mining_summary(*, repository: Repository) -> dict:
    """The funnel as the `mine --json` line reports it."""
    counts = repository_drop_counts(repository=repository)
    return {
        "repo": repository.name,
        "commits_seen": sum(counts.values()),
        "kept": counts.get("", 0),
        "dropped": {reason: counts[reason] for reason in MINING_DROP_REASONS if counts.get(reason)},
    }


def commits_filtered(
    *, repository: Repository, status: str = "", since=None, until=None, text: str = ""
) -> QuerySet:
    """status: "" (all), "kept", "dropped", or a drop reason code."""
    commits = Commit.objects.filter(repository=repository)
    if status == "kept":
        commits = commits.filter(drop_reason="")
    elif status == "dropped":
        commits = commits.exclude(drop_reason="")
    elif status in MINING_DROP_REASONS:
        commits = commits.filter(drop_reason=status)
    if since:
        commits = commits.filter(committed_at__date__gte=since)
    if until:
        commits = commits.filter(committed_at__date__lte=until)
    if text:
        commits = commits.filter(
            Q(message__icontains=text) | Q(sha__startswith=text.lower()) | Q(author_name__icontains=text))
    return commits.select_related("repository").prefetch_related("tasks")



# --- reads for the web pages --------------------------------------------------------


def repositories_listed(*, user, text: str = "") -> QuerySet:
    """Visible repositories (whose name or location holds `text`), each with `commit_count`,
    `kept_count`, `latest_jobs` (a list of at most one job) and its allowed groups, in a fixed
    number of queries."""
    latest_job = MiningJob.objects.select_related("job").order_by("-created_at", "-id")[:1]
    visible = repositories_visible(user=user)
    if text.strip():
        visible = visible.filter(Q(name__icontains=text.strip()) | Q(url__icontains=text.strip()))
    return (
        Repository.objects.filter(pk__in=visible.values("pk"))
        .annotate(commit_count=Count("commits"), kept_count=Count("commits", filter=Q(commits__drop_reason="")))
        .prefetch_related(Prefetch("mining_jobs", queryset=latest_job, to_attr="latest_jobs"), "allowed_groups")
        .order_by("name")
    )


def mining_jobs_recent(*, repository: Repository, limit: int = 10) -> QuerySet:
    jobs = MiningJob.objects.filter(repository=repository).select_related("job", "job__requested_by")
    return jobs.order_by("-created_at", "-id")[:limit]


def _folder_bytes(folder) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


def repository_delete_summary(*, repository: Repository) -> dict:
    """What deleting the repository removes: row counts, and the mirror's size on disk (None if absent)."""
    mirror = repository.mirror_dir
    return {
        "commits": repository.commits.count(),
        "tasks": repository.tasks.count(),
        "jobs": repository.mining_jobs.count(),
        "mirror_dir": mirror,
        "mirror_bytes": _folder_bytes(mirror) if mirror.is_dir() else None,
    }
