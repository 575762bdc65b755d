"""Grading candidates through the real parts: the grade command, Redis, a worker process, the sandbox,
on the sample repository."""

import difflib
import json
import os
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.urls import reverse

from apps.datasets.candidates.mutants import task_mutation_score_refresh
from apps.datasets.models import (
    Candidate,
    Dataset,
    Execution,
    Grade,
    JudgeScore,
    ReproductionTests,
    Run,
    VerifierTest,
    VerifierTestSet,
)
from apps.datasets.verifiers.execution import REPRODUCTION_TOKENS, reproduction_request
from apps.jobs.models import Job
from apps.llm.calls import model_call_cache_key, role_settings
from apps.llm.models import ModelCall
from apps.repositories.services import repository_register
from apps.tasks.models import Task, Validation
from tests.apps.labelling_e2e import people_label_the_sample_repository
from tests.conftest import commands_database_url, mine_now
from worker.demo.history import Author, author_env, git, git_env
from worker.demo.sample_repo import sample_repo_write
from worker.engine.grade.mutants import MUTANT_KINDS
from worker.engine.grade.source_edits import file_diff
from worker.engine.verify.reproduction import REPRODUCTION_PREFIX

pytestmark = pytest.mark.e2e

FORGING_CONFTEST = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
                    "def pytest_runtest_makereport(item, call):\n"
                    "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")


def new_file(path: str, text: str) -> str:
    lines = text.splitlines()
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))


REWRITING = ("import _pytest.reports\n_original = _pytest.reports.TestReport.__init__\n\n\n"
             "def _forged(self, *args, **kwargs):\n    _original(self, *args, **kwargs)\n"
             "    self.outcome = 'passed'\n\n\n_pytest.reports.TestReport.__init__ = _forged")


def appended(path: str, before: str, lines: str) -> str:
    """A patch adding `lines` at the end of the file `path`."""
    after = before + "\n" + lines + "\n"
    return f"diff --git a/{path} b/{path}\n" + "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"))


def manage(*args, timeout=900):
    """A command in a process of its own, on the test database and the worker's mirrors."""
    return subprocess.run([sys.executable, "manage.py", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=settings.BASE_DIR, env={**os.environ, "DATABASE_URL": commands_database_url(),
                                                      "COMMITGYM_MIRROR_DIR": str(settings.COMMITGYM_MIRROR_DIR)})


def test_grade_command_through_a_worker(celery_worker, tmp_path, curator_client):
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fix = [c for c in commits if c.kind == "fix_with_test"][0]
    validated = manage("validate", repository.name, "--commit", fix.sha, "--json")
    assert validated.returncode == 0 and json.loads(validated.stdout)["verdict"] == "valid", (
        validated.stderr, list(Job.objects.values_list("error_code", "error_message")))
    task = Task.objects.get(commit__sha=fix.sha)
    run = Run.objects.create(name="agent-x")
    # A module the tests import, made to print PASSED lines, or to rewrite pytest's reports at import.
    module = next(path for path in task.commit.source_files if path.endswith(".py"))
    source = subprocess.run(["git", "show", f"{task.commit.parent_sha}:{module}"], cwd=repository.mirror_dir,
                            capture_output=True, text=True, check=True).stdout
    made = {
        "conftest_only": new_file("conftest.py", FORGING_CONFTEST),
        "unrelated": new_file("notes_for_later.py", "NOTE = 1"),
        "no_patch": None,
        "prints_passed": appended(module, source, "print('tests/test_x.py::test_y PASSED')\nprint('== 9 passed ==')"),
        "rewrites_reports": appended(module, source, REWRITING),
    }
    for kind, patch in made.items():
        Candidate.objects.create(task=task, source="import", run=Run.objects.create(name=kind) if kind != "unrelated"
                                 else run, kind=kind, patch=patch or "", no_patch=patch is None)

    done = manage("grade", task.instance_id, "--json")
    assert done.returncode == 0, done.stderr
    *lines, last = [json.loads(line) for line in done.stdout.splitlines()]
    by_kind = {line["kind"]: line for line in lines}
    assert set(by_kind) == {"gold", "empty", "conftest_only", "unrelated", "no_patch", "prints_passed",
                            "rewrites_reports"}
    assert set(lines[0]) == {"task_id", "candidate_id", "source", "kind", "outcome", "tampering", "touches_tests",
                             "suspicious", "hacking", "second_opinion_differs", "seconds"}
    assert {kind: (line["outcome"], line["tampering"]) for kind, line in by_kind.items()} == {
        "gold": ("resolved", False), "empty": ("no", False), "conftest_only": ("no", True),
        "unrelated": ("no", False), "no_patch": ("no_patch", False), "prints_passed": ("no", False),
        "rewrites_reports": ("untrusted", False)}
    assert by_kind["gold"]["source"] == "gold" and by_kind["gold"]["task_id"] == task.instance_id
    # The module patched to rewrite pytest's reports reaches for the harness: flagged, with where.
    assert {kind for kind, line in by_kind.items() if line["suspicious"]} == {"rewrites_reports"}
    assert {(flag["reason"], flag["path"]) for flag in by_kind["rewrites_reports"]["hacking"]} == {
        ("harness_import", module), ("harness_patch", module)}
    assert last == {"counts": {"no": 4, "no_patch": 1, "resolved": 1, "untrusted": 1}}
    # The grades are jobs of the jobs table, on the tests queue, with each run's per-test outcomes.
    gold = Candidate.objects.get(task=task, source="gold")
    assert (gold.outcome, gold.outcome_source) == ("resolved", "graded")
    grade = Grade.objects.get(candidate=gold)
    assert grade.job.kind == "grade" and grade.job.state == Job.State.SUCCEEDED
    assert set(fix.fail_to_pass) <= {test for test, status in grade.runs[0]["outcomes"].items() if status == "PASSED"}
    # The controls were graded once, by the validation's own runs (the same path and selection as any
    # grade): their grades hold those runs, not runs of their own.
    validation = Validation.objects.get(task=task, verdict="valid")
    assert set(validation.controls) == {"gold", "empty"} and validation.grade_selection is not None
    for source, side in (("gold", "after"), ("empty", "before")):
        ran = validation.runs.get(side=side, scope="suite")
        stored = Grade.objects.get(candidate__task=task, candidate__source=source).runs
        assert [(run["outcomes"], run["output"]) for run in stored] == [(ran.outcomes, ran.output[-20_000:])]
    # Graded candidates are not graded again; the page shows them.
    again = manage("grade", task.instance_id, "--json")
    assert again.returncode == 0 and json.loads(again.stdout.splitlines()[-1]) == {"counts": {}}
    page = curator_client.get(reverse("datasets:task_candidates", args=[task.instance_id])).content.decode()
    # The one resolved candidate, in the side-by-side table and in its own section.
    assert page.count("badge-resolved") == 2 and "tampering" in page


# A module whose fix allows every mutant kind, fixed twice on top of the sample history: once with tests
# written to catch each kind (the comment beside each assertion says which), once with a test that only
# checks what the fix was about and lets them all through.
BUGGY = ("def clamp(value, low, high):\n    return value\n\n" + "# -\n" * 12 +
         "\ndef parse(text):\n    return int(text)\n\n\ndef head(items):\n    return items[1]\n")
FIXED = (BUGGY.replace("    return value\n", "    if value < low:\n        return low\n"
                                            "    if value > high:\n        return high\n    return value\n")
         .replace("    return int(text)", "    if not text.strip():\n        raise ValueError('empty')\n"
                                          "    return int(text)")
         .replace("items[1]", "items[0]"))
STRONG = ("import pytest\n\nfrom textkit.{module} import clamp, head, parse\n\n\n"
          "def test_clamp():\n"
          "    assert clamp(5, 0, 10) == 5  # hard-coded return\n"
          "    assert clamp(-1, 0, 10) == 0  # flipped comparison, deleted statement\n"
          "    assert clamp(11, 0, 10) == 10  # off-by-one bound\n\n\n"
          "def test_parse():\n    assert parse('3') == 3\n"
          "    with pytest.raises(ValueError, match='empty'):  # swallowed exception\n        parse(' ')\n\n\n"
          "def test_head():\n    assert head([1, 2]) == 1  # reverted hunk (the fix has three)\n")
# The same fix as FIXED's, written with a local name and comments: what the judge's style probe rewrites.
COMMENTED = FIXED.replace("def clamp(value, low, high):\n    if value < low:\n        return low\n"
                          "    if value > high:\n        return high\n    return value\n",
                          "def clamp(value, low, high):\n    # keep the value inside [low, high]\n"
                          "    bounded = value  # the value as given\n    if bounded < low:\n"
                          "        return low  # below\n    if bounded > high:\n        return high\n"
                          "    return bounded\n")
WEAK = "from textkit.{module} import clamp\n\n\ndef test_high():\n    assert clamp(11, 0, 10) <= 10\n"


def reproduction_answer_record(task: Task, tests: str) -> list[dict]:
    """The test writer's answer for the task's reproduction tests (`tests`, a test module), recorded in the
    model-call cache as an earlier answer would be; the messages it answers."""
    prompt, variables = reproduction_request(task)
    messages = prompt.messages(**variables)
    parameters = {"max_tokens": REPRODUCTION_TOKENS, "temperature": 0.0, "seed": 0}
    writer = role_settings("test_writer")
    ModelCall.objects.create(
        role="test_writer", backend=writer.backend, model=writer.model_name, prompt_name=prompt.name,
        prompt_version=prompt.version, prompt_digest=prompt.digest, messages=messages, parameters=parameters,
        cache_key=model_call_cache_key("test_writer", writer, prompt, messages, parameters), outcome="ok",
        answer="```python\n" + tests + "```\n", task=task)
    return messages


def sample_history_extend(path, when, message, files):
    """One more commit on the sample repository, `when` a Unix time."""
    env = author_env(git_env(), Author("Ada Brennan", "ada.brennan@example.org", "+0000"), f"{when} +0000")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A", env=env)
    git(path, "commit", "-q", "-m", message, env=env)
    return git(path, "rev-parse", "HEAD", env=env)


def test_each_mutant_kind_is_caught_by_tests_written_for_it_and_survives_weak_ones(celery_worker, tmp_path,
                                                                                   curator, curator_client):
    path = tmp_path / "textkit"
    sample_repo_write(path)
    when = int(time.time()) - 3 * 86400
    sample_history_extend(path, when, "Add bounds and limits helpers", {
        "textkit/bounds.py": BUGGY, "textkit/limits.py": BUGGY,
        "tests/test_bounds.py": "def test_nothing():\n    pass\n",
        "tests/test_limits.py": "def test_nothing():\n    pass\n",
        # Outside the fix's test patch, a test that reaches bounds: a regression test for the fix's candidates.
        "tests/test_bounds_parse.py": "from textkit.bounds import parse\n\n\ndef test_parse_a_number():\n"
                                      "    assert parse('3') == 3\n"})
    strong = sample_history_extend(path, when + 3600, "bounds: clamp, parse and head did not do their job",
                                   {"textkit/bounds.py": FIXED, "tests/test_bounds.py": STRONG.format(module="bounds")})
    weak = sample_history_extend(path, when + 7200, "limits: clamp, parse and head did not do their job",
                                 {"textkit/limits.py": FIXED, "tests/test_limits.py": WEAK.format(module="limits")})
    repository = repository_register(location=str(path))
    mine_now(repository)
    for sha in (strong, weak):
        validated = manage("validate", repository.name, "--commit", sha, "--json")
        assert validated.returncode == 0 and json.loads(validated.stdout)["verdict"] == "valid", validated.stderr
    strong_task, weak_task = (Task.objects.get(commit__sha=sha) for sha in (strong, weak))
    for task in (strong_task, weak_task):
        made = manage("make_mutants", task.instance_id, "--json")
        assert made.returncode == 0, made.stderr
        assert sorted(json.loads(made.stdout)["made"]) == sorted(MUTANT_KINDS)
        mutants = Candidate.objects.filter(task=task, source="mutant")
        assert all(m.made["description"] and m.made["file"] for m in mutants)
        # Made once: asking again makes none.
        assert json.loads(manage("make_mutants", task.instance_id, "--json").stdout)["made"] == []

    graded = manage("grade", repository.name, "--json")
    assert graded.returncode == 0, graded.stderr
    lines = [json.loads(text) for text in graded.stdout.splitlines()[:-1]]
    outcomes = {(entry["task_id"], entry["kind"]): entry["outcome"] for entry in lines if entry["source"] == "mutant"}
    # Each is caught: one of the three tests fails (partial: the other two pass) or more do (no).
    caught = {kind: outcomes[strong_task.instance_id, kind] for kind in MUTANT_KINDS}
    assert set(caught.values()) <= {"partial", "no"}, caught
    # On the weak tests every wrong fix survives, the tampering one too once its conftest.py is dropped.
    assert {kind: outcomes[weak_task.instance_id, kind] for kind in MUTANT_KINDS} == dict.fromkeys(
        MUTANT_KINDS, "resolved")
    assert all(entry["tampering"] == (entry["kind"] == "tampering") for entry in lines if entry["source"] == "mutant")
    for task in (strong_task, weak_task):
        assert {c.kind: c.outcome for c in Candidate.objects.filter(task=task, source__in=("gold", "empty"))} == {
            "gold": "resolved", "empty": "no"}
    strong_task.refresh_from_db()
    weak_task.refresh_from_db()
    assert (strong_task.mutation_score, weak_task.mutation_score) == (1.0, 0.0)

    page = curator_client.get(reverse("tasks:review", args=[weak_task.instance_id])).content.decode()
    assert "Mutants of the gold patch" in page and all(kind in page for kind in MUTANT_KINDS)
    listed = curator_client.get(reverse("tasks:all"), {"mutation_max": "0.5"}).content.decode()
    assert weak_task.instance_id in listed and strong_task.instance_id not in listed
    # A survivor marked equivalent counts for nothing: with one other caught, one in six, not one in seven.
    mutant = Candidate.objects.get(task=weak_task, source="mutant", kind="off_by_one")
    response = curator_client.post(reverse("datasets:mutant_equivalent", args=[mutant.id]), {"equivalent": "1"})
    assert response.status_code == 302
    Candidate.objects.filter(task=weak_task, kind="hard_coded_return").update(outcome="no")
    task_mutation_score_refresh(weak_task.id)
    weak_task.refresh_from_db()
    assert weak_task.mutation_score == pytest.approx(1 / 6)
    curator_client.post(reverse("datasets:tests_weak", args=[weak_task.instance_id]))
    assert weak_task.changes.filter(kind="tests_flagged_weak").exists()

    # Imported candidates beside the mutants, then the judge (the embedded model, through the worker on the
    # llm queue) over both, then the repository dataset's page with its charts.
    response = curator_client.post(reverse("tasks:issue_edit", args=[strong_task.instance_id]), {
        "text": "clamp(-1, 0, 10) returns -1: values below the range are not clamped.", "based_on": "0"})
    assert response.status_code == 302
    gold = Candidate.objects.get(task=strong_task, source="gold").patch
    predictions = tmp_path / "agent.jsonl"
    predictions.write_text("".join(json.dumps({"instance_id": strong_task.instance_id, "model_name_or_path": run,
                                               "model_patch": patch}) + "\n"
                                   for run, patch in (("agent-right", gold), ("agent-empty", ""),
                                                      ("agent-commented", file_diff("textkit/bounds.py", BUGGY,
                                                                                    COMMENTED)))))
    assert manage("import_predictions", str(predictions)).returncode == 0
    assert manage("grade", strong_task.instance_id, "--json").returncode == 0
    verified = manage("verify", strong_task.instance_id, "--no-tests", "--sources", "import,mutant", "--json")
    assert verified.returncode == 0, verified.stderr
    line = json.loads(verified.stdout)
    in_scope = Candidate.objects.filter(task=strong_task, source__in=("import", "mutant"))
    # agent-empty, a prediction without a patch, is counted beside the pool: no selector chooses it.
    assert line["candidates"] == in_scope.exclude(no_patch=True).count() == len(MUTANT_KINDS) + 2
    assert line["no_patch"] == 1
    assert line["resolved_candidates"] == 2 and line["best_at_k"]["oracle"][-1] == 1.0
    assert line["judge"]["mode"] == "patch" and line["judge"]["unscored"] == 0 and line["judge"]["brier"] is not None
    judge_curve = line["best_at_k"]["judge"]
    assert len(judge_curve) == line["k_max"] and judge_curve[0] == pytest.approx(line["best_at_k"]["random"][0])
    assert JudgeScore.objects.filter(candidate__in=in_scope, mode="patch").count() == in_scope.count()
    assert Job.objects.filter(kind="judge", state=Job.State.SUCCEEDED).count() == 1
    dataset = Dataset.objects.get(repository=repository)
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert page.count('<svg class="chart"') == 2 and ">judge</text>" in page
    people_label_the_sample_repository(manage=manage, tmp_path=tmp_path, repository=repository,
                                       strong_task=strong_task, weak_task=weak_task, curator_client=curator_client,
                                       curator=curator)

    # The execution verifier, through the workers. For the strong task the test writer's answer is one a capable
    # model gives (recorded in the model-call cache, as an earlier answer would be: the embedded model seldom
    # writes a test that parses); for the weak task the embedded model answers, whatever it writes.
    messages = reproduction_answer_record(strong_task, STRONG.format(module="bounds"))
    assert "clamp" in messages[1]["content"] and "items[0]" not in json.dumps(messages)  # the issue, never the fix
    # Two samples from the built-in sampler (the embedded model, at most 5 steps: their patches may well be
    # wrong; the path must work): each a candidate with its trajectory, graded.
    sampled = manage("sample_candidates", strong_task.instance_id, "-n", "2", "--steps", "5", "--json")
    assert sampled.returncode == 0, sampled.stderr
    samples = [json.loads(text) for text in sampled.stdout.splitlines()]
    assert [s["index"] for s in samples] == [0, 1] and all(1 <= s["steps"] <= 5 and s["outcome"] for s in samples)
    by_sampler = Candidate.objects.filter(task=strong_task, source="sampler")
    assert by_sampler.count() == 2 and all(1 <= len(c.trajectory) <= 5 for c in by_sampler)
    assert ModelCall.objects.filter(role="agent", task=strong_task).values("parameters__seed").distinct().count() == 2
    assert json.loads(manage("sample_candidates", strong_task.instance_id, "-n", "2", "--json").stdout or "{}") == {}
    verified = manage("verify", strong_task.instance_id, "--sources", "import,mutant,sampler", "--json")
    assert verified.returncode == 0, verified.stderr
    line = json.loads(verified.stdout)
    assert all(line["best_at_k"][name] is not None for name in ("random", "execution", "judge", "hybrid", "oracle")), \
        line["skipped"]
    test_set = VerifierTestSet.objects.get(task=strong_task)
    tests = {t.test_id: t for t in test_set.tests.all()}
    reproduction = {t for t, row in tests.items() if row.kind == "reproduction"}
    assert reproduction == {f"{REPRODUCTION_PREFIX}_0.py::test_{name}" for name in ("clamp", "parse", "head")}
    assert not any(tests[t].passes_on_base for t in reproduction)  # each fails before the fix: each counts
    regression = [t for t, row in tests.items() if row.kind == "regression"]
    assert regression and all(t.startswith("tests/") and not t.startswith("tests/test_bounds.py") for t in regression)
    # Each kept with the reason it was chosen: a regression test reaches a file the candidates change.
    assert tests["tests/test_bounds_parse.py::test_parse_a_number"].reason == (
        "imports textkit.bounds, which the candidates change")
    assert all(tests[t].reason for t in tests)
    # Every candidate of the task ran against them: the gold patch passes every test, each mutant fails one.
    executions = {e.candidate.kind: e for e in Execution.objects.filter(candidate__task=strong_task)
                  .select_related("candidate")}
    assert set(executions) == {"gold", "empty", "agent-right", "agent-empty", "agent-commented", *MUTANT_KINDS,
                               *(c.kind for c in by_sampler)}
    assert all(status == "PASSED" for status in executions["gold"].outcomes.values())
    for kind in MUTANT_KINDS:
        assert any(executions[kind].outcomes[t] != "PASSED" for t in reproduction), kind
    # The reproduction tests distinguish; the tests' top pick is the right candidate, at every k it is drawn.
    assert line["distinguishing_share"] > 0 and line["toxic_tests"] == 0
    assert line["best_at_k"]["execution"][-1] == 1.0 and line["best_at_k"]["hybrid"][0] >= line["best_at_k"][
        "random"][0]
    assert line["complementarity"]["tasks"] == 1 and line["complementarity"]["execution_wrong"] == 0
    # The matrix page, a cell's log, the curation page's flag, the dataset page.
    matrix = curator_client.get(reverse("datasets:task_matrix", args=[strong_task.instance_id])).content.decode()
    assert "distinguishing" in matrix and f"{REPRODUCTION_PREFIX}_0.py::test_clamp" in matrix
    clamp = tests[f"{REPRODUCTION_PREFIX}_0.py::test_clamp"]
    log = curator_client.get(reverse("datasets:execution_log", args=[executions["off_by_one"].id]),
                             {"test": clamp.position}).content.decode()
    assert "test_clamp" in log and "assert" in log
    response = curator_client.post(reverse("datasets:verifier_test_flag", args=[clamp.id]),
                                   {"flag": "never_distinguishing", "note": "checking the flag"})
    assert response.status_code == 302 and VerifierTest.objects.get(id=clamp.id).flag == "never_distinguishing"
    review = curator_client.get(reverse("tasks:review", args=[strong_task.instance_id])).content.decode()
    assert f'id="verifier-test-{clamp.id}"' in review and "flagged never distinguishing" in review
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert ">execution</text>" in page and ">hybrid</text>" in page and 'id="complementarity"' in page

    # The judge's bias probes. Style: the commented fix rewritten (comments removed, reformatted, locals renamed),
    # each rewrite graded as the fix was, and judged. Self-assessment: the sampled candidates judged with their
    # trajectory and with the agent's claims left out.
    probed = manage("probe_style", strong_task.instance_id, "--sources", "import,sampler", "--json")
    assert probed.returncode == 0, probed.stderr
    style = json.loads(probed.stdout)
    assert style["probes_made"] >= 2 and style["rewrites_kept"] >= 2 and style["graded_differently"] == 0
    assert style["judges"] and style["judges"][0]["originals"] >= 1 and 0 <= style["judges"][0]["max_spread"] <= 1
    rewrites = Candidate.objects.filter(task=strong_task, source="probe")
    assert {c.made["rewrite"] for c in rewrites} >= {"comments_removed", "locals_renamed"}
    assert all(c.outcome == "resolved" for c in rewrites if c.made["of"] == in_scope.get(kind="agent-commented").id)
    for mode in ("trajectory", "no-self-assessment"):
        judged = manage("verify", strong_task.instance_id, "--no-tests", "--judge-mode", mode, "--sources", "sampler",
                        "--json")
        assert judged.returncode == 0, judged.stderr
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert "Does the judge judge style?" in page and "Does the judge lean on the agent" in page

    response = curator_client.post(reverse("tasks:issue_edit", args=[weak_task.instance_id]), {
        "text": "clamp(11, 0, 10) returns 11: values above the range are not clamped.", "based_on": "0"})
    assert response.status_code == 302
    weakly = manage("verify", weak_task.instance_id, "--no-judge", "--sources", "mutant,gold", "--json")
    assert weakly.returncode == 0, weakly.stderr
    written = ReproductionTests.objects.get(task=weak_task)
    assert written.state == "succeeded" and written.call.backend == "embedded"
    assert json.loads(weakly.stdout)["best_at_k"]["execution"] is not None
