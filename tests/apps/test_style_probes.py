"""The judge's style probe: rewrites of a candidate made from the mirror as probe candidates, the
figures of how far P(YES) moves across a candidate and its rewrites that grade the same, per judge
model, the command's arguments and line, and the dataset page's section."""

import ast
import json
import subprocess
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from apps.datasets.candidates.imports import instances_import
from apps.datasets.candidates.probes import style_probe, style_probe_compute, task_style_probes_make
from apps.datasets.models import Candidate, Dataset, JudgeScore
from apps.datasets.verifiers.judging import judge_identity
from apps.jobs.models import Job
from apps.repositories.services import repository_register
from apps.tasks.models import Task
from apps.tasks.selectors import task_base_sha
from tests.conftest import mine_now
from tests.worker.test_swebench_files import instance, jsonl
from worker.demo.sample_repo import sample_repo_write
from worker.engine.grade.source_edits import file_diff
from worker.engine.verify.probes import STYLE_REWRITES

pytestmark = pytest.mark.django_db

TASKS = ["octo__calc-1", "octo__calc-2"]
JUDGE_A, JUDGE_B = ("judge-a", 1), ("judge-b", 1)


def imported_tasks(tmp_path):
    instances_import(path=jsonl(tmp_path / "probed.jsonl", [instance(task_id, base_commit=f"{n:040d}")
                                                            for n, task_id in enumerate(TASKS)]))
    return [Task.objects.get(instance_id=task_id) for task_id in TASKS]


def candidate(task, source, outcome="", of=None, kind=""):
    made = {"of": of.id, "rewrite": kind, "files": ["calc.py"]} if of else {}
    return Candidate.objects.create(task=task, source=source, kind=kind, patch=f"a patch ({kind or source})",
                                    made=made, outcome=outcome)


def scored(judge, mode="patch", **p_yes_by_candidate):
    model, version = judge
    for row, p_yes in p_yes_by_candidate.items():
        JudgeScore.objects.create(candidate=ROWS[row], mode=mode, model=model, prompt_version=version, p_yes=p_yes,
                                  logprob_yes=0.0, logprob_no=0.0)


ROWS: dict = {}


def rows_made(tasks, judge_a=JUDGE_A):
    """Two candidates, their rewrites, a mutant's rewrite (not a source in scope) and the judges' scores:
    every rewrite ungraded first. The figures, worked out:
    - judge A: o1 with r1a (comments_removed) and r1b (reformatted), o2 with r2a (comments_removed); r1c
      graded differently and r2b ungraded: left out. Spreads: o1 max(.8, .7, .9) - min = .2, o2 .55 - .4 = .15:
      mean .175, largest .2. Shifts: comments_removed (|.7-.8| + |.55-.4|) / 2 = .125, reformatted .1.
      Verdicts at .5: o1 all YES, o2 NO then YES: one flip in two, .5.
    - judge B: only o1 and r1a are both scored (r2a's candidate is not): spread 0, comments_removed 0, no flip.
    - 3 rewrites kept (the mutant's not counted), 1 graded differently, 1 ungraded."""
    t1, t2 = tasks
    ROWS.clear()
    ROWS.update(o1=candidate(t1, "import", "resolved"), o2=candidate(t2, "sampler", "no"),
                mutant=candidate(t1, "mutant", "no"))
    for name, of, kind in (("r1a", "o1", "comments_removed"), ("r1b", "o1", "reformatted"),
                           ("r1c", "o1", "locals_renamed"), ("r2a", "o2", "comments_removed"),
                           ("r2b", "o2", "locals_renamed"), ("rm", "mutant", "reformatted")):
        ROWS[name] = candidate(ROWS[of].task, "probe", of=ROWS[of], kind=kind)
    scored(judge_a, o1=0.8, r1a=0.7, r1b=0.9, r1c=0.1, o2=0.4, r2a=0.55, r2b=0.99, mutant=0.5, rm=0.0)
    scored(judge_a, mode="trajectory", r1a=0.0)  # another mode: not the probe's
    scored(JUDGE_B, o1=0.3, r1a=0.3, r2a=0.9)


def rows_graded():
    for name, outcome in (("r1a", "resolved"), ("r1b", "resolved"), ("r1c", "no"), ("r2a", "no"), ("rm", "no")):
        Candidate.objects.filter(id=ROWS[name].id).update(outcome=outcome)


def test_the_figures_per_judge_over_rewrites_that_grade_the_same(tmp_path):
    tasks = imported_tasks(tmp_path)
    scope = Task.objects.filter(instance_id__in=TASKS)
    assert style_probe(scope) is None  # nothing at all
    rows_made(tasks)
    assert style_probe(scope) is None  # rewrites, scores, but no rewrite graded yet
    rows_graded()
    probe = style_probe(scope)
    assert (probe.rewrites_kept, probe.graded_differently, probe.ungraded) == (3, 1, 1)
    a, b = probe.judges
    assert (a.model, a.prompt_version, a.originals, a.rewrites) == ("judge-a", 1, 2, 3)
    assert a.mean_spread == pytest.approx(0.175) and a.max_spread == pytest.approx(0.2)
    assert a.mean_shift_by_kind == pytest.approx({"comments_removed": 0.125, "reformatted": 0.1})
    assert a.flip_share == 0.5
    assert a.shifts_in_words()[0] == ("comments removed", pytest.approx(0.125))
    assert (b.model, b.originals, b.rewrites, b.mean_spread, b.max_spread, b.flip_share) == ("judge-b", 1, 1, 0, 0, 0)
    assert b.mean_shift_by_kind == {"comments_removed": 0}
    # With the mutants as the source, only the mutant's rewrite counts; judge B never scored either.
    mutants = style_probe_compute(scope, sources=("mutant",))
    assert (mutants.rewrites_kept, [judge.model for judge in mutants.judges]) == (1, ["judge-a"])
    assert mutants.judges[0].mean_spread == pytest.approx(0.5) and mutants.judges[0].flip_share == 1


def test_a_task_not_valid_is_out_of_scope(tmp_path):
    tasks = imported_tasks(tmp_path)
    rows_made(tasks)
    rows_graded()
    Task.objects.filter(instance_id=TASKS[0]).update(verdict="invalid")
    probe = style_probe(Task.objects.filter(instance_id__in=TASKS))
    # o2 and its one kept rewrite are left; r1c (graded differently) went with its task.
    assert (probe.rewrites_kept, probe.graded_differently, probe.ungraded) == (1, 0, 1)
    assert [(judge.model, judge.originals, judge.max_spread) for judge in probe.judges] == [
        ("judge-a", 1, pytest.approx(0.15))]


def mined_task(tmp_path) -> Task:
    commits = sample_repo_write(tmp_path / "textkit")
    repository = repository_register(location=str(tmp_path / "textkit"))
    mine_now(repository)
    fix = next(c for c in commits if c.kind == "fix_with_test")
    return Task.objects.select_related("repository", "commit").get(commit__sha=fix.sha)


ADDED = ("\n\ndef probe_total(values):\n"
         "    # add them up\n"
         "    total = 0  # from nothing\n"
         "    for value in values:\n"
         "        total = total + value\n"
         "    return total\n")


def git(*args, cwd=None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def test_rewrites_of_a_mined_tasks_candidate_apply_to_its_base_and_are_made_once(tmp_path):
    task = mined_task(tmp_path)
    base = task_base_sha(task)
    module = next(path for path in task.commit.source_files if path.endswith(".py"))
    before = git("show", f"{base}:{module}", cwd=task.repository.mirror_dir)
    after = before + ADDED
    # A candidate that also adds a file that is not Python: every rewrite carries it as it is.
    patch = file_diff(module, before, after) + file_diff("NOTES.txt", None, "Totals added.\n")
    original = Candidate.objects.create(task=task, source="import", kind="agent", patch=patch)
    Candidate.objects.create(task=task, source="import", kind="none", no_patch=True)
    Candidate.objects.create(task=task, source="mutant", kind="off_by_one", patch=patch)  # not a source asked for

    assert task_style_probes_make(task) == (len(STYLE_REWRITES), "")
    probes = {probe.kind: probe for probe in Candidate.objects.filter(task=task, source="probe")}
    assert sorted(probes) == sorted(STYLE_REWRITES)
    checkout = tmp_path / "checkout"
    git("clone", "-q", str(task.repository.mirror_dir), str(checkout))
    for kind, probe in probes.items():
        assert probe.made == {"of": original.id, "rewrite": kind, "files": [module]} and probe.patch != patch
        git("checkout", "-q", "-f", base, cwd=checkout)
        git("clean", "-fdq", cwd=checkout)
        (tmp_path / "probe.diff").write_text(probe.patch)
        git("apply", str(tmp_path / "probe.diff"), cwd=checkout)
        text = (checkout / module).read_text()
        # The base's own lines as they were; the candidate's function read differently.
        assert text.startswith(before) and text != after and (checkout / "NOTES.txt").read_text() == "Totals added.\n"
        if kind == "locals_renamed":
            assert "value_1 = 0" in text and "total" not in text.split("def probe_total")[1]
        else:
            assert ast.dump(ast.parse(text)) == ast.dump(ast.parse(after)) and "# add them up" not in text
    assert task_style_probes_make(task) == (0, "")
    assert Candidate.objects.filter(task=task, source="probe").count() == len(STYLE_REWRITES)


def test_where_no_rewrite_can_be_made_it_says_why(tmp_path, settings):
    task = mined_task(tmp_path)
    imported = imported_tasks(tmp_path)[0]
    candidate(imported, "import")
    assert task_style_probes_make(imported) == (0, "an imported instance has no mirror to read its files from")
    patch = file_diff("textkit/notes.py", None, "def f():\n    # one\n    return 1\n")
    Candidate.objects.create(task=task, source="import", kind="agent", patch=patch)
    settings.COMMITGYM_MIRROR_DIR = tmp_path / "gone"
    made, why = task_style_probes_make(task)
    assert made == 0 and why.startswith("the task's files cannot be read from the mirror")
    assert not Candidate.objects.filter(source="probe").exists()


def probe_style(*args) -> str:
    out = StringIO()
    call_command("probe_style", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_the_commands_argument_errors_say_what_is_wrong_before_anything_is_made(tmp_path):
    tasks = imported_tasks(tmp_path)
    Candidate.objects.create(task=tasks[0], source="import", kind="agent", patch="a patch")
    candidates = Candidate.objects.count()
    for args, said in ((("--dataset", "probed", "--sources", "import,nonsense"), "unknown candidate source nonsense"),
                       (("--dataset", "probed", "--sources", "probe"), "unknown candidate source probe"),
                       (("--dataset", "probed", "--sources", " , "), "unknown candidate source (none given)"),
                       (("nowhere",), "'nowhere' is neither a task's id nor a registered repository"),
                       (("--dataset", "missing"), "no dataset named 'missing'"),
                       ((), "name one of")):
        with pytest.raises(CommandError, match=said.replace("(", r"\(").replace(")", r"\)")):
            probe_style(*args)
    assert not Job.objects.exists() and Candidate.objects.count() == candidates


def test_the_commands_json_line_over_graded_and_judged_rewrites(tmp_path):
    # Every candidate and rewrite graded and scored by the judge in use: nothing to queue, the figures at once.
    tasks = imported_tasks(tmp_path)
    rows_made(tasks, judge_a=judge_identity())
    rows_graded()
    Candidate.objects.filter(id=ROWS["r2b"].id).delete()
    line = json.loads(probe_style("--dataset", "probed", "--json"))
    assert not Job.objects.exists()
    assert list(line) == ["tasks", "probes_made", "skipped", "rewrites_kept", "graded_differently", "ungraded",
                          "judges"]
    why = "an imported instance has no mirror to read its files from"
    assert (line["tasks"], line["probes_made"], line["skipped"]) == (2, 0, dict.fromkeys(TASKS, why))
    assert (line["rewrites_kept"], line["graded_differently"], line["ungraded"]) == (3, 1, 0)
    in_use, b = line["judges"] if line["judges"][0]["model"] == judge_identity()[0] else line["judges"][::-1]
    assert list(in_use) == ["model", "prompt_version", "originals", "rewrites", "mean_spread", "max_spread",
                            "mean_shift_by_kind", "flip_share"]
    assert (in_use["originals"], in_use["rewrites"], in_use["flip_share"]) == (2, 3, 0.5)
    assert in_use["mean_spread"] == pytest.approx(0.175) and b["model"] == "judge-b"
    table = probe_style("--dataset", "probed")
    assert "3 rewrites grade as their candidate does; 1 grade differently" in table and "spread mean 0.175" in table


def test_the_dataset_page_says_how_far_style_moves_each_judge(tmp_path, curator_client):
    tasks = imported_tasks(tmp_path)
    dataset = Dataset.objects.get(name="probed")
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert "Does the judge judge style?" not in page
    rows_made(tasks)
    rows_graded()
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    section = page.split("Does the judge judge style?")[1].split("</table>")[0]
    assert "3 rewrites grade as their candidates do" in section and "1 grades differently" in section
    assert "1 has no ground truth yet" in section and "part of what it judges is style" in section
    assert "judge-a (prompt v1)" in section and "judge-b (prompt v1)" in section
    assert "0.175" in section and "0.200" in section and "comments removed 0.125" in section and "50%" in section
