"""Labelling in a real browser: two annotators work through a queue with an overlap of two by keyboard
shortcuts, the second never seeing the first's label; a curator settles their disagreement, and the
task's review page flags its hidden tests as a weak oracle. Screenshots go to var/screenshots/."""

import re

import pytest
from playwright.sync_api import expect

from apps.datasets.models import Candidate, Dataset
from apps.labels.models import Label, Settlement
from tests.apps.test_labels import candidate_make
from tests.apps.test_sampling import valid_task  # noqa: F401 - a fixture
from tests.browser.conftest import log_in, page_screenshot
from tests.conftest import user_with_role

pytestmark = pytest.mark.e2e

RATIONALE = "keeps the accents but drops the digits"


def _candidate_shown(page) -> int:
    return int(page.locator("#label-item").get_attribute("data-candidate"))


def _next_item(page, after: int) -> None:
    """Wait until the queue shows an item other than `after` (or says it is empty)."""
    expect(page.locator(f'#label-item[data-candidate="{after}"]')).to_have_count(0)
    page.wait_for_load_state("load")  # its shortcuts' scripts have run


def test_two_annotators_label_with_shortcuts_and_a_curator_settles_their_disagreement(
        live_server, transactional_db, valid_task, new_page, page_problems, screenshot_dir):  # noqa: F811
    candidates = [candidate_make(valid_task, f"agent-{n}") for n in range(3)]  # each resolved by the hidden tests
    for name, role in (("ann", "annotator"), ("bob", "annotator"), ("carla", "curator")):
        user_with_role(name, role)
    dataset = Dataset.objects.get(repository=valid_task.repository)
    base = live_server.url

    ann = new_page()
    log_in(ann, base, "ann", "pw-ann", then=f"/datasets/{dataset.pk}/labels/")
    ann.locator("#start-labelling").click()
    ann.wait_for_load_state("load")
    first = _candidate_shown(ann)
    expect(ann.locator("#issue-pane")).to_be_visible()
    page_screenshot(ann, screenshot_dir / "label-item.png")
    ann.keyboard.press("c")
    expect(ann.locator("#verdict-correct")).to_be_checked()
    ann.keyboard.press("2")  # a confidence with a label chosen: saved, and on to the next
    _next_item(ann, first)
    second = _candidate_shown(ann)
    ann.keyboard.press("i")
    ann.keyboard.press("3")  # incorrect needs a rationale first: the field takes the focus, nothing is saved
    expect(ann.locator("#rationale")).to_be_focused()
    ann.keyboard.type(RATIONALE)
    ann.keyboard.press("Escape")
    ann.keyboard.press("3")
    _next_item(ann, second)
    third = _candidate_shown(ann)
    ann.keyboard.press("?")
    expect(ann.locator("#shortcuts")).to_be_visible()
    ann.keyboard.press("?")
    ann.keyboard.press("t")
    ann.keyboard.press("1")
    expect(ann.locator("#queue-empty")).to_be_visible()
    assert {first, second, third} == {c.id for c in candidates}
    assert dict(Label.objects.filter(annotator__username="ann").values_list("candidate_id", "verdict")) == {
        first: "correct", second: "incorrect", third: "cant_tell"}

    bob = new_page()
    log_in(bob, base, "bob", "pw-bob", then=f"/datasets/{dataset.pk}/label/")
    bob.wait_for_load_state("load")
    seen = []
    while not bob.locator("#queue-empty").count():
        shown = _candidate_shown(bob)
        assert RATIONALE not in bob.content() and "ann" not in bob.locator("#label-item").inner_text()
        seen.append(shown)
        bob.keyboard.press("c")
        bob.keyboard.press("3")
        _next_item(bob, shown)
    assert sorted(seen) == sorted(c.id for c in candidates)  # the overlap of two: each item once more

    carla = new_page()
    log_in(carla, base, "carla", "pw-carla", then=f"/datasets/{dataset.pk}/labels/")
    page_screenshot(carla, screenshot_dir / "labels-page.png")
    links = carla.locator("#settle a.settle-link")
    expect(links).to_have_count(2)  # incorrect against correct, and can't tell against correct
    carla.locator(f'#settle a[href$="/candidates/{second}/"]').click()
    expect(carla.locator("#labels")).to_contain_text(RATIONALE)
    carla.locator("#settle-incorrect").check()
    carla.locator("#settle-note").fill("ann is right: the digits go")
    carla.locator("#settle-save").click()
    expect(carla.locator("#settle a.settle-link")).to_have_count(1)
    assert Settlement.objects.get().verdict == "incorrect"

    carla.goto(f"{base}/tasks/{valid_task.instance_id}/review/")
    expect(carla.locator("#weak-oracle-flag")).to_contain_text(f"candidate {second}")
    page_screenshot(carla, screenshot_dir / "weak-oracle-flag.png")
    assert Candidate.objects.get(id=second).outcome == "resolved"
    assert not page_problems.items, page_problems.items


def test_an_item_is_labelled_without_javascript(live_server, transactional_db, valid_task, browser,  # noqa: F811
                                               page_problems):
    candidate = candidate_make(valid_task, "agent")
    user_with_role("ann", "annotator")
    dataset = Dataset.objects.get(repository=valid_task.repository)
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    try:
        plain = context.new_page()
        page_problems.watch(plain)
        page_problems.allow(f"/datasets/{dataset.pk}/label/{candidate.id}/", 400)
        log_in(plain, live_server.url, "ann", "pw-ann", then=f"/datasets/{dataset.pk}/label/")
        plain.locator("#verdict-incorrect").check()
        plain.locator("#confidence-2").check()
        plain.locator("#label-save").click()
        expect(plain.locator("#refusal")).to_contain_text("needs a rationale")
        expect(plain.locator("#verdict-incorrect")).to_be_checked()
        plain.locator("#rationale").fill("the patch only renames a variable")
        plain.locator("#label-save").click()
        expect(plain.locator("#queue-empty")).to_be_visible()
    finally:
        context.close()
    assert re.search("renames", Label.objects.get().rationale)
    assert not page_problems.items, page_problems.items
