"""The measures and the judge: how fast best@k is computed exactly, and how fast the embedded model
judges a dataset.

Goals (issue: the judge and the measures):
- best@k for 500 tasks x 26 candidates, for every selector that ranks by a fixed score (random,
  judge, oracle; execution ranks the same way once it exists), k = 1..26, in under 0.5 s. Baseline,
  in the same run: the Codex paper's float pass@k estimator (numpy) over the same tasks and k, which
  is the oracle's curve alone, in floats.
- The hybrid's best@k, exactly (every subset counted, not sampled), for the same tasks with execution
  scores, k = 1..26: printed against the fixed-score selectors' exact computation in the same run.
- Judging a dataset with the embedded model: at most 1.2 x the time the model takes to read the
  dataset's distinct prompt tokens once. The judging is what the judge job does per task (the
  prompts built, each candidate asked in order, the issue read once per task), without the rows it
  stores; the baseline evaluates each task's shared prefix once and each candidate's own tokens
  once, on the same model, in the same run.
"""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402

from worker.engine.verify.hybrid import hybrid_curve  # noqa: E402
from worker.engine.verify.measures import best_at_k_over_tasks  # noqa: E402

TASKS, CANDIDATES = 500, 26


def pools(seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(TASKS):
        correct = [bool(c) for c in rng.random(CANDIDATES) < rng.random()]
        judge = [round(float(p), 3) for p in rng.random(CANDIDATES)]  # rounded: ties, as real P(YES) has
        yield correct, judge


def exact(tasks) -> list:
    rankings = {"random": lambda correct, judge: [0] * CANDIDATES, "judge": lambda correct, judge: judge,
                "oracle": lambda correct, judge: [int(c) for c in correct]}
    return [best_at_k_over_tasks([(rank(correct, judge), correct) for correct, judge in tasks], CANDIDATES)[0]
            for rank in rankings.values()]


def hybrid(tasks) -> list:
    return [hybrid_curve(judge, execution, correct, CANDIDATES) for correct, judge, execution in tasks]


def with_execution(tasks, seed: int = 1) -> list:
    rng = np.random.default_rng(seed)
    return [(correct, judge, [(int(a), int(b)) for a, b in rng.integers(0, 6, size=(CANDIDATES, 2))])
            for correct, judge in tasks]


def estimator(tasks) -> np.ndarray:
    rows = []
    for correct, _ in tasks:
        n, c = CANDIDATES, sum(correct)
        rows.append([1.0 if n - c < k else 1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1))
                     for k in range(1, CANDIDATES + 1)])
    return np.mean(rows, axis=0)


def best_of(runs: int, work, tasks) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work(tasks)
        times.append(time.perf_counter() - started)
    return min(times)


JUDGED_TASKS, JUDGED_CANDIDATES = 4, 8


def judged_dataset():
    """Tasks with an issue of a few paragraphs and candidates of a few hunks each."""
    rng = np.random.default_rng(3)
    for task in range(JUDGED_TASKS):
        issue = (f"Calling parse_duration('{task}h30m') raises ValueError instead of returning {task * 3600 + 1800}.\n"
                 "Steps to reproduce: import the helper, call it with a combined unit string, compare.\n" * 6)
        patches = []
        for candidate in range(JUDGED_CANDIDATES):
            lines = "".join(f"+    total += int(part_{candidate}_{n}) * UNITS[unit_{n}]\n"
                            for n in range(int(rng.integers(6, 30))))
            patches.append(f"diff --git a/textkit/durations.py b/textkit/durations.py\n--- a/textkit/durations.py\n"
                           f"+++ b/textkit/durations.py\n@@ -10,3 +10,{len(lines.splitlines()) + 3} @@\n"
                           f" def parse_duration(text):\n     total = 0\n{lines}     return total\n")
        yield issue, patches


def judging_seconds(client, prompt, dataset) -> float:
    from worker.engine.verify.judge import ANSWERS, JudgeInput, judge_messages

    started = time.perf_counter()
    for issue, patches in dataset:
        for patch in patches:
            made = judge_messages(prompt, JudgeInput(issue, patch), mode="patch", budget_chars=20_000)
            client.first_token_logprobs(made.messages, ANSWERS)
    return time.perf_counter() - started


def reading_seconds(client, prompt, dataset) -> tuple[float, int]:
    """Each task's shared prefix read once, then each candidate's own tokens once: (seconds, tokens)."""
    from worker.engine.verify.judge import JudgeInput, judge_messages

    llama, read = client._llama, 0
    started = time.perf_counter()
    for issue, patches in dataset:
        prompts = [client.prompt_tokens(judge_messages(prompt, JudgeInput(issue, patch), mode="patch",
                                                       budget_chars=20_000).messages) for patch in patches]
        shared = 0
        while all(len(p) > shared and p[shared] == prompts[0][shared] for p in prompts):
            shared += 1
        llama._ctx.kv_cache_seq_rm(-1, 0, -1)
        llama.n_tokens = 0
        llama.eval(prompts[0][:shared])
        read += shared
        for tokens in prompts:
            llama._ctx.kv_cache_seq_rm(-1, shared, -1)
            llama.n_tokens = shared
            llama.eval(tokens[shared:])
            read += len(tokens) - shared
    return time.perf_counter() - started, read


def judge_figure() -> None:
    from worker.engine.llm.clients import EmbeddedClient, ModelSettings
    from worker.engine.llm.prompts import prompt_load

    client, prompt = EmbeddedClient(ModelSettings()), prompt_load("judge")
    dataset = list(judged_dataset())
    judging_seconds(client, prompt, dataset[:1])  # the model loaded and warm
    baseline, tokens = min(reading_seconds(client, prompt, dataset) for _ in range(2))
    judged = min(judging_seconds(client, prompt, dataset) for _ in range(2))
    report(f"judging {JUDGED_TASKS} tasks x {JUDGED_CANDIDATES} candidates, embedded model", judged, "s",
           baseline, f"s (reading the {tokens} distinct prompt tokens once)")


def main() -> None:
    tasks = list(pools())
    oracle_exact = exact(tasks)[2]
    assert np.allclose([float(v) for v in oracle_exact], estimator(tasks))
    fixed = best_of(3, exact, tasks)
    report(f"best@k exact, {TASKS} tasks x {CANDIDATES} candidates, 3 selectors, k=1..{CANDIDATES}",
           fixed, "s", best_of(3, estimator, tasks), "s (float pass@k estimator, oracle only)")
    report(f"hybrid best@k exact, {TASKS} tasks x {CANDIDATES} candidates, k=1..{CANDIDATES}",
           best_of(1, hybrid, with_execution(tasks)), "s", fixed, "s (the 3 fixed-score selectors, exact)")
    judge_figure()


if __name__ == "__main__":
    main()
