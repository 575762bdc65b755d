from django.db import IntegrityError, migrations, transaction


def repository_datasets(apps, schema_editor):
    """Every repository registered before datasets existed gets its own."""
    Dataset = apps.get_model("datasets", "Dataset")
    Repository = apps.get_model("repositories", "Repository")
    for repository in Repository.objects.filter(dataset__isnull=True):
        for name in (repository.name, f"{repository.name} (repository)"):
            try:
                with transaction.atomic():
                    Dataset.objects.create(name=name[:200], kind="repository", repository=repository)
                break
            except IntegrityError:
                continue


class Migration(migrations.Migration):
    dependencies = [("datasets", "0001_initial")]
    operations = [migrations.RunPython(repository_datasets, migrations.RunPython.noop)]
