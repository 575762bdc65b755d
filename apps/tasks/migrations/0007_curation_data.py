from django.db import migrations

from worker.engine.reasons import REJECT_REASONS


def reasons_seed(apps, schema_editor):
    RejectReason = apps.get_model("tasks", "RejectReason")
    for order, (code, sentence) in enumerate(REJECT_REASONS.items()):
        RejectReason.objects.get_or_create(code=code, defaults={"sentence": sentence, "order": order})


def summaries_fill(apps, schema_editor):
    """The list's summary columns for tasks validated before they existed."""
    Task = apps.get_model("tasks", "Task")
    Validation = apps.get_model("tasks", "Validation")
    IssueVersion = apps.get_model("tasks", "IssueVersion")
    GeneratedTest = apps.get_model("tasks", "GeneratedTest")
    TaskStateChange = apps.get_model("tasks", "TaskStateChange")
    for task in Task.objects.all().iterator():
        latest = Validation.objects.filter(task=task, state="done").order_by("-created_at", "-id").first()
        versions = list(IssueVersion.objects.filter(task=task).order_by("-number"))
        issue = next((v for v in versions if v.author == "person"), None) or next(iter(versions), None)
        Task.objects.filter(pk=task.pk).update(
            verdict=latest.verdict if latest else "",
            fail_to_pass_count=len(latest.fail_to_pass) if latest else 0,
            flaky_count=len(latest.flaky) if latest else 0,
            has_generated_tests=GeneratedTest.objects.filter(task=task, state="kept").exists(),
            leak_score=issue.leak_score if issue else None)
        if task.state == "valid" and issue is not None:  # written before review existed: it waits for one
            Task.objects.filter(pk=task.pk).update(state="needs_review")
            TaskStateChange.objects.create(task=task, from_state="valid", to_state="needs_review")


class Migration(migrations.Migration):
    dependencies = [("tasks", "0006_curation")]
    operations = [migrations.RunPython(reasons_seed, migrations.RunPython.noop),
                  migrations.RunPython(summaries_fill, migrations.RunPython.noop)]
