"""The task's state machine: every move it has, and none it has not."""

import pytest

from apps.tasks.models import Task, TaskStateChange
from apps.tasks.states import MOVES, moves_check, task_state_move
from tests.conftest import commits_and_tasks_make


def test_every_state_can_be_reached_and_only_by_the_moves_listed():
    assert set(MOVES) == set(Task.State)
    moves_check(to_state=Task.State.NEEDS_REVIEW, from_states=[Task.State.VALID])
    moves_check(to_state=Task.State.BUILDING, from_states=[Task.State.MINED, Task.State.ACCEPTED])
    for to_state, from_states in [(Task.State.ACCEPTED, [Task.State.MINED]), (Task.State.VALID, [Task.State.MINED]),
                                  (Task.State.VALIDATING, [Task.State.VALID]), ("no_such_state", [Task.State.MINED])]:
        with pytest.raises(ValueError):
            moves_check(to_state=to_state, from_states=from_states)


@pytest.mark.django_db
def test_a_move_is_recorded_once_and_a_move_the_machine_lacks_changes_nothing(small_repository):
    task = commits_and_tasks_make(small_repository, 1)[0]
    with pytest.raises(ValueError):
        task_state_move(task_id=task.id, to_state=Task.State.ACCEPTED, from_states=[Task.State.MINED])
    assert task_state_move(task_id=task.id, to_state=Task.State.BUILDING, from_states=[Task.State.MINED])
    assert not task_state_move(task_id=task.id, to_state=Task.State.BUILDING, from_states=[Task.State.MINED])
    task.refresh_from_db()
    assert task.state == Task.State.BUILDING
    assert list(TaskStateChange.objects.filter(task=task).values_list("from_state", "to_state")) == [
        ("mined", "building")]
