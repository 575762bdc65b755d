from django.apps import AppConfig


class JobKindTestConfig(AppConfig):
    """A kind of job of the tests' own, registered as any app registers one."""

    name = "tests.jobkind"
    label = "jobkind"

    def ready(self):
        from apps.jobs.registry import JobKind, job_kind_register

        job_kind_register(JobKind(name="chore", label="Chore", queue="chores", run="tests.jobkind.work.chore_run",
                                  subject="jobkind.chore", cancellable=True, retry="tests.jobkind.work.chore_retry",
                                  on_failure="tests.jobkind.work.chore_failed"))
