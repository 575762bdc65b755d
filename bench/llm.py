"""The embedded model's speed, against baselines measured in the same run.

Goals (issue: language models in the Commit Mine): scoring the 26 candidates of one task with
the evaluated prefix reused is at least 3x faster than evaluating each prompt whole; a cached
model call costs under 5 ms. Also printed: prompt and generated tokens per second, and a
completion on one thread against two while every core is busy with other work.
"""

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WORKDIR = Path(tempfile.mkdtemp(prefix="commitgym-bench-llm-"))
os.environ.setdefault("COMMITGYM_VAR_DIR", str(WORKDIR / "var"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "apps.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from apps.llm.calls import model_call  # noqa: E402
from worker.engine.llm.clients import EmbeddedClient, ModelSettings  # noqa: E402
from worker.engine.llm.prompts import prompt_load  # noqa: E402
from _report import report  # noqa: E402

CANDIDATES = 26
ISSUE = ("slugify() leaves a trailing separator when max_length cuts the text right after a word.\n\n"
         "slugify('hello big world', max_length=10) returns 'hello-big-'; I expected 'hello-big'. " * 12)


def judge_messages(n: int) -> list[dict[str, str]]:
    """A judge's question about candidate n: the instructions and issue are shared, the patch is new."""
    patch = (f"--- a/textkit/slug.py\n+++ b/textkit/slug.py\n@@ -{n},2 +{n},2 @@\n"
             f"-        text = text[:max_length]\n+        text = text[:max_length].rstrip(separator)  # v{n}\n"
             + f"+# candidate {n} keeps the other {n * 7 % 13} call sites as they were\n" * 3)
    return [{"role": "system", "content": "You judge whether a patch resolves an issue. Answer YES or NO."},
            {"role": "user", "content": f"Issue:\n{ISSUE}\n\nPatch:\n{patch}\n\nDoes the patch resolve the issue?"}]


def scoring(client: EmbeddedClient, reuse: bool) -> float:
    client.first_token_logprobs([{"role": "user", "content": "warm up"}], ["YES"], reuse_prefix=False)
    started = time.perf_counter()
    for n in range(CANDIDATES):
        client.first_token_logprobs(judge_messages(n), ["YES", "NO"], reuse_prefix=reuse)
    return time.perf_counter() - started


def throughput(client: EmbeddedClient) -> None:
    messages = judge_messages(99)
    tokens = len(client.prompt_tokens(messages))
    started = time.perf_counter()
    client.first_token_logprobs(messages, ["YES"], reuse_prefix=False)
    prompt_seconds = time.perf_counter() - started
    started = time.perf_counter()
    completion = client.complete([{"role": "user", "content": "Write a short story about a cat."}], max_tokens=128)
    generate_seconds = time.perf_counter() - started
    print(f"llm.prompt_tokens_per_second: {tokens / prompt_seconds:.1f} tokens/s ({tokens} tokens)", flush=True)
    print(f"llm.generated_tokens_per_second: {completion.tokens_out / generate_seconds:.1f} tokens/s "
          f"({completion.tokens_out} tokens, prompt included in the time)", flush=True)


def cache_hit() -> None:
    call_command("migrate", verbosity=0)
    prompt = prompt_load("issue_writer")
    variables = {"commit_message": "Fix slugify", "source_patch": "-a\n+b\n", "failing_output": "FAILED"}
    started = time.perf_counter()
    model_call(role="issue_writer", prompt=prompt, variables=variables, max_tokens=32)
    miss = time.perf_counter() - started
    hits = []
    for _ in range(20):
        started = time.perf_counter()
        _, cached = model_call(role="issue_writer", prompt=prompt, variables=variables, max_tokens=32)
        hits.append(time.perf_counter() - started)
        assert cached
    hit = sorted(hits)[len(hits) // 2]
    report("llm.cache_hit", hit * 1000, "ms", miss * 1000)
    print(f"llm.cache_hit.goal: under 5 ms: {'met' if hit < 0.005 else 'NOT met'}", flush=True)


def _spin() -> None:
    while True:
        pass


def threads_on_busy_cores() -> None:
    """A completion with every core busy with other work (test runs beside the model, say): one thread
    against two, by wall time and by the CPU time the model's process spent."""
    import multiprocessing

    messages = [{"role": "user", "content": ISSUE + "\nWrite a failing test for this."}]
    clients = {threads: EmbeddedClient(ModelSettings(context_tokens=4096, threads=threads)) for threads in (1, 2)}
    busy = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 2)]
    for process in busy:
        process.start()
    try:
        spent = {}
        for threads, client in clients.items():
            client.complete([{"role": "user", "content": "warm up"}], max_tokens=4)
            wall, cpu = time.perf_counter(), time.process_time()
            client.complete(messages, max_tokens=96)
            spent[threads] = (time.perf_counter() - wall, time.process_time() - cpu)
    finally:
        for process in busy:
            process.kill()
    report("llm.complete_on_busy_cores.one_thread_wall", spent[1][0], "s", spent[2][0], "s (two threads)")
    report("llm.complete_on_busy_cores.one_thread_cpu", spent[1][1], "s", spent[2][1], "s (two threads)")


def main() -> None:
    try:
        client = EmbeddedClient(ModelSettings(context_tokens=4096))
        throughput(client)
        whole, reused = scoring(client, reuse=False), scoring(client, reuse=True)
        report(f"llm.score_{CANDIDATES}_candidates_prefix_reused", reused, "s", whole)
        print(f"llm.score_{CANDIDATES}_candidates.speedup: {whole / reused:.2f}x (goal: at least 3x: "
              f"{'met' if whole / reused >= 3 else 'NOT met'})", flush=True)
        cache_hit()
        threads_on_busy_cores()
    finally:
        shutil.rmtree(WORKDIR, ignore_errors=True)


if __name__ == "__main__":
    main()
