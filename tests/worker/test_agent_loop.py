"""The built-in sampler's agent loop (worker/engine/sample): scripted answers drive its tools, each
budget stops it, a hostile repository leads it nowhere, commands run in the real local sandbox, and
the embedded model runs it for real."""

import os
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.worker.test_validate import UV
from worker.demo.sample_repo import sample_repo_write
from worker.engine.env.builder import EnvironmentBuilder
from worker.engine.git.working_copy import working_copy_write
from worker.engine.llm.clients import Completion, ModelError, ModelSettings, model_client
from worker.engine.llm.prompts import prompt_load
from worker.engine.sample import tools
from worker.engine.sample.agent import (
    EXPECTED,
    STOP_REASONS,
    AgentBudget,
    action_parse,
    agent_run,
    client_complete,
    command_limits,
)
from worker.engine.sample.tools import sandbox_command_runner

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = CALC.replace("a - b", "a + b")
UTIL = "def double(x):\n    return x * 2\n"
ISSUE = "add(2, 3) returns -1: it should return 5."
PROMPT = prompt_load("agent")


class Script:
    """A model that gives the answers it was handed, in order (an exception is raised), then submits."""

    def __init__(self, *answers, tokens_in=100, tokens_out=20):
        self.answers, self.calls = list(answers), []
        self.tokens_in, self.tokens_out = tokens_in, tokens_out

    def __call__(self, messages, max_tokens, seed):
        self.calls.append({"messages": messages, "max_tokens": max_tokens, "seed": seed})
        answer = self.answers.pop(0) if self.answers else "ACTION: submit"
        if isinstance(answer, Exception):
            raise answer
        return Completion(answer, self.tokens_in, self.tokens_out, "stop", "script")


def refusing_runner(command):
    raise AssertionError(f"no command was expected: {command}")


@pytest.fixture
def origin(tmp_path) -> GitRepo:
    repo = GitRepo(tmp_path / "origin")
    test = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    repo.commit("init", {"calc.py": CALC, "README.md": "# calc\n", "pkg/__init__.py": "", "pkg/util.py": UTIL,
                         "tests/test_calc.py": test})
    return repo


@pytest.fixture
def working(origin, tmp_path) -> Path:
    """The agent's working copy of the origin's head: its files, no .git."""
    return working_copy_write(origin.path, origin.git("rev-parse", "HEAD"), tmp_path / "work")


def run(working, script, *, run_command=refusing_runner, budget=AgentBudget(), seed=7, **options):
    return agent_run(complete=script, issue=ISSUE, repo=working, run_command=run_command, budget=budget,
                     seed=seed, prompt=PROMPT, **options)


def applied(origin: GitRepo, patch: str, place: Path) -> Path:
    """A fresh clone of the origin with the patch applied by git."""
    fresh = place / f"fresh-{time.monotonic_ns()}"
    subprocess.run(["git", "clone", "-q", str(origin.path), str(fresh)], check=True, capture_output=True)
    (place / "agent.patch").write_text(patch)
    done = subprocess.run(["git", "apply", str(place / "agent.patch")], cwd=fresh, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr + patch
    return fresh


def observations(result) -> list[str]:
    return [step["observation"] for step in result.steps]


# --- the tools, driven by scripted answers ----------------------------------------------------------


def test_scripted_answers_drive_every_tool_and_the_patch_applies(origin, working, tmp_path):
    ran = []

    def command(line):  # stands for the sandbox: what a command leaves in the working copy
        ran.append(line)
        (working / "README.md").unlink()
        (working / "__pycache__").mkdir()
        (working / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"\0\0compiled")
        (working / ".pytest_cache" / "v").mkdir(parents=True)
        (working / ".pytest_cache" / "v" / "lastfailed").write_text("{}")
        (working / "logo.bin").write_bytes(b"\x89PNG\0\0\0")
        os.symlink("calc.py", working / "calc_link.py")
        return 1, "1 failed, 0 passed"

    script = Script(
        "THOUGHT: Let me look around.\nACTION: list_files",
        "ACTION: read_file calc.py",
        "THOUGHT: where is the subtraction?\nACTION: search return a -",
        "ACTION: search_regex def \\w+\\(x\\)",
        "THOUGHT: add subtracts.\nACTION: replace calc.py\n```python\n    return a - b\n```\n"
        "```\n    return a + b\n```",
        "ACTION: write_file pkg/triple.py\n```python\ndef triple(x):\n    return x * 3\n```",
        "ACTION: write_file pkg/util.py\n```\ndef double(x):\n    return x + x\n```",
        "ACTION: run python -m pytest -q tests",
        "THOUGHT: done.\nACTION: submit",
    )
    result = run(working, script, run_command=command, seed=11)

    assert result.stop_reason == "submitted" and ran == ["python -m pytest -q tests"]
    assert [step["step"] for step in result.steps] == list(range(1, 10))
    assert all(isinstance(step[name], str) for step in result.steps for name in ("thought", "action", "observation"))
    assert result.steps[0]["thought"] == "Let me look around." and result.steps[0]["action"] == "ACTION: list_files"
    assert result.steps[4]["action"].startswith("ACTION: replace calc.py\n```python")
    listing, read, search, regex, replaced, new, whole, command_run, submitted = observations(result)
    assert {"calc.py", "pkg/", "pkg/util.py", "tests/test_calc.py"} <= set(listing.splitlines())
    assert read.startswith("calc.py: lines 1-6 of 6\ndef add(a, b):\n    return a - b")
    assert search == "calc.py:2: return a - b"
    assert regex == "pkg/util.py:1: def double(x):"
    assert replaced == "calc.py: replaced 1 lines by 1"
    assert new == "pkg/triple.py: written, a new file of 2 lines" and whole == "pkg/util.py: written, 2 lines"
    assert command_run == "exit code 1\n1 failed, 0 passed" and submitted == "Submitted."

    # The model got the seed and the step's token cap; the prompt holds the issue and the top-level files.
    assert {(call["max_tokens"], call["seed"]) for call in script.calls} == {(512, 11)}
    first = script.calls[0]["messages"]
    assert [message["role"] for message in first] == ["system", "user"]
    assert ISSUE in first[1]["content"] and "calc.py\n" in first[1]["content"]
    assert "pkg/util.py" not in first[1]["content"]  # the top level only
    assert script.calls[1]["messages"][2:] == [
        {"role": "assistant", "content": "THOUGHT: Let me look around.\nACTION: list_files"},
        {"role": "user", "content": f"OBSERVATION:\n{listing}\n\n[29 steps left]"}]
    assert (result.tokens_in, result.tokens_out) == (900, 180)

    # Caches are ignored; the link and the binary file are left out, and said.
    assert result.left_out == ["calc_link.py: a symbolic link: links are left out of the patch",
                               "logo.bin: a binary file: binary files are left out of the patch"]
    assert "__pycache__" not in result.patch and ".pytest_cache" not in result.patch
    fresh = applied(origin, result.patch, tmp_path)
    assert (fresh / "calc.py").read_text() == FIXED
    assert (fresh / "pkg" / "triple.py").read_text() == "def triple(x):\n    return x * 3\n"
    assert (fresh / "pkg" / "util.py").read_text() == "def double(x):\n    return x + x\n"
    assert not (fresh / "README.md").exists()
    assert subprocess.run(["git", "status", "--porcelain"], cwd=fresh, capture_output=True, text=True).stdout \
        .split("\n")[:-1] == [" D README.md", " M calc.py", " M pkg/util.py", "?? pkg/triple.py"]


def test_edits_that_cannot_be_done_say_why_and_change_nothing(working):
    result = run(working, Script(
        "ACTION: replace calc.py\n```\n    return b - a\n```\n```\n    return a + b\n```",
        "ACTION: replace calc.py\n```\ndef add(a, b):\n\treturn a - b\n```\n```\nreturn a+b\n```",
        "ACTION: replace calc.py\n```\n    return a\n```\n```\n    return 0\n```",
        "ACTION: replace calc.py\n```\n    return a - b\n```",
        "ACTION: write_file pkg\n```\nx = 1\n```",
        "ACTION: read_file pkg",
        "ACTION: read_file calc.py 5",
    ))
    missing, spaces, twice, one_block, folder, read_folder, part = observations(result)[:7]
    assert missing.startswith("Not done: calc.py: the text of the first block is not in the file;")
    assert "other indentation or spaces" in spaces
    assert "is there 2 times" in twice
    assert one_block.startswith("Not done: replace takes 2 fenced block(s)")
    assert folder.startswith("Not done: pkg: not a plain file") and read_folder.startswith("Not done: pkg: no such")
    assert part == "calc.py: lines 5-6 of 6\ndef mul(a, b):\n    return a * b"
    assert (working / "calc.py").read_text() == CALC and result.patch == "" and result.left_out == []


def test_actions_are_read_tolerantly():
    assert action_parse("**ACTION:** `read_file calc.py`").argument == "calc.py"
    assert action_parse("Action: cat calc.py").tool == "read_file"
    called = action_parse("Thought: look\nACTION: read_file(calc.py)")
    assert (called.tool, called.argument, called.thought) == ("read_file", "calc.py", "look")
    bare = action_parse("I will search.\nsearch def add\nmore text")
    assert (bare.tool, bare.argument, bare.more_after) == ("search", "def add", True)
    command = action_parse("ACTION: run\n```bash\npython -m pytest -q\n```\nOBSERVATION: all passed")
    assert (command.blocks, command.written, command.more_after) == (
        ("python -m pytest -q",), "ACTION: run\n```bash\npython -m pytest -q\n```", True)
    assert action_parse("I do not know what to do.").tool == ""


def test_the_conversation_keeps_the_newest_steps_that_fit(working):
    script = Script(*["ACTION: read_file calc.py"] * 6)
    run(working, script, budget=AgentBudget(steps=6, history_chars=250))
    last = script.calls[-1]["messages"]
    assert last[:2] == script.calls[0]["messages"]  # the system message and the issue always
    assert last[2] == {"role": "user", "content": "[4 earlier steps are left out here; what they changed in the "
                                                  "files stays]"}
    assert [message["role"] for message in last[3:]] == ["assistant", "user"]
    assert sum(len(message["content"]) for message in last[3:]) <= 250


# --- budgets -----------------------------------------------------------------------------------------


def test_the_step_budget_stops_the_loop(working):
    result = run(working, Script(*["ACTION: list_files"] * 10), budget=AgentBudget(steps=3))
    assert (result.stop_reason, len(result.steps)) == ("steps", 3)


def test_the_token_budget_stops_before_a_step_that_could_pass_it(working):
    # 150 tokens a step; a step starts only while used + the last prompt (100) + max_tokens (100) <= 400.
    result = run(working, Script(*["ACTION: list_files"] * 10, tokens_in=100, tokens_out=50),
                 budget=AgentBudget(tokens=400, max_tokens_per_step=100))
    assert (result.stop_reason, len(result.steps), result.tokens_in + result.tokens_out) == ("tokens", 2, 300)


def test_the_wall_time_budget_stops_the_loop(working):
    now = [0.0]

    def clock():  # ten seconds go by every time the loop looks
        now[0] += 10
        return now[0]

    result = run(working, Script(*["ACTION: list_files"] * 10), budget=AgentBudget(wall_seconds=25), clock=clock)
    assert (result.stop_reason, len(result.steps)) == ("wall_time", 2)


def test_a_model_error_stops_the_loop_and_keeps_what_was_done(origin, working, tmp_path):
    result = run(working, Script("ACTION: replace calc.py\n```\na - b\n```\n```\na + b\n```",
                                 "ACTION: list_files", ModelError("timeout", "no answer within 120 s")))
    assert (result.stop_reason, len(result.steps), result.error) == ("model_error", 2,
                                                                     "timeout: no answer within 120 s")
    assert (applied(origin, result.patch, tmp_path) / "calc.py").read_text() == FIXED


# --- a hostile repository ----------------------------------------------------------------------------


def test_a_hostile_repository_leads_the_tools_nowhere(working, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET\n")
    os.symlink(outside / "secret.txt", working / "secret_link.txt")
    os.symlink(outside, working / "outside_dir")
    (working / ".git").mkdir()
    (working / ".git" / "config").write_text("[core]\n\tfsmonitor = touch /tmp/pwned\n")
    (working / "huge.txt").write_text("".join(f"line {n}\n" for n in range(400_000)))  # 4.5 MB
    budget = AgentBudget(observation_chars=2000)
    result = run(working, Script(
        "ACTION: read_file secret_link.txt",
        "ACTION: replace secret_link.txt\n```\nSECRET\n```\n```\nCHANGED\n```",
        "ACTION: write_file secret_link.txt\n```\nCHANGED\n```",
        "ACTION: read_file outside_dir/secret.txt",
        "ACTION: write_file outside_dir/planted.txt\n```\nplanted\n```",
        "ACTION: list_files outside_dir",
        "ACTION: read_file ../outside/secret.txt",
        "ACTION: write_file ../planted.txt\n```\nplanted\n```",
        "ACTION: read_file /etc/hostname",
        "ACTION: read_file .git/config",
        "ACTION: write_file .git/hooks/post-checkout\n```\ntouch /tmp/pwned\n```",
        "ACTION: search SECRET",
        "ACTION: search_regex (a+)+b",
        "ACTION: read_file huge.txt",
        "I think the bug is in calc.py, it should add.",
        "ACTION: teleport calc.py",
    ), budget=budget)
    seen = observations(result)
    refused = seen[:11]
    assert all(text.startswith("Not done: ") for text in refused), refused
    assert "links are not followed" in refused[0] and "links are not followed" in refused[1]
    assert "a link, a folder or something else" in refused[2]
    assert "climb out" in refused[6] and "climb out" in refused[7] and "no leading /" in refused[8]
    assert ".git is off limits" in refused[9] and ".git is off limits" in refused[10]
    assert "SECRET" not in "".join(seen)
    assert seen[11] == "no match\n[1 binary files or files over 256 KB were not searched]"  # huge.txt
    assert seen[12] == "Not done: a repetition inside a repetition is not searched: search a plainer text"
    huge = seen[13]
    assert huge.startswith("huge.txt: lines 1-") and "goes on past 1 MB" in huge and "read_file huge.txt" in huge
    assert len(huge) <= budget.observation_chars
    assert seen[14] == EXPECTED and result.steps[14]["action"] == ""
    assert seen[15].startswith("Unknown tool 'teleport'.")
    # Nothing outside moved, nothing was planted, and the patch is empty.
    assert (outside / "secret.txt").read_text() == "SECRET\n" and sorted(os.listdir(outside)) == ["secret.txt"]
    assert not (tmp_path / "planted.txt").exists() and not (working / ".git" / "hooks").exists()
    assert (result.stop_reason, result.patch, result.left_out) == ("submitted", "", [])


# --- commands in the real local sandbox --------------------------------------------------------------


@pytest.fixture(scope="module")
def sample(open_module_folder):
    """The sample repository and an environment of its last commit, built once for the module."""
    repo = open_module_folder / "sample"
    commits = sample_repo_write(repo)
    builder = EnvironmentBuilder(env_root=open_module_folder / "envs", uv=UV)
    build = working_copy_write(repo, commits[-1].sha, open_module_folder / "build").parent
    environment = builder.build(build, as_of=datetime(2026, 6, 1, tzinfo=timezone.utc))
    return repo, commits[-1].sha, builder, environment


@pytest.fixture
def sample_copy(sample, open_folder) -> Path:
    repo, sha, _, _ = sample
    return working_copy_write(repo, sha, open_folder / "agent")


def runner(sample, copy, budget=AgentBudget(command_seconds=20)):
    _, _, builder, environment = sample
    return sandbox_command_runner(builder, environment, copy, command_limits(budget))


def test_a_commands_output_comes_back_from_the_sandbox(sample, sample_copy):
    command = runner(sample, sample_copy)
    code, output = command("python -c 'import textkit, sys; print(textkit.__file__, sys.prefix)'; echo ok > new.txt")
    assert (code, output) == (0, "/workspace/repo/textkit/__init__.py /workspace/env\n")
    assert (sample_copy / "new.txt").read_text() == "ok\n"
    assert command("exit 3") == (3, "")


def test_a_command_cannot_write_outside_its_working_copy(sample, sample_copy, open_folder):
    outside = open_folder / "outside"
    outside.mkdir()
    result = agent_run(complete=Script(
        f"ACTION: run echo pwned > {outside}/planted; echo pwned > /workspace/planted; echo pwned > ../planted; "
        "ln -s /etc/passwd leak.txt", "ACTION: read_file leak.txt"),
        issue=ISSUE, repo=sample_copy, run_command=runner(sample, sample_copy), seed=1, prompt=PROMPT)
    ran, read = observations(result)[:2]
    assert "Read-only file system" in ran
    assert os.listdir(outside) == [] and sorted(os.listdir(sample_copy.parent)) == ["repo"]
    # The link it made is neither followed by the tools nor put in the patch.
    assert read.startswith("Not done: leak.txt: no such plain file") and "root:" not in read
    assert (result.patch, result.left_out) == ("", ["leak.txt: a symbolic link: links are left out of the patch"])


def test_a_command_past_its_seconds_is_stopped(sample, sample_copy):
    started = time.monotonic()
    code, output = runner(sample, sample_copy, AgentBudget(command_seconds=2))("echo begun; sleep 30")
    assert code is None and output.startswith("begun\n") and "stopped it: timeout" in output
    assert time.monotonic() - started < 15


def test_the_loop_runs_commands_in_the_sandbox_and_their_edits_reach_the_patch(sample, sample_copy, open_folder):
    repo, sha, _, _ = sample
    command = runner(sample, sample_copy)  # made first: the files the install generated are not the agent's
    result = agent_run(complete=Script(
        "ACTION: run sed -i 's/^import re$/import re  # slugs/' textkit/slug.py && "
        "python -m pytest -q tests/test_slug.py",
        "ACTION: submit"), issue=ISSUE, repo=sample_copy, run_command=command, seed=1, prompt=PROMPT)
    assert result.steps[0]["observation"].startswith("exit code 0\n") and " passed" in result.steps[0]["observation"]
    assert result.patch.startswith("diff --git a/textkit/slug.py b/textkit/slug.py\n") and result.left_out == []
    fresh = working_copy_write(repo, sha, open_folder / "fresh")
    (open_folder / "agent.patch").write_text(result.patch)
    done = subprocess.run(["git", "apply", str(open_folder / "agent.patch")], cwd=fresh, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert (fresh / "textkit" / "slug.py").read_text() == (sample_copy / "textkit" / "slug.py").read_text()


# --- the embedded model --------------------------------------------------------------------------------


def test_the_embedded_model_runs_the_loop_to_an_end(sample, sample_copy):
    client = model_client(ModelSettings(backend="embedded", context_tokens=4096, threads=1))  # beside other tests
    budget = AgentBudget(steps=5, max_tokens_per_step=64, history_chars=3000, observation_chars=1000,
                         command_seconds=10, wall_seconds=300)
    result = agent_run(complete=client_complete(client), issue="slugify('Hello World', max_length=6) returns "
                       "'hello-' with a trailing separator; it should return 'hello'.", repo=sample_copy,
                       run_command=runner(sample, sample_copy, budget), budget=budget, seed=3, prompt=PROMPT)
    assert result.stop_reason in STOP_REASONS and isinstance(result.patch, str)
    assert 1 <= len(result.steps) <= 5 and result.tokens_in > 0
    assert all(isinstance(step["observation"], str) and step["observation"] for step in result.steps)
    assert result.stop_reason != "model_error", result.error


def test_a_regex_that_could_take_forever_is_refused_and_a_plain_one_searches(working):
    with pytest.raises(tools.Refused):
        tools.regex_compile("(a|aa)*c")
    with pytest.raises(tools.Refused):
        tools.regex_compile(r"(x)\1")
    with pytest.raises(tools.Refused):
        tools.regex_compile(".*.*.*.*")
    assert tools.text_search(working, r"def (add|mul)\(", regex=True) == "calc.py:1: def add(a, b):\n" \
                                                                          "calc.py:5: def mul(a, b):"


def test_a_search_stops_at_its_time_limit_within_a_file_not_only_between_files(tmp_path):
    (tmp_path / "one.py").write_text("x\n" * 100)
    ticks = iter(range(10_000))  # each look at the clock is a second later
    said = tools.text_search(tmp_path, "absent", clock=lambda: next(ticks))
    # The deadline is SEARCH_SECONDS after the start: the one file's lines stop being read there.
    assert said == f"no match\n[... the search stopped after {tools.SEARCH_SECONDS:.0f} s]"
    assert next(ticks) < 20
