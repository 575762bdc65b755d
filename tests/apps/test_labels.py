"""People label candidates: a blind page, a queue with overlap and holds, refusals that write nothing,
a curator's settlement, hidden controls, and what the labels say about the tests and the verifiers."""

import re
from collections import Counter
from datetime import timedelta
from unittest import mock

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from unidiff import PatchSet

from apps.datasets.models import Candidate, Dataset, Execution, JudgeScore, Release, Run
from apps.datasets.releases import export_rows
from apps.labels import selectors, services
from apps.labels.exports import label_export_start
from apps.labels.models import Label, LabelExport, LabelHold, QueueItem, Settlement
from apps.labels.selectors import dataset_seed, labelled_candidates, oracle_error_rates
from apps.labels.services import LabelForm, LabelRefused
from apps.repositories.models import Repository
from apps.tasks.models import IssueVersion, Review, Task
from apps.tasks.selectors import task_patches
from apps.tasks.states import task_summary_refresh
from tests.apps.test_execution_measures import succeeded
from tests.apps.test_sampling import valid_task  # noqa: F401 - a fixture
from tests.conftest import user_with_role, validation_make
from worker.engine.label.queue import uniform_share

pytestmark = pytest.mark.django_db

SENTINELS = {"run": "zebrafinch-agent-run", "model": "okapi-judge-model", "p_yes": "0.8137",
             "rationale": "quokkafrobnicated", "execution": "13 of 17", "outcome_source": "report:v2:pangolin.json"}


def candidate_make(task, name: str, *, outcome: str = "resolved", patch: str = "", source: str = "import",
                   **fields) -> Candidate:
    """A candidate of the task, graded; the task valid by a finished validation, as a worker leaves it."""
    if not task.validations.exists():
        validation_make(task, verdict="valid", fail_to_pass=["tests/test_slug.py::test_slugify"])
        task_summary_refresh(task.id)
    return Candidate.objects.create(task=task, source=source, run=Run.objects.create(name=name)
                                    if source in Candidate.AGENTS else None, kind=name, patch=patch or task_patches(task=task).source_patch,
                                    outcome=outcome, **{"outcome_source": "graded", **fields})


def dataset_of(task) -> Dataset:
    return Dataset.objects.get(repository=task.repository)


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def people(db):
    return {"ann": user_with_role("ann", "annotator"), "bob": user_with_role("bob", "annotator"),
            "cat": user_with_role("cat", "annotator"), "carla": user_with_role("carla", "curator")}


def label(dataset, candidate, user, verdict="correct", confidence=2, rationale="", lines=()):
    return services.label_submit(dataset=dataset, candidate=candidate, user=user,
                                 form=LabelForm(verdict, confidence, rationale, lines))


def take(dataset, user, **kwargs):
    return services.label_queue_next(dataset=dataset, user=user, **kwargs)


# --- blind ----------------------------------------------------------------------------------------


def test_the_annotators_page_holds_none_of_what_would_unblind_it_and_the_curators_view_shows_each(
        valid_task, people):  # noqa: F811
    task = valid_task
    IssueVersion.objects.create(task=task, number=1, author="model", text="Slugs keep their accents.")
    candidate = candidate_make(task, SENTINELS["run"], source="sampler", trajectory=[{"step": 1, "thought": "look at slug.py", "action": "open slug.py",
                                            "observation": "def slugify"}])
    Candidate.objects.filter(pk=candidate.pk).update(outcome_source=SENTINELS["outcome_source"])
    JudgeScore.objects.create(candidate=candidate, mode="patch", model=SENTINELS["model"], prompt_version=1,
                              p_yes=float(SENTINELS["p_yes"]), logprob_yes=-0.2, logprob_no=-1.7)
    tests = {f"tests/test_v.py::test_{n}": "PASSED" if n < 13 else "FAILED" for n in range(17)}
    Execution.objects.create(job=succeeded("execute", candidate), candidate=candidate, outcome="partial",
                             outcomes=tests, test_set_id=verifier_test_set_make(task).id)
    dataset = dataset_of(task)
    assert take(dataset, people["bob"]) == candidate
    label(dataset, candidate, people["bob"], "incorrect", 3, f"the {SENTINELS['rationale']} branch is wrong")
    assert take(dataset, people["ann"]) == candidate

    page = client_of(people["ann"]).get(reverse("labels:item", args=[dataset.pk, candidate.pk])).content.decode()
    assert "Slugs keep their accents." in page and "slugify" in page  # the issue and the patch are there
    lowered = page.lower()
    for name, value in SENTINELS.items():
        assert value.lower() not in lowered, f"the {name} is in the annotator's page"
    for word in ("resolved", "p(yes)", "bob", "incorrect by", "sampler", "verifier"):
        assert word not in lowered.replace('value="incorrect"', ""), word

    shown = client_of(people["carla"]).get(reverse("labels:candidate", args=[dataset.pk, candidate.pk]))
    assert shown.status_code == 200
    unblinded = shown.content.decode()
    for name, value in SENTINELS.items():
        if name != "outcome_source":
            assert value in unblinded, f"the {name} is missing from the curator's view"
    assert "resolved" in unblinded and "Sampler" in unblinded and "bob" in unblinded
    assert client_of(people["ann"]).get(reverse("labels:candidate", args=[dataset.pk, candidate.pk])).status_code == 403


def verifier_test_set_make(task):
    from apps.datasets.models import ReproductionTests, VerifierTestSet

    reproduction = ReproductionTests.objects.create(job=succeeded("reproduce", task), task=task)
    return VerifierTestSet.objects.create(job=succeeded("verifier_tests", task), task=task, reproduction=reproduction)


def test_a_trajectory_is_collapsed_and_gone_where_the_dataset_hides_it(valid_task, people):  # noqa: F811
    candidate = candidate_make(valid_task, "a", trajectory=[{"step": 1, "thought": "I am confident this is right",
                                                             "action": "edit", "observation": ""}])
    dataset = dataset_of(valid_task)
    take(dataset, people["ann"])
    url = reverse("labels:item", args=[dataset.pk, candidate.pk])
    page = client_of(people["ann"]).get(url).content.decode()
    assert re.search(r'<details id="trajectory">\s*<summary>', page) and "I am confident" in page
    services.label_settings_save(dataset=dataset, user=people["carla"], overlap=2, control_share=0,
                                 order="random", hide_trajectory=True)
    assert "I am confident" not in client_of(people["ann"]).get(url).content.decode()


def test_more_context_is_read_from_the_base_commit(valid_task, people):  # noqa: F811
    candidate = candidate_make(valid_task, "a")
    dataset = dataset_of(valid_task)
    take(dataset, people["ann"])
    url = reverse("labels:item", args=[dataset.pk, candidate.pk])
    narrow = client_of(people["ann"]).get(url).content.decode()
    whole = client_of(people["ann"]).get(url + "?lines=all").content.decode()
    assert whole.count("\n") > narrow.count("\n") and "whole files</strong>" in whole


# --- the queue --------------------------------------------------------------------------------------


def test_with_an_overlap_of_two_each_candidate_reaches_two_people_never_twice_the_same(valid_task, people):  # noqa: F811
    candidates = [candidate_make(valid_task, f"agent-{n}") for n in range(3)]
    dataset = dataset_of(valid_task)
    first = take(dataset, people["ann"])
    second = take(dataset, people["bob"])
    assert first != second  # another item was free
    assert take(dataset, people["ann"]) == first  # asking again gives back the item held
    label(dataset, first, people["ann"])
    label(dataset, second, people["bob"])
    seen = {"ann": {first}, "bob": {second}}
    for _ in range(4):
        for name in ("ann", "bob"):
            item = take(dataset, people[name])
            if item is None:
                continue
            assert item not in seen[name]
            seen[name].add(item)
            label(dataset, item, people[name])
    assert seen["ann"] == seen["bob"] == set(candidates)
    assert take(dataset, people["cat"]) is None  # every candidate has its two labels
    assert Label.objects.count() == 6


def test_a_third_person_is_not_given_an_item_two_others_hold(valid_task, people):  # noqa: F811
    only = candidate_make(valid_task, "a")
    dataset = dataset_of(valid_task)
    assert take(dataset, people["ann"]) == only == take(dataset, people["bob"])
    assert take(dataset, people["cat"]) is None
    LabelHold.objects.filter(annotator=people["bob"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert take(dataset, people["cat"]) == only  # bob's hold expired


def without_csrf_tokens(page):
    """The page less its random CSRF tokens, whose letters can spell any short word."""
    return re.sub(r'("X-CSRFToken": "|name="csrfmiddlewaretoken" value=")[^"]*"', r'\1"', page)


def test_controls_come_only_hidden_at_the_share_asked_and_curators_see_each_annotators_accuracy(
        valid_task, people):  # noqa: F811
    for n in range(4):
        candidate_make(valid_task, f"agent-{n}")
    gold = candidate_make(valid_task, "gold", source="gold")
    empty = candidate_make(valid_task, "empty", source="empty", outcome="no", patch="")
    caught = candidate_make(valid_task, "swap_operands", source="mutant", outcome="no")
    candidate_make(valid_task, "survivor", source="mutant", outcome="resolved")
    dataset = dataset_of(valid_task)
    services.label_queue_refresh(dataset, force=True)
    assert not QueueItem.objects.filter(dataset=dataset, control=True).exists()  # share 0: no control at all
    services.label_settings_save(dataset=dataset, user=people["carla"], overlap=1, control_share=0.4,
                                 order="random", hide_trajectory=False)
    controls = dict(QueueItem.objects.filter(dataset=dataset, control=True).values_list("candidate_id", "answer"))
    # round(0.4 * 4 / 0.6) = 3 asked; the gold patch and the caught mutant are all there are (the survivor may
    # be equivalent; the empty patch, with nothing to read, would give itself away).
    assert controls == {gold.id: "correct", caught.id: "incorrect"}
    while (item := take(dataset, people["ann"])) is not None:
        page = client_of(people["ann"]).get(reverse("labels:item", args=[dataset.pk, item.pk])).content.decode()
        assert not re.search(r"control:|gold|mutant|swap_operands|survivor", without_csrf_tokens(page).lower())
        label(dataset, item, people["ann"], "correct")
    page = client_of(people["carla"]).get(reverse("labels:dataset", args=[dataset.pk])).content.decode()
    accuracy = re.search(r'<table class="table" id="control-accuracy">.*?</table>', page, re.S).group(0)
    assert re.search(r"<td>ann</td><td>1</td><td>2</td><td>0.500</td>", accuracy)  # the caught mutant fooled her
    assert Label.objects.filter(control=True).count() == 2
    assert empty.id not in QueueItem.objects.values_list("candidate_id", flat=True)


# --- refusals ---------------------------------------------------------------------------------------


def test_every_bad_label_is_refused_in_words_and_writes_nothing(valid_task, people):  # noqa: F811
    a, b = candidate_make(valid_task, "a"), candidate_make(valid_task, "b")
    dataset = dataset_of(valid_task)
    held = take(dataset, people["ann"])
    other = b if held == a else a
    for form, said in ((LabelForm("incorrect", 2, "   "), "needs a rationale"),
                       (LabelForm("incorrect", 4, "wrong"), "confidence of 1"),
                       (LabelForm("incorrect", None, "wrong"), "confidence of 1"),
                       (LabelForm("maybe", 2), "correct, incorrect or can't tell")):
        with pytest.raises(LabelRefused, match=said):
            services.label_submit(dataset=dataset, candidate=held, user=people["ann"], form=form)
    with pytest.raises(LabelRefused, match="not assigned to you"):
        label(dataset, other, people["ann"])
    LabelHold.objects.filter(annotator=people["ann"]).update(expires_at=timezone.now() - timedelta(minutes=1))
    with pytest.raises(LabelRefused, match="hold on this item expired"):
        label(dataset, held, people["ann"])
    assert not Label.objects.exists()
    take(dataset, people["ann"])
    LabelHold.objects.filter(annotator=people["ann"]).update(expires_at=timezone.now() + timedelta(minutes=5))
    label(dataset, held, people["ann"])
    LabelHold.objects.create(dataset=dataset, candidate=held, annotator=people["ann"], taken_at=timezone.now(),
                             expires_at=timezone.now() + timedelta(minutes=5))
    with pytest.raises(LabelRefused, match="labelled this candidate already"):
        label(dataset, held, people["ann"], "incorrect", 1, "changed my mind")
    assert list(Label.objects.values_list("verdict", flat=True)) == ["correct"]

    with pytest.raises(LabelRefused, match="Only curators and admins"):
        services.label_settle(candidate=held, user=people["ann"], verdict="correct", note="mine")
    with pytest.raises(LabelRefused, match="nothing to settle"):
        services.label_settle(candidate=held, user=people["carla"], verdict="correct", note="fine")
    assert not Settlement.objects.exists()


def test_the_form_keeps_what_was_typed_when_a_label_is_refused(valid_task, people):  # noqa: F811
    candidate = candidate_make(valid_task, "a")
    pin = f"{PatchSet(candidate.patch)[0].path}:{PatchSet(candidate.patch)[0][0].target_start}"
    dataset = dataset_of(valid_task)
    take(dataset, people["ann"])
    response = client_of(people["ann"]).post(reverse("labels:item", args=[dataset.pk, candidate.pk]), {
        "verdict": "incorrect", "confidence": "3", "rationale": "", "lines": pin})
    page = response.content.decode()
    assert response.status_code == 400 and "needs a rationale" in page
    assert 'value="incorrect" id="verdict-incorrect" checked' in page and f"{pin}</textarea>" in page
    assert not Label.objects.exists()


def test_an_annotator_never_sees_a_repository_their_groups_cannot_see(valid_task, people):  # noqa: F811
    candidate = candidate_make(valid_task, "a")
    dataset = dataset_of(valid_task)
    Repository.objects.get(pk=valid_task.repository_id).allowed_groups.add(Group.objects.create(name="team-x"))
    ann = client_of(people["ann"])
    assert ann.get(reverse("labels:next", args=[dataset.pk])).status_code == 404
    assert ann.get(reverse("labels:item", args=[dataset.pk, candidate.pk])).status_code == 404
    with pytest.raises(LabelRefused, match="not in a repository you can see"):
        label(dataset, candidate, people["ann"])


# --- settling, and what the labels say ------------------------------------------------------------------


def test_a_disagreement_goes_to_a_curator_whose_settlement_is_final_and_a_weak_oracle_goes_back_to_curation(
        valid_task, people):  # noqa: F811
    Task.objects.filter(id=valid_task.id).update(state="accepted")
    candidate = candidate_make(valid_task, "a")  # the hidden tests resolve it
    dataset = dataset_of(valid_task)
    take(dataset, people["ann"])
    label(dataset, candidate, people["ann"], "correct")
    take(dataset, people["bob"])
    label(dataset, candidate, people["bob"], "incorrect", 3, "drops the accents instead of keeping them")
    curator = client_of(people["carla"])
    page = curator.get(reverse("labels:dataset", args=[dataset.pk])).content.decode()
    assert f'href="/datasets/{dataset.pk}/labels/candidates/{candidate.pk}/" class="settle-link"' in page
    shown = curator.get(reverse("labels:candidate", args=[dataset.pk, candidate.pk])).content.decode()
    assert "drops the accents instead of keeping them" in shown and 'id="settle-form"' in shown
    refused = curator.post(reverse("labels:settle", args=[dataset.pk, candidate.pk]), {"verdict": "incorrect",
                                                                                       "note": ""}, follow=True)
    assert "Say in the note why" in refused.content.decode() and not Settlement.objects.exists()
    curator.post(reverse("labels:settle", args=[dataset.pk, candidate.pk]),
                 {"verdict": "incorrect", "note": "bob is right: the accents go"})
    settlement = Settlement.objects.get()
    assert (settlement.verdict, settlement.settled_by, len(settlement.labels_seen)) == ("incorrect", people["carla"], 2)
    assert Task.objects.get(id=valid_task.id).state == "needs_review"  # a weak oracle goes back to curation
    review = curator.get(reverse("tasks:review", args=[valid_task.instance_id])).content.decode()
    assert 'id="weak-oracle-flag"' in review and f"candidate {candidate.pk}" in review
    page = curator.get(reverse("labels:dataset", args=[dataset.pk])).content.decode()
    assert "No disagreement waits for a curator." in page
    assert re.search(r'<ul id="weak-oracle-list"><li><a href="[^"]+"><code>' + re.escape(valid_task.instance_id), page)


def test_the_labels_page_is_for_curators_an_annotator_sees_only_their_own_progress(valid_task, people):  # noqa: F811
    candidate = candidate_make(valid_task, "a")
    dataset = dataset_of(valid_task)
    take(dataset, people["bob"])
    label(dataset, candidate, people["bob"], "incorrect", 3, f"the {SENTINELS['rationale']} branch")
    page = without_csrf_tokens(client_of(people["ann"]).get(reverse("labels:dataset", args=[dataset.pk])).content.decode())
    assert 'id="start-labelling"' in page and SENTINELS["rationale"] not in page and "bob" not in page
    assert 'id="open-items">1<' in page


def test_peoples_final_labels_reach_the_judge_training_rows_with_their_source(valid_task, people):  # noqa: F811
    fooled = candidate_make(valid_task, "fooled")  # the hidden tests resolve it
    rejected = candidate_make(valid_task, "rejected", outcome="no")
    unlabelled = candidate_make(valid_task, "unlabelled", outcome="no")
    dataset = dataset_of(valid_task)
    services.label_settings_save(dataset=dataset, user=people["carla"], overlap=1, control_share=0, order="random",
                                 hide_trajectory=False)
    for candidate, verdict in ((fooled, "incorrect"), (rejected, "correct")):
        take(dataset, people["ann"])
        LabelHold.objects.filter(annotator=people["ann"]).update(candidate=candidate)
        label(dataset, candidate, people["ann"], verdict, 3, "checked by hand")
    counts = Counter()
    rows = {row["candidate_id"]: (row["label"], row["label_source"])
            for row in export_rows(Release.Kind.JUDGE, [valid_task.id], counts)}
    assert rows == {fooled.id: (False, "people:agreed"), rejected.id: (True, "people:agreed"),
                    unlabelled.id: (False, "hidden_tests:graded")}
    assert counts == {"labelled_by_people": 2, "right": 1, "wrong": 2}


def test_agreement_over_time_is_drawn_with_its_table_worked_out_by_hand(valid_task, people):  # noqa: F811
    first, second = candidate_make(valid_task, "a"), candidate_make(valid_task, "b")
    dataset = dataset_of(valid_task)
    for candidate, verdicts in ((first, ("correct", "correct")), (second, ("correct", "incorrect"))):
        for name, verdict in zip(("ann", "bob"), verdicts):
            take(dataset, people[name])
            LabelHold.objects.filter(annotator=people[name]).update(candidate=candidate)
            label(dataset, candidate, people[name], verdict, 2, "why")
    yesterday = timezone.now() - timedelta(days=1)
    Label.objects.filter(candidate=first).update(created_at=yesterday)
    page = client_of(people["carla"]).get(reverse("labels:dataset", args=[dataset.pk])).content.decode()
    shown = re.search(r'<div class="chart-with-table" id="agreement-over-time">(.*?)</div>', page, re.S).group(1)
    assert '<svg class="chart"' in shown
    rows = re.findall(r"<tr><td>[-0-9]+</td><td class=\"num\">(\d+)</td><td class=\"num\">(\d+)</td>"
                      r"<td class=\"num\">([^<]+)</td></tr>", shown)
    # Day 1: one item, both said correct: chance agrees totally, no alpha. Day 2: answers C C | C I: 3 C and 1 I,
    # coincidences agreeing 2 of 4 (0.5), by chance (3*2 + 1*0) / (4*3) = 0.5: alpha 0.
    assert rows == [("2", "1", "—"), ("4", "2", "0.000")]


def test_one_click_from_the_item_does_not_unblind_it(valid_task, people):  # noqa: F811
    candidate = candidate_make(valid_task, "agent")
    dataset = dataset_of(valid_task)
    take(dataset, people["ann"])
    ann = client_of(people["ann"])
    page = ann.get(reverse("labels:item", args=[dataset.pk, candidate.pk])).content.decode()
    assert reverse("datasets:detail", args=[dataset.pk]) + '"' not in page  # no way round to the runs
    for url in (reverse("datasets:candidate", args=[candidate.pk]), reverse("datasets:run", args=[candidate.run_id]),
                reverse("datasets:task_candidates", args=[valid_task.instance_id]),
                reverse("datasets:task_matrix", args=[valid_task.instance_id]),
                reverse("datasets:toxic_tests", args=[dataset.pk])):
        response = ann.get(url)
        assert response.status_code == 403 and b"annotators label patches without them" in response.content, url
    assert client_of(people["carla"]).get(reverse("datasets:task_candidates", args=[valid_task.instance_id])
                                          ).status_code == 200


def test_a_weak_oracle_sends_a_task_back_once_and_only_curators_see_the_flag(valid_task, people):  # noqa: F811
    Task.objects.filter(id=valid_task.id).update(state="accepted")
    candidate = candidate_make(valid_task, "a")
    dataset = dataset_of(valid_task)
    for name, verdict in (("ann", "incorrect"), ("bob", "correct")):
        take(dataset, people[name])
        label(dataset, candidate, people[name], verdict, 3, "read it")
    assert Task.objects.get(id=valid_task.id).state == "accepted"  # a disagreement decides nothing
    services.label_settle(candidate=candidate, user=people["carla"], verdict="incorrect", note="ann is right")
    assert Task.objects.get(id=valid_task.id).state == "needs_review"
    review = Review.objects.create(task=valid_task, reviewer=people["carla"], decision="accept", underspecified=0,
                                   false_negative=0, difficulty="<15 min fix")
    services.label_settle(candidate=candidate, user=people["carla"], verdict="incorrect", note="still wrong")
    review.refresh_from_db()
    assert review.current  # sent back once: the review made since stands
    flagged = reverse("tasks:review", args=[valid_task.instance_id])
    assert 'id="weak-oracle-flag"' in client_of(people["carla"]).get(flagged).content.decode()
    assert 'id="weak-oracle-flag"' not in client_of(people["ann"]).get(flagged).content.decode()


def test_a_mutant_marked_equivalent_later_leaves_the_controls(valid_task, people):  # noqa: F811
    candidate_make(valid_task, "agent")
    mutant = candidate_make(valid_task, "swap", source="mutant", outcome="no")
    dataset = dataset_of(valid_task)
    services.label_settings_save(dataset=dataset, user=people["carla"], overlap=1, control_share=0.5,
                                 order="random", hide_trajectory=False)
    assert QueueItem.objects.get(candidate=mutant).active
    Candidate.objects.filter(pk=mutant.pk).update(made={"equivalent": True})
    services.label_queue_refresh(dataset)
    assert not QueueItem.objects.filter(candidate=mutant).exists()


def test_the_oracle_error_rate_stands_on_the_seeded_random_prefix_whatever_order_people_labelled_in(
        valid_task, people):  # noqa: F811
    candidates = [candidate_make(valid_task, f"agent-{n}", outcome=outcome)
                  for n, outcome in enumerate(["resolved", "resolved", "no", "no", "error", "resolved"])]
    dataset = dataset_of(valid_task)
    services.label_settings_save(dataset=dataset, user=people["carla"], overlap=1, control_share=0,
                                 order="uncertain", hide_trajectory=False)
    order = sorted(candidates, key=lambda c: uniform_share(dataset_seed(dataset.pk), c.id))
    people_say = {c.id: ("incorrect" if c.outcome == "resolved" and c.kind != "agent-0" else "correct")
                  for c in candidates}
    # The last in the seeded order is labelled first; the one before it never: the sample stops there.
    for candidate in [order[-1], *order[:-2]]:
        take(dataset, people["ann"])
        LabelHold.objects.filter(annotator=people["ann"]).update(candidate=candidate)
        label(dataset, candidate, people["ann"], people_say[candidate.id], 2, "read it")
    sample = oracle_error_rates(dataset, labelled_candidates(dataset, user=people["carla"]))
    prefix = order[:-2]
    assert (sample.items, sample.sampled) == (6, 4)
    counted = [c for c in prefix if c.outcome in ("resolved", "no", "partial")]
    resolved = [c for c in counted if c.outcome == "resolved"]
    unresolved = [c for c in counted if c.outcome != "resolved"]
    weak = sum(people_say[c.id] == "incorrect" for c in resolved)
    rejects = sum(people_say[c.id] == "correct" for c in unresolved)
    rate = sample.rates[0]
    assert (rate.weak_oracle.count, rate.weak_oracle.total) == (weak, len(resolved))
    assert (rate.rejects_valid.count, rate.rejects_valid.total) == (rejects, len(unresolved))
    assert sample.inconclusive == sum(c.outcome == "error" for c in prefix)  # an error says nothing either way


def test_a_rationale_is_pinned_only_to_lines_the_diff_shows(valid_task, people):  # noqa: F811
    candidate = candidate_make(valid_task, "a")
    changed = PatchSet(candidate.patch)[0]
    hunk = changed[0]
    inside, outside = hunk.target_start, hunk.target_start + hunk.target_length + 50
    dataset = dataset_of(valid_task)
    take(dataset, people["ann"])
    url = reverse("labels:item", args=[dataset.pk, candidate.pk])
    ann = client_of(people["ann"])
    for pins, said in (("nowhere.py:3", "the patch does not change nowhere.py"),
                       (f"{changed.path}:{outside}", f"line {outside} of {changed.path} is not in the diff"),
                       (f"{changed.path}", "write it as path:line")):
        response = ann.post(url, {"verdict": "incorrect", "confidence": "2", "rationale": "wrong", "lines": pins})
        assert response.status_code == 400 and said in response.content.decode(), pins
    assert not Label.objects.exists()
    ann.post(url, {"verdict": "incorrect", "confidence": "2", "rationale": "wrong", "lines": f"{changed.path}:{inside}"})
    assert Label.objects.get().lines == [{"path": changed.path, "line": inside}]


def test_labels_given_while_a_curator_reads_join_the_figures_within_half_a_minute(valid_task, people):  # noqa: F811
    first = candidate_make(valid_task, "a")
    dataset = dataset_of(valid_task)
    take(dataset, people["ann"])
    LabelHold.objects.filter(annotator=people["ann"]).update(candidate=first)
    label(dataset, first, people["ann"], "correct")
    carla = client_of(people["carla"])
    url = reverse("labels:dataset", args=[dataset.pk])
    assert 'id="figures-as-of"' not in carla.get(url).content.decode()
    take(dataset, people["bob"])
    LabelHold.objects.filter(annotator=people["bob"]).update(candidate=first)
    label(dataset, first, people["bob"], "incorrect", 2, "wrong")
    page = carla.get(url).content.decode()
    assert "the 1 label given since joins them" in page and "No disagreement waits" in page  # not counted yet
    cached = selectors.dataset_label_figures(dataset, user=people["carla"])
    assert cached["newer_labels"] == 1
    # Half a minute on, the figures are computed again with it.
    with mock.patch("apps.labels.selectors.time.time", return_value=cached["as_of"] + selectors.FRESH_SECONDS + 1):
        page = carla.get(url).content.decode()
    assert 'id="figures-as-of"' not in page and "class=\"settle-link\">Candidate " + str(first.id) in page
    # A settlement shows at once.
    services.label_settle(candidate=first, user=people["carla"], verdict="incorrect", note="bob is right")
    assert "No disagreement waits" in carla.get(url).content.decode()


def test_people_against_the_tests_with_cohens_kappa_worked_out_by_hand(valid_task, people):  # noqa: F811
    outcomes = ["resolved", "resolved", "no", "no"]
    said = ["correct", "incorrect", "incorrect", "incorrect"]
    candidates = [candidate_make(valid_task, f"agent-{n}", outcome=outcome) for n, outcome in enumerate(outcomes)]
    dataset = dataset_of(valid_task)
    services.label_settings_save(dataset=dataset, user=people["carla"], overlap=1, control_share=0, order="random",
                                 hide_trajectory=False)
    for candidate, verdict in zip(candidates, said):
        take(dataset, people["ann"])
        LabelHold.objects.filter(annotator=people["ann"]).update(candidate=candidate)
        label(dataset, candidate, people["ann"], verdict, 2, "read it")
    page = client_of(people["carla"]).get(reverse("labels:dataset", args=[dataset.pk])).content.decode()
    table = re.search(r'<table class="table confusion" id="confusion-1">.*?</table>', page, re.S).group(0)
    # People C I I I against the tests T T F F: they agree on 3 of 4 (0.75); by chance (1*2 + 3*2) / 16 = 0.5 (people
    # say correct 1 of 4 times, the tests resolve 2 of 4): kappa (0.75 - 0.5) / (1 - 0.5) = 0.5.
    assert 'Cohen\'s kappa <span class="confusion-kappa">0.500</span> (agreement 0.750, n 4)' in table
    assert re.findall(r"<td>(\d+)</td>", table) == ["1", "0", "1", "2"]


def test_the_admin_reads_labels_and_settlements_and_changes_none(valid_task, people, admin_user):
    candidate = candidate_make(valid_task, "a")
    dataset = dataset_of(valid_task)
    take(dataset, people["ann"])
    given = label(dataset, candidate, people["ann"], "incorrect", 2, "wrong branch")
    admin = client_of(admin_user)
    page = admin.get(reverse("admin:labels_label_changelist")).content.decode()
    assert "ann" in page and "incorrect" in page
    assert admin.get(reverse("admin:labels_label_add")).status_code == 403
    admin.post(reverse("admin:labels_label_change", args=[given.pk]), {"verdict": "correct", "confidence": "3"})
    assert Label.objects.get(pk=given.pk).verdict == "incorrect"


def test_a_label_exports_job_is_sent_only_once_the_export_row_names_it(valid_task, transactional_db):  # noqa: F811
    seen = []

    def dispatched(job_id, **kwargs):  # what a worker taking the message at once would find
        seen.append(LabelExport.objects.filter(job_id=job_id).exists())

    with mock.patch("apps.jobs.services.job_dispatch", side_effect=dispatched):
        label_export_start(dataset=dataset_of(valid_task), format="jsonl", pseudonymize=False)
    assert seen == [True]
