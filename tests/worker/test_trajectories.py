"""An agent's trajectories from JSONL steps or SWE-agent's .traj files (worker/engine/grade/trajectories.py)."""

import json

from worker.engine.grade.trajectories import MAX_STEP_CHARS, MAX_STEPS, trajectories_read


def test_jsonl_steps_of_several_instances_in_any_order_come_out_sorted(tmp_path):
    steps = [{"instance_id": "b-1", "step": 2, "thought": "now fix", "action": "edit calc.py", "observation": "ok"},
             {"instance_id": "a-1", "step": 1, "thought": "look", "action": "ls", "observation": ["calc.py"]},
             {"instance_id": "b-1", "step": 1, "thought": None, "action": "cat calc.py", "observation": "a - b"}]
    path = tmp_path / "steps.jsonl"
    path.write_text("".join(json.dumps(step) + "\n" for step in steps) + "{broken\n" + json.dumps({"step": 1}) + "\n")
    read = trajectories_read(path)
    assert [step["action"] for step in read.found["b-1"].steps] == ["cat calc.py", "edit calc.py"]
    assert read.found["b-1"].steps[0] == {"step": 1, "thought": "", "action": "cat calc.py", "observation": "a - b"}
    assert read.found["a-1"].steps[0]["observation"] == '["calc.py"]'  # not text: kept as its JSON
    assert [why.split(":")[0] for why in read.refused] == ["steps.jsonl line 4", "steps.jsonl line 5"]
    assert "needs an instance_id" in read.refused[1]


def test_a_folder_of_swe_agent_traj_files_gives_steps_and_the_final_patch(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "octo__calc-1.traj").write_text(json.dumps({
        "trajectory": [{"thought": "find it", "action": "find_file calc.py", "observation": "found", "response": "x"},
                       {"thought": "done", "action": "submit", "observation": "diff"}],
        "info": {"submission": "diff --git a/calc.py b/calc.py\n", "exit_status": "submitted"}}))
    (tmp_path / "run" / "bad.traj").write_text(json.dumps({"history": []}))
    read = trajectories_read(tmp_path)
    trajectory = read.found["octo__calc-1"]
    assert [step["step"] for step in trajectory.steps] == [1, 2] and trajectory.patch.startswith("diff --git")
    assert set(trajectory.steps[0]) == {"step", "thought", "action", "observation"}
    assert read.refused == ["bad.traj: no `trajectory` list, as SWE-agent writes"]


def test_long_trajectories_are_cut_and_say_so(tmp_path):
    path = tmp_path / "long.jsonl"
    rows = [{"instance_id": "a", "step": n, "observation": "x" * (MAX_STEP_CHARS + 5 if n == 0 else 1)}
            for n in range(MAX_STEPS + 3)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    trajectory = trajectories_read(path).found["a"]
    assert trajectory.cut and len(trajectory.steps) == MAX_STEPS
    assert trajectory.steps[0]["observation"].endswith("[… cut by commitgym: 5 more characters]")
