from functools import cached_property
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models

from apps.jobs.models import JobLife
from worker.engine.git.repo import GitCredentials
from worker.engine.mine.filters import CommitStats, MiningFilters, drop_measured
from worker.engine.reasons import MINING_DROP_REASONS, reason_sentence
from worker.engine.test_files import DEFAULT_TEST_DIR_NAMES, DEFAULT_TEST_FILE_GLOBS, TestFileRules

from .secrets import secret_decrypt


def _default_test_file_globs():
    return list(DEFAULT_TEST_FILE_GLOBS)


def _default_test_dir_names():
    return list(DEFAULT_TEST_DIR_NAMES)


class Repository(models.Model):
    registration_warning = ""  # what registering could not check (set on the object registering returns)

    name = models.CharField(max_length=200, unique=True, help_text="owner/name, used in task ids.")
    url = models.CharField(max_length=1000, help_text="URL or local path, without credentials.")
    # Encrypted; never rendered. See apps.repositories.secrets.
    credential_username = models.CharField(max_length=200, blank=True)
    credential_token = models.TextField(blank=True)
    credential_ssh_key = models.TextField(blank=True)
    allowed_groups = models.ManyToManyField(
        Group, blank=True, related_name="repositories",
        help_text="If any are set, only members of these groups (and admins) see the repository.",
    )
    default_branch = models.CharField(max_length=255, blank=True)
    mined_head = models.CharField(max_length=40, blank=True, help_text="Tip of the last complete mining run.")
    max_files = models.PositiveIntegerField(default=MiningFilters.max_files)
    max_lines = models.PositiveIntegerField(default=MiningFilters.max_lines)
    max_patch_chars = models.PositiveIntegerField(default=MiningFilters.max_patch_chars)
    test_file_globs = models.JSONField(default=_default_test_file_globs)
    test_dir_names = models.JSONField(default=_default_test_dir_names)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "repositories"

    def __str__(self):
        return self.name

    @property
    def mirror_dir(self) -> Path:
        return Path(settings.COMMITGYM_MIRROR_DIR) / f"{self.pk}.git"

    @property
    def has_credentials(self) -> bool:
        return bool(self.credential_token or self.credential_ssh_key)

    def git_credentials(self) -> GitCredentials:
        return GitCredentials(
            username=self.credential_username,
            token=secret_decrypt(self.credential_token),
            ssh_key=secret_decrypt(self.credential_ssh_key),
        )

    def mining_filters(self) -> MiningFilters:
        return MiningFilters(max_files=self.max_files, max_lines=self.max_lines, max_patch_chars=self.max_patch_chars)

    def test_file_rules(self) -> TestFileRules:
        return TestFileRules(file_globs=tuple(self.test_file_globs), dir_names=tuple(self.test_dir_names))

    @property
    def owner_and_name(self) -> tuple[str, str]:
        owner, _, name = self.name.rpartition("/")
        return owner or "local", name


class MiningJob(JobLife, models.Model):
    """What a mining job of a repository was asked (walk the new history, or re-apply changed
    filters to the stored commits) and what it gave; its life is its `job`'s (apps.jobs)."""

    # Set in the transaction that makes the row: the job's subject is the repository.
    job = models.OneToOneField("jobs.Job", null=True, on_delete=models.CASCADE, related_name="mining_job")
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="mining_jobs")
    refilter_only = models.BooleanField(
        default=False, help_text="Re-apply changed filters to stored commits without walking history.")
    filters = models.JSONField(default=dict, blank=True, help_text="The filters it applied, as they were asked.")
    new_commits = models.PositiveIntegerField(default=0)
    seconds = models.FloatField(null=True, blank=True, help_text="From the first git call to the last stored row.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"mining job {self.pk} ({self.state})"


class Commit(models.Model):
    DROP_REASONS = list(MINING_DROP_REASONS)

    # The unique (repository, sha) index serves lookups by repository: a second index would only slow inserts.
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="commits", db_index=False)
    sha = models.CharField(max_length=40)
    parent_sha = models.CharField(max_length=40, blank=True)
    author_name = models.CharField(max_length=255)
    author_email = models.CharField(max_length=255)
    authored_at = models.DateTimeField()
    committed_at = models.DateTimeField()
    message = models.TextField()
    source_files = models.JSONField(default=list, help_text="Non-test .py files (at most 1,000 listed).")
    test_files = models.JSONField(default=list)
    other_files = models.JSONField(default=list)
    source_file_count = models.PositiveIntegerField(default=0)
    test_file_count = models.PositiveIntegerField(default=0)
    other_file_count = models.PositiveIntegerField(default=0)
    has_binary = models.BooleanField(default=False)
    has_large_file = models.BooleanField(default=False, help_text="Changes a file larger than mining reads.")
    lines_added = models.PositiveIntegerField(default=0, help_text="Non-test lines.")
    lines_deleted = models.PositiveIntegerField(default=0, help_text="Non-test lines.")
    patch_chars = models.PositiveIntegerField(default=0, help_text="Characters of the non-test diff.")
    python_change = models.BooleanField(
        null=True, help_text="Non-test .py change beyond comments and docstrings; empty if never checked."
    )
    tests_changed = models.BooleanField(default=False)
    drop_reason = models.CharField(max_length=32, blank=True, help_text="Empty: kept.")
    kept_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+", help_text="Who kept it although a filter dropped it.")
    kept_note = models.TextField(blank=True, help_text="Why it was kept by hand.")
    kept_reason = models.CharField(max_length=32, blank=True, help_text="The filter that had dropped it.")
    kept_at = models.DateTimeField(null=True, blank=True)
    mined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-committed_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["repository", "sha"], name="unique_commit_per_repository")]
        indexes = [
            models.Index(fields=["repository", "drop_reason"]),
            models.Index(fields=["repository", "committed_at"]),
        ]

    def __str__(self):
        return self.sha[:10]

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]

    @property
    def kept(self) -> bool:
        return not self.drop_reason

    @cached_property
    def stats(self) -> CommitStats:
        """What the filters look at, from the stored counts (file lists left out)."""
        return CommitStats(
            source_file_count=self.source_file_count, test_file_count=self.test_file_count,
            other_file_count=self.other_file_count, has_binary=self.has_binary,
            has_large_file=self.has_large_file,
            lines_added=self.lines_added, lines_deleted=self.lines_deleted,
            patch_chars=self.patch_chars, python_change=self.python_change,
        )

    @property
    def task(self):
        """The task made from this commit (an imported instance's base commit may have several:
        the first)."""
        return next(iter(self.tasks.all()), None)

    @property
    def drop_sentence(self) -> str:
        """Why it was dropped, with the measured value against the repository's threshold where a
        size filter dropped it ("3,394 characters of non-test diff; the filter allows 2,000")."""
        if not self.drop_reason:
            return ""
        measured = drop_measured(self.drop_reason, self.stats, self.repository.mining_filters())
        return reason_sentence(self.drop_reason) + (f" ({measured})" if measured else "")
