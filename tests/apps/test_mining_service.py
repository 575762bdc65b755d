import pytest

from apps.repositories.models import Commit
from apps.tasks.models import Task


@pytest.mark.django_db
def test_small_repository_is_mined_with_reasons(small_repository):
    reasons = dict(Commit.objects.filter(repository=small_repository).values_list("message", "drop_reason"))
    assert reasons == {
        "Initial library": "",
        "Fix add returning the difference": "",
        "Document add": "no_python_change",
        "Add logo": "binary_file",
    }
    assert Task.objects.filter(repository=small_repository).count() == 2
