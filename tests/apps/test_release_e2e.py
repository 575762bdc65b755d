"""A release through the real parts: the sample repository mined and validated by a worker process,
its accepted tasks released by `release_dataset` as a job, and the files read back by SWE-bench's
own loader and by Hugging Face's `datasets`, offline."""

import json
import os
import subprocess
import sys
import tarfile

import pytest
from django.test import Client
from django.urls import reverse

from apps.datasets.models import Candidate, Release
from apps.jobs.models import Job
from apps.repositories.services import repository_register
from apps.tasks import review
from apps.tasks.models import IssueVersion, Task
from tests.apps.release_rebuild_e2e import release_images_built, release_rebuilt_by_hand
from tests.apps.test_grading_e2e import manage
from tests.conftest import mine_now
from worker.demo.sample_repo import sample_repo_write

pytestmark = pytest.mark.e2e

ACCEPT = review.ReviewForm(decision="accept", underspecified=1, false_negative=0, difficulty="15 min - 1 hour")
# Run in a process of its own, with nothing but the files: what a user of the release does.
LOAD_BOTH = """
import json, sys
from datasets import load_dataset
from swebench.harness.utils import load_swebench_dataset

jsonl, parquet = sys.argv[1:]
print(json.dumps({"swebench": load_swebench_dataset(jsonl, split="test"),
                  "datasets": load_dataset("parquet", data_files=parquet, split="train").to_list()}))
"""


def test_a_release_of_the_sample_repository_loads_with_swebench_and_datasets(celery_worker, tmp_path, curator,
                                                                           admin_user):
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fixes = [commit for commit in commits if commit.kind == "fix_with_test" and commit.expected_drop_reason is None]
    validated = manage("validate", repository.name, *[arg for fix in fixes[:2] for arg in ("--commit", fix.sha)],
                       "--json")
    assert validated.returncode == 0, validated.stderr
    tasks = list(Task.objects.filter(commit__sha__in=[fix.sha for fix in fixes[:2]], state="valid"))
    assert len(tasks) == 2, validated.stdout
    for task in tasks:
        IssueVersion.objects.create(task=task, number=1, author="person", text=f"Broken: {task.commit.message}")
        Task.objects.filter(id=task.id).update(state="needs_review")
        assert review.task_review_submit(task=task, user=curator, form=ACCEPT) == "accepted"

    out = tmp_path / "releases"
    done = manage("release_dataset", "textkit", "--repository", repository.name, "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout)
    folder = out / "textkit@1"
    bases = sorted({task.commit.parent_sha for task in tasks})
    slug = repository.name.replace("/", "__")
    archives = [str(folder / "sources" / f"{slug}-{base}.tar.gz") for base in bases]
    keys = sorted({task.validations.get().environment.key for task in tasks})
    assert line == {"release": "textkit", "version": 1, "tasks": 2, "preview": False, "unchanged": False,
                    "files": [str(folder / "instances.jsonl"), str(folder / "instances.parquet")],
                    "manifest": str(folder / "manifest.json"), "source_archives": archives,
                    "licence_files": [str(folder / "licences" / f"{slug}-LICENSE")],
                    "dockerfiles": [str(folder / "environments" / key / "Dockerfile") for key in keys],
                    "readme": str(folder / "README.md")}
    # Each base commit's tree, unpacked without git, is the repository as the task's patches apply to it.
    for base, archive in zip(bases, archives):
        with tarfile.open(archive) as tar:
            names = tar.getnames()
            assert f"{slug}/textkit/slug.py" in names and f"{slug}/LICENSE" in names
            listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", base], cwd=repository.mirror_dir,
                                    capture_output=True, text=True, check=True).stdout.split()
            assert sorted(name.removeprefix(f"{slug}/") for name in names if tar.getmember(name).isfile()) == \
                sorted(listed)
    release_rebuilt_by_hand(folder, tmp_path)
    release_images_built(manage, "textkit@1", folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    newest = max(tasks, key=lambda task: task.commit.committed_at).commit.parent_sha
    assert manifest["licences"] == {repository.name: {"commit": newest, "files": [
        {"file": f"licences/{slug}-LICENSE", "spdx": "MIT"}]}}
    assert [entry["commit"] for entry in manifest["source_archives"]] == bases
    ours = [json.loads(row) for row in open(line["files"][0])]
    assert sorted(row["instance_id"] for row in ours) == sorted(task.instance_id for task in tasks)
    for row in ours:
        fix = next(fix for fix in fixes if row["instance_id"] == Task.objects.get(commit__sha=fix.sha).instance_id
                   if Task.objects.filter(commit__sha=fix.sha).exists())
        assert set(fix.fail_to_pass) <= set(json.loads(row["FAIL_TO_PASS"]))
        assert row["commitgym_environment_key"] and row["commitgym_python_version"]

    loaded = subprocess.run([sys.executable, "-c", LOAD_BOTH, *line["files"]], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
                                              "HF_HOME": str(tmp_path / "hf")})
    assert loaded.returncode == 0, loaded.stderr
    both = json.loads(loaded.stdout)
    assert both["swebench"] == ours and both["datasets"] == ours

    # The release was a job on the jobs page (an admin's: the command asked as nobody), with its
    # progress, linking to the release's page.
    client = Client()
    client.force_login(admin_user)
    release = Release.objects.get(name="textkit", version=1)
    assert release.job.kind == "release" and release.job.state == Job.State.SUCCEEDED
    assert (release.job.progress_done, release.job.progress_total) == (2, 2)
    jobs = client.get(reverse("jobs:list")).content.decode()
    assert "Release" in jobs and reverse("datasets:release", args=[release.pk]) in jobs
    page = client.get(reverse("datasets:release", args=[release.pk])).content.decode()
    assert "textkit@1" in page and release.files[0]["sha256"] in page
    download = client.get(reverse("datasets:release_file", args=[release.pk, "instances.jsonl"]))
    assert b"".join(download.streaming_content) == open(line["files"][0], "rb").read()

    # Judge training data from the release's tasks, as a job of its own.
    gold = Candidate.objects.create(task=tasks[0], source="gold", kind="gold", patch=ours[0]["patch"],
                                    outcome="resolved", outcome_source="graded")
    exported = manage("export_training", "textkit@1", "judge", "--json")
    assert exported.returncode == 0, exported.stderr
    summary = json.loads(exported.stdout)
    assert (summary["release"], summary["rows"], summary["counts"]) == ("textkit@1", 1, {"right": 1})
    [row] = [json.loads(one) for one in open(summary["files"][0])]
    assert (row["candidate_id"], row["label"], row["problem_statement"]) == (
        gold.id, True, f"Broken: {tasks[0].commit.message}")
