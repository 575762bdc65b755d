"""Judging candidates: one job per task on the `llm` queue. The judge model reads the task's issue (its
current version) and each candidate's patch, and the agent's trajectory in the modes that show it;
each candidate gets its P(YES) (worker/engine/verify/judge.py). Candidates already scored in that
mode, by that model and prompt version, are not asked again."""

from dataclasses import asdict
from typing import Optional

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

from apps.jobs.services import JobFailed, JobRefused, job_start
from apps.llm.calls import model_scores, role_settings
from apps.llm.models import ModelCall
from apps.tasks.backtranslation import task_current_issue
from apps.tasks.models import Task
from worker.engine.llm.clients import ModelError
from worker.engine.llm.prompts import prompt_load
from worker.engine.verify.judge import ANSWERS, JudgeInput, judge_messages, judge_score

from ..models import Candidate, JudgeScore, Judging

JUDGE = "judge"  # the job kind (registered in apps.datasets.apps)
STYLE_PROBE_MODE = "patch"
JUDGE_PROMPT = "judge"
CHARS_PER_TOKEN = 3  # a cautious guess, for a trajectory's budget in characters from a context in tokens
TOKENS_KEPT_FREE = 256  # of the context, for the chat template's markers and the answer


def judge_identity() -> tuple[str, int]:
    """(the judge model's identity, the judge prompt's version): what a score is kept under."""
    return role_settings("judge").identity, prompt_load(JUDGE_PROMPT).version


def candidates_unjudged(candidates: QuerySet, mode: str) -> QuerySet:
    """The candidates without a score in `mode` from the judge model and prompt in use now."""
    model, version = judge_identity()
    scored = JudgeScore.objects.filter(candidate=OuterRef("pk"), mode=mode, model=model, prompt_version=version)
    return candidates.exclude(Exists(scored))


def task_judge_start(*, task: Task, mode: str, actor=None) -> Optional[Judging]:
    """Queue a judging of the task's candidates; None when one is queued or running already."""
    with transaction.atomic():
        job, created = job_start(kind=JUDGE, subject=task, user=actor)
        if not created:
            return None
        return Judging.objects.create(job=job, task=task, mode=mode)


def judge_job_work(job, progress) -> None:
    """The registered `run`: ask the judge about every candidate of the task not yet scored."""
    judging = Judging.objects.select_related("task").get(job=job)
    task = judging.task
    try:
        model_settings = role_settings("judge")
        model = model_settings.identity
    except ModelError as error:
        raise JobFailed("model_failed", f"{error.code}: {error}") from None
    issue = task_current_issue(task=task)
    if issue is None or not issue.text.strip():
        raise JobFailed("no_issue", "The task has no issue text yet: write or import one before judging.")
    prompt = prompt_load(JUDGE_PROMPT)
    version = prompt.version
    budget = (model_settings.context_tokens - TOKENS_KEPT_FREE) * CHARS_PER_TOKEN
    asked, shortenings = {}, {}
    candidates = Candidate.objects.filter(task=task)
    if judging.mode != STYLE_PROBE_MODE:  # the style probe's rewrites are judged on their patch alone
        candidates = candidates.exclude(source=Candidate.Source.PROBE)
    for candidate in candidates_unjudged(candidates, judging.mode).order_by("id"):
        made = judge_messages(prompt, JudgeInput(issue.text, candidate.patch, candidate.trajectory or None),
                              mode=judging.mode, budget_chars=budget)
        asked[candidate.id], shortenings[candidate.id] = made.messages, asdict(made.shortening)
    progress.report(0, len(asked))  # one call a candidate
    in_flight = 1 if model_settings.backend == "embedded" else settings.COMMITGYM_JUDGE_IN_FLIGHT
    counts, failures = {"scored": 0, "failed": 0}, []

    def stored(candidate_id, call) -> bool:
        """Each call's score stored as it comes (nothing paid for is lost); False stops the rest: the job
        was taken over, or someone cancelled it."""
        if not progress.holding():
            return False
        if call.outcome != ModelCall.Outcome.OK:
            counts["failed"] += 1
            failures.append(f"candidate {candidate_id}: {call.error_code}: {call.error_message}")
        else:
            _score_store(candidate_id, judging.mode, model, version, call, shortenings[candidate_id])
            counts["scored"] += 1
        return progress.go_on(counts["scored"] + counts["failed"])

    model_scores(role="judge", prompt=prompt, asked=asked, answers=ANSWERS, task=task, in_flight=in_flight,
                 on_each=stored)
    detail = "\n".join(failures)[:5000]
    Judging.objects.filter(id=judging.id).update(model=model, counts=counts, detail=detail)
    progress.report(counts["scored"] + counts["failed"])  # cancelled: the scores stored so far stay
    if failures and not counts["scored"]:
        raise JobFailed("model_failed", f"No candidate could be judged: {failures[0]}")


def _score_store(candidate_id: int, mode: str, model: str, version: int, call: ModelCall, shortening: dict) -> None:
    logprobs = {answer: value for answer, value in (call.logprobs or {}).items() if value is not None}
    score = judge_score(logprobs)
    JudgeScore.objects.update_or_create(
        candidate_id=candidate_id, mode=mode, model=model, prompt_version=version,
        defaults={"p_yes": score.p_yes, "uncertain": score.uncertain, "logprob_yes": score.logprob_yes,
                  "logprob_no": score.logprob_no, "shortening": shortening, "call": call})


def judge_job_retry(job, user):
    judging = Judging.objects.select_related("task").get(job=job)
    again = task_judge_start(task=judging.task, mode=judging.mode, actor=user)
    if again is None:
        raise JobRefused("This task's candidates are being judged already.")
    return again.job
