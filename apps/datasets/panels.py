"""What the datasets app shows on the pages of the apps below it, registered at `ready()`: a task's
mutants and verifier tests on its review page, and the verifiers' overlaps on the curation dashboard."""

from .verifiers.matrices import task_matrix_view
from .verifiers.measures import verifier_overlaps
from .models import VerifierTest
from .selectors import datasets_listed


def task_review_panels(task) -> dict:
    """The gold patch's mutants (candidates of the task) and the survivors among them; the execution
    verifier's tests of the task with their verdicts, where a person flags them."""
    mutants = list(task.candidates.filter(source="mutant").order_by("kind", "id"))
    survivors = [m for m in mutants if m.resolved and not (m.made or {}).get("equivalent")]
    matrix = task_matrix_view(task)
    return {"mutants": mutants, "survivors": survivors, "verifier_tests": matrix.tests if matrix else [],
            "verifier_test_flags": VerifierTest.Flag.choices}


def dashboard_overlaps(*, user) -> dict:
    """How often both verifiers are wrong together, on each dataset the user sees."""
    return {"verifier_overlaps": verifier_overlaps([row.dataset for row in datasets_listed(user=user)])}
