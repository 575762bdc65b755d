"""What the demo brings besides the sample repository, for three of its tasks (worker/demo/data/):

- issues.json: an issue text per task, written by a person for the demo and recorded as the issue
  writer's answer (the embedded model's own texts are too weak to reach the review queue);
- reproduction_tests.json: a reproduction test file per task, written from that issue alone and
  recorded as the test writer's answer (writing one takes the embedded model minutes);
- predictions/RUN.jsonl and reports/RUN.json: four runs of candidate patches in SWE-bench's
  predictions format, each with its evaluation report (SWE-bench's run report): what the hidden
  tests say of each candidate, as grading here says it (tests/apps/test_demo_bundle.py checks).

Every one of them names real instance ids: the demo writes the sample's history as of SAMPLE_DAY, so
its commits' shas are always the same. Standard library only; no Django.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from worker.demo.sample_repo import SampleCommit, sample_repo_write

DATA_DIR = Path(__file__).resolve().parent / "data"
SAMPLE_DAY = datetime(2025, 6, 2, tzinfo=timezone.utc)
REPOSITORY_NAME = "demo/textkit"


@dataclass(frozen=True)
class DemoRun:
    name: str
    predictions: Path
    report: Path


@dataclass(frozen=True)
class DemoBundle:
    issues: dict[str, str]  # instance id -> the issue text, as the issue writer's answer
    reproduction_answers: dict[str, str]  # instance id -> the test writer's answer (a python code block)
    runs: tuple[DemoRun, ...]

    @property
    def instance_ids(self) -> list[str]:
        return sorted(self.issues)


def demo_bundle() -> DemoBundle:
    runs = tuple(DemoRun(path.stem, path, DATA_DIR / "reports" / f"{path.stem}.json")
                 for path in sorted((DATA_DIR / "predictions").glob("*.jsonl")))
    def read(name: str) -> dict:
        return json.loads((DATA_DIR / name).read_text(encoding="utf-8"))

    return DemoBundle(issues=read("issues.json"), reproduction_answers=read("reproduction_tests.json"), runs=runs)


def demo_sample_write(path: Path) -> list[SampleCommit]:
    """The sample repository as the bundle knows it: its history as of SAMPLE_DAY."""
    return sample_repo_write(path, now=SAMPLE_DAY)
