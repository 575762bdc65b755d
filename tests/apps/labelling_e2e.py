"""People label the sample repository's candidates through the pages, end to end: three annotators
(every one of them on every item: an overlap of 3), hidden controls among the items, a curator who
settles the one disagreement; then the dataset page's oracle error rate and best@k against people,
the labels' export and the judge-training rows, with the figures worked out here by hand.

Called from the grading end-to-end test, which leaves the repository graded: on the strong task the
imported candidates agent-right and agent-commented (both resolved) and agent-empty (no patch); on
the weak task, whose tests every mutant survives, this adds agent-sly (a mutant's wrong patch the
weak tests resolve)."""

import json
import re

from django.test import Client
from django.urls import reverse

from apps.datasets.models import Candidate, Dataset
from apps.labels.models import Label, QueueItem, Settlement
from tests.conftest import user_with_role

SLY_KIND = "flipped_comparison"  # survives the weak tests, and nobody marked it equivalent


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _label_everything(client: Client, dataset: Dataset, verdict_of) -> list[int]:
    """Take items from the queue and label each until it says there is nothing left."""
    labelled = []
    while True:
        response = client.get(reverse("labels:next", args=[dataset.pk]))
        if response.status_code == 200:
            assert 'id="queue-empty"' in response.content.decode()
            return labelled
        candidate_id = int(re.search(r"/label/(\d+)/$", response.url).group(1))
        verdict, rationale = verdict_of(candidate_id)
        saved = client.post(response.url, {"verdict": verdict, "confidence": "3", "rationale": rationale})
        assert saved.status_code == 302, saved.content.decode()[-2000:]
        labelled.append(candidate_id)


def people_label_the_sample_repository(*, manage, tmp_path, repository, strong_task, weak_task, curator_client,
                                       curator):
    sly_patch = Candidate.objects.get(task=weak_task, source="mutant", kind=SLY_KIND).patch
    predictions = tmp_path / "sly.jsonl"
    predictions.write_text(json.dumps({"instance_id": weak_task.instance_id, "model_name_or_path": "agent-sly",
                                       "model_patch": sly_patch}) + "\n")
    assert manage("import_predictions", str(predictions)).returncode == 0
    assert manage("grade", weak_task.instance_id, "--json").returncode == 0
    sly = Candidate.objects.get(task=weak_task, run__name="agent-sly")
    right, commented = (Candidate.objects.get(task=strong_task, run__name=name)
                        for name in ("agent-right", "agent-commented"))
    assert [c.outcome for c in (sly, right, commented)] == ["resolved"] * 3

    dataset = Dataset.objects.get(repository=repository)
    response = curator_client.post(reverse("labels:settings", args=[dataset.pk]),
                                   {"overlap": "3", "control_share": "50", "order": "random"})
    assert response.status_code == 302
    items = dict(QueueItem.objects.filter(dataset=dataset).values_list("candidate_id", "control"))
    # The three agents' candidates with a patch, and round(0.5 * 3 / 0.5) = 3 hidden controls drawn from the two
    # gold patches and the caught mutants: at least one of them a mutant.
    assert sorted(i for i, control in items.items() if not control) == sorted([right.id, commented.id, sly.id])
    answers = dict(QueueItem.objects.filter(dataset=dataset, control=True).values_list("candidate_id", "answer"))
    sources = dict(Candidate.objects.filter(id__in=list(answers)).values_list("id", "source"))
    assert len(answers) == 3 and "mutant" in sources.values()
    assert all(answers[i] == ("correct" if sources[i] == "gold" else "incorrect") for i in answers)

    annotators = [user_with_role(name, "annotator") for name in ("ann", "bob", "cat")]

    def verdict_by(name):
        def verdict_of(candidate_id):
            if candidate_id in answers:
                return answers[candidate_id], "it breaks the fix" if answers[candidate_id] == "incorrect" else ""
            if candidate_id == sly.id and name != "cat":
                return "incorrect", "flips the comparison: values at the bound are not clamped"
            return "correct", ""
        return verdict_of

    for user in annotators:
        assert sorted(_label_everything(_client(user), dataset, verdict_by(user.username))) == sorted(items)
    assert Label.objects.filter(dataset=dataset).count() == 18

    # The one disagreement (cat on agent-sly) goes to the curator, who settles it.
    page = curator_client.get(reverse("labels:dataset", args=[dataset.pk])).content.decode()
    assert re.findall(r'class="settle-link">Candidate (\d+)<', page) == [str(sly.id)]
    assert "cat said correct" in page
    response = curator_client.post(reverse("labels:settle", args=[dataset.pk, sly.id]),
                                   {"verdict": "incorrect", "note": "the weak tests miss the flipped comparison"})
    assert response.status_code == 302 and Settlement.objects.get().settled_by == curator
    review = curator_client.get(reverse("tasks:review", args=[weak_task.instance_id])).content.decode()
    assert 'id="weak-oracle-flag"' in review

    # Worked out by hand. Labelled in a uniformly random order, graded: agent-right, agent-commented and agent-sly,
    # all resolved; people call agent-sly incorrect: 1 of 3 overturned, exact interval [1 - 0.975^(1/3), 0.025^(1/3)
    # solved for the upper tail] = [0.008, 0.906]. None is unresolved: the other direction has no candidate.
    page = curator_client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    panel = re.search(r'<section id="labels-panel">.*?</section>', page, re.S).group(0)
    assert '<strong class="weak-oracle-rate">1 of 3 = 0.333</strong> [0.008, 0.906]' in panel
    assert "tests say not resolved, people say correct:\n    —" in panel
    # best@k over the two tasks whose candidates are all labelled (agent-empty, with no patch, is outside the pools,
    # as for every selector): strong [right, commented] = tests [T, T], people [T, T]; weak [sly] = tests [T],
    # people [F]. Random and oracle, at k = 1 and k = 2 alike: tests (1 + 1) / 2 = 1.000, people (1 + 0) / 2 = 0.500.
    table = re.search(r'<table class="table" id="best-at-k-people">.*?</table>', panel, re.S).group(0)

    def cells(name):
        row = re.search(rf'<tr data-selector="{name}">(.*?)</tr>', table, re.S).group(1)
        return re.findall(r'<td class="num">([^<]*)</td>', row)

    assert "k=1: tests" in table and "k=2: people" in table
    assert cells("random") == cells("oracle") == ["1.000", "0.500", "1.000", "0.500"]
    judge = [float(value) for value in cells("judge")]  # the weak task's one candidate: 1 by the tests, 0 by people
    assert round(judge[0] - judge[1], 3) == round(judge[2] - judge[3], 3) == 0.5

    # Every label leaves in the export, by pseudonyms; people's final labels reach the judge-training rows.
    out = tmp_path / "labels.csv"
    exported = manage("export_labels", dataset.name, "--format", "csv", "--out", str(out), "--pseudonymize", "--json")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["rows"] == 18
    text = out.read_text()
    assert not re.search(r"\b(ann|bob|cat|carla)\b", text) and len(set(re.findall(r"annotator-[0-9a-f]{10}", text))) == 4  # three and the curator
    assert "the weak tests miss the flipped comparison" in text
