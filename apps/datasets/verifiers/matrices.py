"""The execution verifier's matrices as stored: per task, its current verifier tests and each
candidate's outcomes against them (worker/engine/verify/matrix.py reads them)."""

from dataclasses import dataclass, field
from typing import Iterable, Optional

from django.db.models import OuterRef, Subquery
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe

from worker.engine.run.pytest_run import PASSING
from worker.engine.verify.matrix import Matrix, distinguishing_share, verifier_tests_judged
from worker.engine.verify.matrix import VerifierTest as Test

from ..models import Candidate, Execution, ReproductionTests, VerifierTest, VerifierTestSet


@dataclass
class TaskMatrix:
    test_set_id: int
    tests: list  # VerifierTest rows, in the base run's order
    matrix: Matrix
    executions: dict = field(default_factory=dict)  # candidate id -> its Execution (the latest that succeeded)


def current_test_sets(task_ids: Iterable[int]) -> dict[int, int]:
    """{task id: the id of its current verifier test set}: the newest that succeeded among those made from
    its newest reproduction tests that succeeded."""
    succeeded = ReproductionTests.objects.filter(task=OuterRef("task"), job__state=ReproductionTests.State.SUCCEEDED)
    rows = (VerifierTestSet.objects.filter(task_id__in=list(task_ids), job__state=VerifierTestSet.State.SUCCEEDED,
                                           reproduction_id=Subquery(succeeded.values("id")[:1]))
            .order_by("task_id", "-created_at", "-id").values_list("task_id", "id"))
    found: dict[int, int] = {}
    for task_id, set_id in rows:  # newest first: the first of each task's is its current one
        found.setdefault(task_id, set_id)
    return found


def task_matrices(task_ids: Iterable[int]) -> dict[int, TaskMatrix]:
    """Per task with verifier tests, its matrix over the candidates that ran against them."""
    by_set = {set_id: task_id for task_id, set_id in current_test_sets(task_ids).items()}
    found = {task_id: TaskMatrix(set_id, [], Matrix([])) for set_id, task_id in by_set.items()}
    for test in VerifierTest.objects.filter(test_set_id__in=by_set).order_by("test_set_id", "position"):
        entry = found[by_set[test.test_set_id]]
        entry.tests.append(test)
        entry.matrix.tests.append(Test(test.test_id, test.kind, passes_on_base=test.passes_on_base))
    executions = Execution.objects.filter(test_set_id__in=by_set, job__state=Execution.State.SUCCEEDED) \
        .order_by("candidate_id", "-created_at", "-id").only("id", "candidate_id", "test_set_id", "outcomes")
    for execution in executions:  # newest first: a candidate's first is its current run
        entry = found[by_set[execution.test_set_id]]
        if execution.candidate_id in entry.executions:
            continue
        entry.executions[execution.candidate_id] = execution
        for test_id, status in execution.outcomes.items():
            entry.matrix.outcomes[(execution.candidate_id, test_id)] = "passed" if status in PASSING else "failed"
    return found


@dataclass
class MatrixView:
    tests: list  # [(VerifierTest row, its verdict against the ground truth, or None before any is graded)]
    rows: list  # [(candidate, its cells as HTML: one <td> per test, each a link to that test's log)]
    distinguishing_share: Optional[float]


def candidate_label(candidate) -> str:
    """A candidate as the matrix names it: its source, and its run's name or its kind."""
    name = candidate.kind if candidate.kind and candidate.kind != candidate.source else ""
    return f"{candidate.get_source_display()}{f' · {name}' if name else ''} (candidate {candidate.pk})"


def task_matrix_view(task) -> Optional[MatrixView]:
    """The task's matrix as a page shows it: candidates × verifier tests; None before it has verifier tests."""
    entry = task_matrices([task.id]).get(task.id)
    if entry is None:
        return None
    candidates = list(Candidate.objects.filter(task=task).select_related("run").defer("patch", "trajectory")
                      .order_by("source", "kind", "id"))
    # Judged over the candidates the measures count (controls and mutants shown, not counted), as the
    # dataset page and the toxic-test view judge them.
    graded = {c.id: c.resolved for c in candidates
              if c.outcome and c.id in entry.executions and c.source in Candidate.AGENTS}
    verdicts = verifier_tests_judged(entry.matrix, graded) if graded else [None] * len(entry.tests)
    rows = [(candidate, _cells(entry, candidate)) for candidate in candidates]
    share = distinguishing_share([v for v in verdicts if v is not None]) if graded else None
    return MatrixView(list(zip(entry.tests, verdicts)), rows, share)


def _cells(entry: TaskMatrix, candidate) -> str:
    """One candidate's row of cells, made here rather than by the template: a page holds thousands. Each
    cell's title names its test and its candidate."""
    label = escape(candidate_label(candidate))
    execution = entry.executions.get(candidate.id)
    if execution is None:
        return mark_safe("".join(  # noqa: S308 - escaped
            f'<td class="cell cell-not-run" title="{escape(test.test_id)} · {label}: not run against the verifier '
            f'tests">·</td>' for test in entry.tests))
    log = reverse("datasets:execution_log", args=[execution.id])
    cells = []
    for test in entry.tests:
        status = escape(execution.outcomes.get(test.test_id, "not run"))
        cells.append(f'<td class="cell cell-{status.lower().replace(" ", "-")}" title="{escape(test.test_id)} · '
                     f'{label}: {status}"><a href="{log}?test={test.position}">{status[:1]}</a></td>')
    return mark_safe("".join(cells))  # noqa: S308 - every value in it is escaped above or ours


# What a run against the verifier tests that ended before its tests reported says, in the verifier's terms.
RUN_ENDED = {"does_not_apply": "the patch did not apply: no verifier test ran",
             "error": "the run ended in an error: no verifier test counts",
             "timeout": "the run ran out of time: no verifier test counts",
             "untrusted": "the run's report cannot be believed: no verifier test counts",
             "no_patch": "the candidate has no patch: nothing ran"}


def execution_said(execution, tests: list) -> str:
    """What a candidate's run against the verifier tests passed, in the verifier's terms (how many
    regression and counting reproduction tests), not in the ground truth's words (resolved, no...)."""
    if execution.outcome in RUN_ENDED:
        return RUN_ENDED[execution.outcome]
    if not tests:
        return "the task has no verifier test: nothing ran"

    def passed(chosen: list) -> str:
        return f"{sum(execution.outcomes.get(t.test_id) in PASSING for t in chosen)} of {len(chosen)}"

    regression = [t for t in tests if t.kind == VerifierTest.Kind.REGRESSION]
    counting = [t for t in tests if t.kind == VerifierTest.Kind.REPRODUCTION and t.counts]
    said = (f"{passed(regression)} regression test{'s' if len(regression) != 1 else ''} passed, "
            f"{passed(counting)} reproduction test{'s' if len(counting) != 1 else ''} that count passed")
    on_base = len(tests) - len(regression) - len(counting)
    if on_base:
        one = on_base == 1
        said += (f" ({on_base} more reproduction test{'' if one else 's'} {'passes' if one else 'pass'} on the base "
                 f"commit and {'does' if one else 'do'} not count)")
    return said


def toxic_rows(test_ids: list) -> list:
    """The verifier tests (rows) of these ids, by task then by their place in the run."""
    return list(VerifierTest.objects.filter(id__in=test_ids).select_related("test_set__task")
                .order_by("test_set__task__instance_id", "position"))
