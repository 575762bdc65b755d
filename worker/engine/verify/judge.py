"""The judge: a model reads the issue and a candidate patch (and, by mode, the agent's trajectory) and
answers YES or NO; its score is P(YES) = e^yes / (e^yes + e^no) from the first answer token's
log-probabilities.

Modes: `patch` (the issue and the patch), `trajectory` (also the agent's steps), `no-self-assessment`
(the steps without the agent's own claims of success: its closing summary and every sentence in its
thoughts that says the fix works, since a judge leans on how confident the agent sounds).

A trajectory longer than its budget is shortened the same way every time: the longest observation is
left out first (a marker says how long it was), then the next longest, and if that is not enough the
earliest steps go; what was left out is recorded on the score.
"""

import math
import re
from dataclasses import dataclass, field
from typing import Optional, Sequence

from worker.engine.llm.prompts import Prompt, clip_head

JUDGE_MODES = ("patch", "trajectory", "no-self-assessment")
ANSWERS = ["YES", "NO"]
# An API that returns only its top log-probabilities may leave one answer token out: it is then less
# likely than every token returned, and this is taken for it (or the other answer's, if lower).
LOGPROB_FLOOR = -10.0
PATCH_CHARS = 12_000
ISSUE_CHARS = 8_000
# A sentence of the agent's that says the fix works: "I fixed the bug.", "All tests passed.", "It works now."
CLAIM = re.compile(
    r"[^.!?\n]*\b(fixed|resolved|solved|works|worked|working|pass|passes|passed|passing|succeeded|success|"
    r"successful|successfully|verified|confirmed|confirms|should (now )?(work|resolve))\b[^.!?\n]*[.!?]?", re.I)
# Text inside the prompt's tags is the data judged; a closing tag in it would end its part early.
_CLOSING_TAG = re.compile(r"</\s*(issue|patch|trajectory)\s*>", re.I)


@dataclass(frozen=True)
class JudgeScore:
    p_yes: float
    uncertain: bool  # an answer token was missing from the log-probabilities returned: a floor stood in
    logprob_yes: float
    logprob_no: float


def judge_score(logprobs: dict[str, float]) -> JudgeScore:
    """P(YES) from the answer tokens' log-probabilities (missing or -inf: the floor, and uncertain)."""
    yes, no = logprobs.get("YES", -math.inf), logprobs.get("NO", -math.inf)
    uncertain = not (math.isfinite(yes) and math.isfinite(no))
    if not math.isfinite(yes):
        yes = min(LOGPROB_FLOOR, no) if math.isfinite(no) else LOGPROB_FLOOR
    if not math.isfinite(no):
        no = min(LOGPROB_FLOOR, yes)
    # The logistic of the difference, computed without overflow either way.
    difference = yes - no
    p = 1 / (1 + math.exp(-difference)) if difference >= 0 else math.exp(difference) / (1 + math.exp(difference))
    return JudgeScore(p_yes=p, uncertain=uncertain, logprob_yes=yes, logprob_no=no)


@dataclass
class Shortening:
    observations_left_out: int = 0
    steps_left_out: int = 0
    claims_removed: int = 0
    chars_before: int = 0
    chars_after: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.observations_left_out or self.steps_left_out or self.claims_removed)


def self_assessment_removed(steps: Sequence[dict]) -> tuple[list[dict], int]:
    """The steps without the agent's closing summary (the last step's thought) and without any sentence
    of its thoughts that claims the fix works; and how many such pieces went."""
    kept, removed = [], 0
    for index, step in enumerate(steps):
        thought = step.get("thought", "")
        if index == len(steps) - 1 and thought.strip():
            thought, removed = "", removed + 1
        thought, claims = CLAIM.subn("", thought)
        kept.append({**step, "thought": thought.strip()})
        removed += claims
    return kept, removed


def trajectory_render(steps: Sequence[dict], *, budget_chars: int, mode: str) -> tuple[str, Shortening]:
    """The steps as the judge reads them, within `budget_chars`."""
    record = Shortening()
    steps = [dict(step) for step in steps]
    if mode == "no-self-assessment":
        steps, record.claims_removed = self_assessment_removed(steps)
    record.chars_before = len(_render(steps))
    by_length = sorted(range(len(steps)), key=lambda i: (-len(steps[i].get("observation", "")), i))
    for index in by_length:
        if len(_render(steps)) <= budget_chars:
            break
        length = len(steps[index].get("observation", ""))
        marker = f"[observation of {length} characters left out]"
        if length > len(marker):
            steps[index]["observation"] = marker
            record.observations_left_out += 1
    first = 0
    while first < len(steps) and len(_render(steps[first:], left_out=first)) > budget_chars:
        first += 1
    record.steps_left_out = first
    text = _render(steps[first:], left_out=first)
    record.chars_after = len(text)
    return text, record


def _render(steps: Sequence[dict], left_out: int = 0) -> str:
    parts = [f"[the first {left_out} steps left out]"] if left_out else []
    for step in steps:
        lines = [f"Step {step.get('step', '')}"]
        for name in ("thought", "action", "observation"):
            if step.get(name):
                lines.append(f"{name.capitalize()}: {step[name]}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


@dataclass(frozen=True)
class JudgeInput:
    issue: str
    patch: str
    steps: Optional[list[dict]] = None  # the trajectory, if any


@dataclass
class JudgePrompt:
    messages: list[dict[str, str]]
    shortening: Shortening = field(default_factory=Shortening)


def judge_messages(prompt: Prompt, given: JudgeInput, *, mode: str, budget_chars: int) -> JudgePrompt:
    """The issue as its own message first (every candidate of a task shares it), then the candidate."""
    if mode not in JUDGE_MODES:
        raise ValueError(f"unknown judge mode {mode!r}: one of {', '.join(JUDGE_MODES)}")
    issue = _inert(clip_head(given.issue, ISSUE_CHARS))
    patch = _inert(clip_head(given.patch, PATCH_CHARS)) if given.patch.strip() else "(no patch)"
    shortening, trajectory_part = Shortening(), ""
    if mode != "patch" and given.steps:
        room = max(0, budget_chars - len(issue) - len(patch))
        text, shortening = trajectory_render(given.steps, budget_chars=room, mode=mode)
        trajectory_part = f"The developer's steps while writing it:\n\n<trajectory>\n{_inert(text)}\n</trajectory>\n"
    return JudgePrompt(prompt.messages(issue=issue, patch=patch, trajectory_part=trajectory_part), shortening)


def _inert(text: str) -> str:
    """`text` with the prompt's closing tags broken (`</patch>` becomes `< /patch>`)."""
    return _CLOSING_TAG.sub(lambda m: "< /" + m.group(0)[2:], text)
