"""An agent's trajectories, read into one schema that the judge and the exports read.

A trajectory is the agent's steps on one task, in order: [{"step", "thought", "action",
"observation"}], every value text ("" where the agent gave none). Two shapes are read:

- JSONL, one step a line: {"instance_id", "step", "thought", "action", "observation"}; a file may
  hold the steps of many instances, in any order (they are sorted by `step`).
- SWE-agent's `.traj` JSON, one file per instance named `<instance_id>.traj`: its `trajectory`
  list ({"thought", "action", "observation", ...} per step); `info.submission` is the final patch.

A path may be one file or a folder of such files. Each step's text is cut to MAX_STEP_CHARS, and a
trajectory to MAX_STEPS steps, each cut marked; a row or file that cannot be read is refused with why.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

MAX_STEPS = 1000
MAX_STEP_CHARS = 64_000
MAX_FILE_BYTES = 64 << 20
STEP_FIELDS = ("thought", "action", "observation")
CUT = "\n[… cut by commitgym: {n} more characters]"


@dataclass
class Trajectory:
    instance_id: str
    steps: list[dict] = field(default_factory=list)
    patch: Optional[str] = None  # the final patch, where the file gives one (.traj's submission)
    cut: bool = False  # steps or text were cut to the limits


@dataclass
class Trajectories:
    found: dict = field(default_factory=dict)  # instance id -> Trajectory
    refused: list[str] = field(default_factory=list)  # "where: why"


def trajectories_read(path: Path) -> Trajectories:
    path, read = Path(path), Trajectories()
    files = sorted(p for p in path.rglob("*") if p.suffix in (".jsonl", ".traj")) if path.is_dir() else [path]
    for file in files:
        if file.is_symlink() or not file.is_file():
            continue
        if file.stat().st_size > MAX_FILE_BYTES:
            read.refused.append(f"{file.name}: larger than {MAX_FILE_BYTES >> 20} MB")
        elif file.suffix == ".traj":
            _traj_read(file, read)
        elif file.suffix == ".jsonl":
            _jsonl_read(file, read)
        else:
            read.refused.append(f"{file.name}: a .jsonl file of steps or a SWE-agent .traj file is expected")
    for trajectory in read.found.values():
        _limits_hold(trajectory)
    return read


def _step(number: int, row: dict) -> dict:
    return {"step": number, **{name: _text(row.get(name)) for name in STEP_FIELDS}}


def _text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _jsonl_read(file: Path, read: Trajectories) -> None:
    by_instance: dict = {}
    for number, line in enumerate(file.read_bytes().split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as error:
            read.refused.append(f"{file.name} line {number}: not JSON in UTF-8 ({error})")
            continue
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str) or not row["instance_id"]:
            read.refused.append(f"{file.name} line {number}: a step needs an instance_id")
            continue
        step = row.get("step", number)
        if not isinstance(step, int) or isinstance(step, bool):
            read.refused.append(f"{file.name} line {number}: step is not a whole number")
            continue
        by_instance.setdefault(row["instance_id"], []).append((step, number, row))
    for instance_id, rows in by_instance.items():
        rows.sort(key=lambda item: (item[0], item[1]))
        read.found[instance_id] = Trajectory(instance_id, [_step(step, row) for step, _, row in rows])


def _traj_read(file: Path, read: Trajectories) -> None:
    try:
        document = json.loads(file.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        read.refused.append(f"{file.name}: not JSON in UTF-8 ({error})")
        return
    steps = document.get("trajectory") if isinstance(document, dict) else None
    if not isinstance(steps, list):
        read.refused.append(f"{file.name}: no `trajectory` list, as SWE-agent writes")
        return
    info = document.get("info") if isinstance(document.get("info"), dict) else {}
    submission = info.get("submission")
    read.found[file.stem] = Trajectory(
        file.stem, [_step(number, step if isinstance(step, dict) else {}) for number, step in enumerate(steps, 1)],
        patch=submission if isinstance(submission, str) else None)


def _limits_hold(trajectory: Trajectory) -> None:
    if len(trajectory.steps) > MAX_STEPS:
        trajectory.steps, trajectory.cut = trajectory.steps[:MAX_STEPS], True
    for step in trajectory.steps:
        for name in STEP_FIELDS:
            if len(step[name]) > MAX_STEP_CHARS:
                extra = len(step[name]) - MAX_STEP_CHARS
                step[name], trajectory.cut = step[name][:MAX_STEP_CHARS] + CUT.format(n=extra), True
