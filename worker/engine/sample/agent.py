"""The built-in sampler's agent loop: a model fixes an issue in a working copy, one action a step, and
its patch is what it changed there.

The model sees the issue and the repository at the base commit (the caller's working copy), never
hidden tests or a gold patch. Each answer is a thought, then one action on a line `ACTION: <tool>
<argument>`, the text a tool writes following in ``` fenced blocks (the prompt shows each tool once);
an answer with no action understood gets an observation saying what is expected, and counts as a
step. File tools run here (tools.py: no link followed, everything capped); commands go through the
caller's `run_command`, which runs them in the sandbox. The loop ends at `submit` or when a budget
runs out: steps, tokens (in and out: a step is not started when the tokens used, its prompt as large
as the last one and its whole `max_tokens` would pass the budget), wall time, or a model error.

The patch comes from comparing the working copy with a copy made before the first step, file by
file, links never followed and git never run in a folder the agent shaped (a planted .git/config
runs code). Caches are ignored; links, binary files and mode changes are left out, each said.
"""

import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from worker.engine.git.working_copy import paths_changed, tree_state, working_copy_clone
from worker.engine.grade.source_edits import file_diff
from worker.engine.llm.clients import Completion, ModelClient, ModelError
from worker.engine.llm.prompts import Prompt, clip_head
from worker.engine.sample import tools
from worker.engine.sandbox.base import Limits, sandbox_file_read

STOP_REASONS = ("submitted", "steps", "tokens", "wall_time", "model_error")
TEMPERATURE = 0.8
ISSUE_CHARS = 6_000
FILES_SHOWN = 100  # top-level entries in the prompt
PATCH_FILE_BYTES = 1 << 20  # a changed file larger than this is left out of the patch
TOOLS = ("list_files", "read_file", "search", "search_regex", "replace", "write_file", "run", "submit")
# Names a small model reaches for, taken for the tool they mean.
ALIASES = {"ls": "list_files", "list": "list_files", "read": "read_file", "cat": "read_file", "open": "read_file",
           "grep": "search", "find": "search", "edit": "replace", "write": "write_file", "create": "write_file",
           "bash": "run", "shell": "run", "execute": "run", "finish": "submit", "done": "submit"}
BLOCKS = {"replace": 2, "write_file": 1}
_ACTION = re.compile(r"^[ \t>*`#_-]*action[ \t*_`]*:[ \t*`]*(?P<tool>[A-Za-z_]+)(?P<argument>[^\n]*)", re.I | re.M)
_BARE_TOOL = re.compile(rf"^[ \t>*`]*(?P<tool>{'|'.join(TOOLS)})\b(?P<argument>[^\n]*)", re.M)
_FENCE = re.compile(r"^[ \t]*```[^\n`]*\n(?P<body>.*?)^[ \t]*```[ \t]*$", re.M | re.S)
_THOUGHT = re.compile(r"^\W*thought\W*:\s*", re.I)
# str.splitlines, which file_diff uses, breaks lines at these too: a diff of such a text would not apply.
_ODD_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_CACHE_PARTS = frozenset({"__pycache__", ".pytest_cache", ".git"})
_CLOSING_TAG = re.compile(r"</\s*issue\s*>", re.I)  # would end the prompt's <issue> part early
EXPECTED = ("No action understood. End your answer with one action on a line of its own, for example:\n"
            "ACTION: read_file path/to/file.py\nThe tools: " + ", ".join(TOOLS) + ".")

Complete = Callable[[list[dict], int, int], Completion]  # (messages, max_tokens, seed)


@dataclass(frozen=True)
class AgentBudget:
    steps: int = 30
    tokens: int = 60_000  # in and out, over the whole run
    wall_seconds: float = 600
    max_tokens_per_step: int = 512
    command_seconds: float = 60
    observation_chars: int = 4000
    history_chars: int = 16_000  # of earlier steps sent to the model again; the oldest go first


@dataclass
class AgentResult:
    patch: str
    steps: list[dict]  # the trajectory schema's: {"step", "thought", "action", "observation"}, all text
    stop_reason: str  # one of STOP_REASONS
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    left_out: list[str] = field(default_factory=list)  # "path: why" for each change the patch does not hold
    error: str = ""  # the model's error, when it stopped the run


@dataclass(frozen=True)
class Action:
    tool: str  # "" when no action was understood; may be a name that is no tool
    argument: str = ""
    blocks: tuple[str, ...] = ()
    thought: str = ""
    written: str = ""  # the action as the model wrote it: its line and its blocks
    text: str = ""  # the answer up to the end of the action: what the conversation keeps
    more_after: bool = False  # the answer went on past the action (a second action, an imagined result)


def client_complete(client: ModelClient, *, temperature: float = TEMPERATURE) -> Complete:
    """`complete` for `agent_run` from a model client, sampling at `temperature`."""
    def complete(messages: list[dict], max_tokens: int, seed: int) -> Completion:
        return client.complete(messages, max_tokens=max_tokens, temperature=temperature, seed=seed)
    return complete


def command_limits(budget: AgentBudget, limits: Limits = Limits()) -> Limits:
    """The limits of one command: the budget's seconds, and no more output than a step could show."""
    seconds = budget.command_seconds
    return Limits(**{**limits.__dict__, "wall_seconds": seconds, "cpu_seconds": max(1, int(seconds) + 1),
                     "output_bytes": min(limits.output_bytes, 4 * budget.observation_chars)})


def action_parse(answer: str) -> Action:
    """The first action of an answer: a line `ACTION: tool argument` (or, failing that, a line that
    starts with a tool's name), and the fenced blocks after it that the tool takes."""
    found = _ACTION.search(answer) or _BARE_TOOL.search(answer)
    if found is None:
        return Action("", thought=_thought(answer), text=answer.strip())
    tool = found["tool"].lower()
    tool = ALIASES.get(tool, tool)
    argument = found["argument"].strip()
    if argument.endswith("`") and argument.count("`") % 2:
        argument = argument[:-1].rstrip()  # the model put the whole line in backticks
    if tool != "run" and argument.startswith("(") and argument.endswith(")"):
        argument = argument[1:-1].strip()  # written as a call: read_file("a.py")
    end, blocks = found.end(), []
    wanted = BLOCKS.get(tool, 1 if tool == "run" and not argument else 0)
    for fence in _FENCE.finditer(answer, found.end()):
        if len(blocks) == wanted:
            break
        blocks.append(fence["body"][:-1] if fence["body"].endswith("\n") else fence["body"])
        end = fence.end()
    return Action(tool, argument, tuple(blocks), _thought(answer[:found.start()]),
                  answer[found.start():end].strip(), answer[:end].strip(), more_after=bool(answer[end:].strip()))


def _thought(text: str) -> str:
    return _THOUGHT.sub("", text.strip(), count=1).strip()


def agent_run(*, complete: Complete, issue: str, repo: Path, run_command: tools.CommandRunner,
              budget: AgentBudget = AgentBudget(), seed: int, prompt: Prompt,
              clock: Callable[[], float] = time.monotonic, scratch: Optional[Path] = None) -> AgentResult:
    """Let the model work on `repo` (a working copy at the base commit) until it submits or a budget
    runs out; the patch is what it changed. `scratch`: where the copy to compare with is kept meanwhile.
    An error of `run_command` (no sandbox here, say) is raised: it is no answer of the model's."""
    started = clock()
    repo = Path(repo)
    if repo.is_symlink() or not repo.is_dir():
        raise ValueError(f"{repo} is not a folder")
    kept = Path(tempfile.mkdtemp(prefix="agent-pristine-", dir=scratch))
    try:
        pristine = working_copy_clone(repo, kept / "repo")
        run = _Run(complete, repo, run_command, budget, seed, clock, started)
        run.opening = prompt.messages(issue=_CLOSING_TAG.sub("< /issue>", clip_head(issue, ISSUE_CHARS)),
                                      steps=str(budget.steps),
                                      files=tools.files_list(repo, limit=FILES_SHOWN, depth=1))
        result = run.loop()
        result.patch, result.left_out = working_copy_patch(pristine, repo)
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    result.seconds = clock() - started
    return result


class _Run:
    def __init__(self, complete: Complete, repo: Path, run_command: tools.CommandRunner, budget: AgentBudget,
                 seed: int, clock: Callable[[], float], started: float):
        self.complete, self.repo, self.run_command, self.budget = complete, repo, run_command, budget
        self.seed, self.clock, self.started = seed, clock, started
        self.opening: list[dict] = []
        self.turns: list[tuple[str, str]] = []  # (the answer as kept, the observation as shown) per step
        self.result = AgentResult(patch="", steps=[], stop_reason="")
        self.last_prompt_tokens = 0

    def loop(self) -> AgentResult:
        self.result.stop_reason = self._steps()
        return self.result

    def _steps(self) -> str:
        budget, result = self.budget, self.result
        for number in range(1, budget.steps + 1):
            if self.clock() - self.started >= budget.wall_seconds:
                return "wall_time"
            used = result.tokens_in + result.tokens_out
            if used + self.last_prompt_tokens + budget.max_tokens_per_step > budget.tokens:
                return "tokens"
            messages = self.messages()
            try:
                completion = self.complete(messages, budget.max_tokens_per_step, self.seed)
            except ModelError as error:
                result.error = f"{error.code}: {error}"
                return "model_error"
            self.last_prompt_tokens = completion.tokens_in or _tokens_guess(messages)
            result.tokens_in += self.last_prompt_tokens
            result.tokens_out += completion.tokens_out or len(completion.text) // 4
            action = action_parse(completion.text)
            observation = _clip(self.observe(action), budget.observation_chars)
            result.steps.append({"step": number, "thought": action.thought,
                                 "action": action.written, "observation": observation})
            self.turns.append((clip_head(action.text, 4 * budget.max_tokens_per_step),
                               f"OBSERVATION:\n{observation}\n\n[{budget.steps - number} steps left]"))
            if action.tool == "submit":
                return "submitted"
        return "steps"

    def messages(self) -> list[dict]:
        """The prompt, then the newest steps that fit the history budget (the newest always)."""
        kept, size = [], 0
        for answer, observation in reversed(self.turns):
            size += len(answer) + len(observation)
            if kept and size > self.budget.history_chars:
                break
            kept.append((answer, observation))
        messages = list(self.opening)
        if len(kept) < len(self.turns):
            messages.append({"role": "user", "content": f"[{len(self.turns) - len(kept)} earlier steps are left "
                                                        "out here; what they changed in the files stays]"})
        for answer, observation in reversed(kept):
            messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": observation}]
        return messages

    def observe(self, action: Action) -> str:
        if not action.tool:
            return EXPECTED
        if action.tool not in TOOLS:
            return f"Unknown tool {action.tool!r}. The tools: {', '.join(TOOLS)}. Write: ACTION: <tool> <argument>"
        try:
            observation = self._tool(action)
        except tools.Refused as refused:
            observation = f"Not done: {refused}"
        except OSError as error:
            observation = f"Not done: {action.tool} failed ({error.strerror or error})"
        if action.more_after and action.tool != "submit":
            observation += "\n[one action a step: the rest of your answer was not done]"
        return observation

    def _tool(self, action: Action) -> str:
        tool, argument, blocks, repo = action.tool, action.argument, action.blocks, self.repo
        if tool == "submit":
            return "Submitted."
        if tool == "run":
            command = argument or (blocks[0] if blocks else "")
            if not command.strip():
                raise tools.Refused("give the command: ACTION: run python -m pytest -q")
            exit_code, output = self.run_command(command)
            status = f"exit code {exit_code}" if exit_code is not None else "stopped before it ended (no exit code)"
            return f"{status}\n{output}"
        if tool in ("search", "search_regex"):
            return tools.text_search(repo, _unquoted(argument), regex=tool == "search_regex")
        if tool == "list_files":
            return tools.files_list(repo, _unquoted(argument))
        if tool == "read_file":
            path, lines = _path_and_lines(argument)
            return tools.file_read(repo, path, *lines, chars=self.budget.observation_chars - 200)
        path = _unquoted(argument)
        if len(blocks) < BLOCKS[tool]:
            raise tools.Refused(f"{tool} takes {BLOCKS[tool]} fenced block(s) after its line, each opened and "
                                "closed by a line of ``` (see the example)")
        if tool == "replace":
            return tools.text_replace(repo, path, blocks[0], blocks[1])
        return tools.file_write(repo, path, blocks[0] + "\n" if blocks[0] else "")


def _unquoted(text: str) -> str:
    text = text.strip()
    return text[1:-1] if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"`" else text


def _path_and_lines(argument: str) -> tuple[str, tuple[int, ...]]:
    """`path [first [last]]`; a path with spaces in it when what follows is no number."""
    words = argument.split()
    numbers = []
    while len(words) > 1 and len(numbers) < 2 and words[-1].isdigit():
        numbers.insert(0, int(words.pop()))
    if not words:
        raise tools.Refused("give the path of the file: ACTION: read_file path/to/file.py")
    return _unquoted(" ".join(words)), tuple(numbers)


def _clip(text: str, limit: int) -> str:
    """The text, or its head and tail around a mark: a command's errors tend to be at the end."""
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def _tokens_guess(messages: list[dict]) -> int:
    """For a server that reports no usage: about four characters a token."""
    return sum(len(message["content"]) for message in messages) // 4


# --- the patch ------------------------------------------------------------------------------------


def working_copy_patch(pristine: Path, repo: Path) -> tuple[str, list[str]]:
    """The patch from `pristine` to `repo` (git's format, new and deleted files included), and
    "path: why" for each change left out of it."""
    before, after = tree_state(pristine), tree_state(repo)
    diffs, left_out = [], []
    for path in sorted(paths_changed(before, after)):
        if _CACHE_PARTS.intersection(path.split("/")) or path.endswith((".pyc", ".pyo")):
            continue
        try:
            diffs.append(_path_diff(path, before.get(path), after.get(path), pristine, repo))
        except tools.Refused as refused:
            left_out.append(f"{path}: {refused}")
    return "".join(diffs), left_out


def _path_diff(path: str, old: Optional[tuple], new: Optional[tuple], pristine: Path, repo: Path) -> str:
    kinds = {entry[0] for entry in (old, new) if entry}
    if "link" in kinds:
        raise tools.Refused("a symbolic link: links are left out of the patch")
    if "other" in kinds:
        raise tools.Refused("not a plain file")
    if not path.isprintable() or any(mark in path for mark in "\"\\"):
        raise tools.Refused("a name a patch cannot carry")
    old_text = _patch_text(pristine, path) if old and old[0] == "file" else None
    new_text = _patch_text(repo, path) if new and new[0] == "file" else None
    if old_text == new_text:
        raise tools.Refused("only its mode changed: modes are left out of the patch")
    if new_text is None:
        header, body = file_diff(path, old_text, "").split("\n", 1)
        return f"{header}\ndeleted file mode 100644\n" + body.replace(f"+++ b/{path}\n", "+++ /dev/null\n", 1)
    return file_diff(path, old_text, new_text)


def _patch_text(root: Path, path: str) -> str:
    data = sandbox_file_read(root, path, max_bytes=PATCH_FILE_BYTES + 1)
    if len(data) > PATCH_FILE_BYTES:
        raise tools.Refused(f"larger than {PATCH_FILE_BYTES >> 20} MB")
    if b"\0" in data:
        raise tools.Refused("a binary file: binary files are left out of the patch")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise tools.Refused("not UTF-8 text: binary files are left out of the patch") from None
    if _ODD_BREAKS.search(text.replace("\r\n", "")):
        raise tools.Refused("it holds line breaks other than \\n and \\r\\n, which its diff here would not carry")
    return text
