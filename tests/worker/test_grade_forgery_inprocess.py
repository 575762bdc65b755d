"""Candidates that forge their grade from inside the test process, graded for real on the sample
repository (textkit) in both sandboxes: none of them fixes the bug, none resolves, each is
`untrusted` and says why; the gold patch still resolves and the empty one does not.

Each attack is one a candidate's code can make at import, as the tests import the package; those
marked "next" are what someone who has read the plugin would try against it."""

import base64
import hashlib
import os
import subprocess
import zlib
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.worker.test_validate import UV
from worker.demo.sample_repo import sample_repo_write
from worker.engine.env.builder import EnvironmentBuilder
from worker.engine.env.recipes import ENV, WORKSPACE
from worker.engine.git.patches import commit_patches
from worker.engine.git.working_copy import patch_apply, working_copy_write
from worker.engine.grade.candidate import TaskToGrade, candidate_grade
from worker.engine.sandbox.base import Limits, hand_over
from worker.engine.test_files import TestFileRules
from worker.engine.grade.fresh_copy import fresh_copy_run
from worker.engine.validate.pipeline import CommitToValidate, ValidationSettings, task_validate

# A unittest-style task on top of the sample's history: count_words() counts runs of spaces as words.
WORDS = '"""Word counts."""\n\n\ndef count_words(text):\n    """How many words `text` holds."""\n' \
        '    return len(text.split(" "))\n'
WORDS_TESTS = ("import unittest\n\nfrom textkit.words import count_words\n\n\n"
               "class CountWordsTest(unittest.TestCase):\n    def test_single_spaces(self):\n"
               "        self.assertEqual(count_words(\"a b c\"), 3)\n")
WORDS_FIX_TESTS = WORDS_TESTS + "\n    def test_runs_of_spaces(self):\n        self.assertEqual(count_words(\"a  b   c\"), 3)\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


class Task:
    """A validated task of the sample repository and a way to grade a candidate against it."""

    def __init__(self, repo: Path, fix: str, builder, place: Path):
        parent = git(repo, "rev-parse", f"{fix}^").strip()
        result = task_validate(CommitToValidate(mirror_dir=repo, sha=fix, parent_sha=parent,
                                                committed_at=datetime.now(timezone.utc)),
                               builder=builder, work_root=place, settings=ValidationSettings(reruns=0))
        assert result.verdict == "valid", result.reason
        patches = commit_patches(repo, fix, parent, TestFileRules())
        self.repo, self.parent, self.gold, self.builder, self.place = repo, parent, patches.source_patch, builder, place
        self.environment = result.environment
        self.task = TaskToGrade(mirror_dir=repo, base_sha=parent, test_patch=patches.test_patch,
                                fail_to_pass=tuple(result.oracle.fail_to_pass),
                                pass_to_pass=tuple(result.oracle.pass_to_pass))

    def grade(self, patch: str):
        return candidate_grade(self.task, patch, builder=self.builder, environment=self.environment,
                               work_root=self.place)

    def appended(self, path: str, lines: str) -> str:
        """A candidate that adds `lines` at the end of the package's file `path` (its code runs as the
        tests import the package) and fixes nothing."""
        before = git(self.repo, "show", f"{self.parent}:{path}")
        after = before + "\n" + lines
        old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
        return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
                f"@@ -1,{len(old)} +1,{len(new)} @@\n" + "".join(" " + line for line in old) +
                "".join("+" + line for line in new[len(old):]))


@pytest.fixture(scope="module", params=["local", "docker"])
def tasks(request, open_module_folder, docker_builder_make):
    """Two tasks of the sample repository, validated in one backend: the wrap_text fix (pytest
    tests; its test file is collected after others that import the package) and a unittest-style one."""
    place = open_module_folder / request.param
    builder = docker_builder_make(place / "envs") if request.param == "docker" else EnvironmentBuilder(
        env_root=place / "envs", uv=UV)
    commits = sample_repo_write(place / "textkit")
    wrap_fix = next(c for c in commits if c.kind == "fix_with_test" and "wrap_text" in c.subject)
    repo = GitRepo(place / "textkit")
    repo.commit("Add count_words", {"textkit/words.py": WORDS, "tests/test_words.py": WORDS_TESTS})
    words_fix = repo.commit("count_words: runs of spaces are one gap",
                            {"textkit/words.py": WORDS.replace('split(" ")', "split()"),
                             "tests/test_words.py": WORDS_FIX_TESTS})
    return {"pytest": Task(place / "textkit", wrap_fix.sha, builder, place),
            "unittest": Task(place / "textkit", words_fix, builder, place)}


def test_the_gold_patch_resolves_and_the_empty_one_does_not(tasks):
    for task in tasks.values():
        gold = task.grade(task.gold)
        assert (gold.outcome, gold.detail) == ("resolved", ""), gold.detail
        assert task.grade("").outcome == "no"


def untrusted(grade, why: str) -> None:
    assert grade.outcome == "untrusted", (grade.outcome, grade.detail, [run.outcomes for run in grade.runs])
    assert why in grade.detail, grade.detail


# Against the plugin as it was: its objects found through gc, the functions in their closure cells
# that decide a status replaced, so every report says PASSED; then, against the account, its writer.
GC_DIGGING = '''
import gc

for _found in gc.get_objects():
    if type(_found).__name__ == "function" and _found.__code__.co_filename.endswith("commitgym_pytest_report.py"):
        for _cell in _found.__closure__ or ():
            try:
                _name = getattr(_cell.cell_contents, "__name__", "")
            except ValueError:
                continue
            if _name == "status_of":
                _cell.cell_contents = lambda *args: "PASSED"
            elif _name in ("forgery", "raised"):
                _cell.cell_contents = lambda *args: "passed" if _name == "raised" else ""
'''

# Each test function's code swapped for a stub's as its test module finishes importing.
PROFILE_SWAP = '''
import sys


def _stub(*args, **kwargs):
    pass


def _profile(frame, event, arg):
    if event == "return" and frame.f_code.co_name == "<module>" and "/tests/" in frame.f_code.co_filename:
        for _name, _value in list(frame.f_globals.items()):
            if _name.startswith("test_") and hasattr(_value, "__code__"):
                _value.__code__ = _stub.__code__


sys.setprofile(_profile)
'''

# An import hook that takes the test modules imported after the package and removes their asserts.
IMPORT_HOOK = '''
import importlib.abc
import importlib.util
import sys


class _Rewriter(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if not name.rpartition(".")[2].startswith("test_"):
            return None
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target) if finder is not self and hasattr(finder, "find_spec") else None
            if spec is not None and (spec.origin or "").endswith(".py"):
                return importlib.util.spec_from_file_location(name, spec.origin, loader=self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        with open(module.__spec__.origin) as source:
            text = source.read().replace("    assert ", "    assert True or ")
        exec(compile(text, module.__spec__.origin, "exec"), module.__dict__)


sys.meta_path.insert(0, _Rewriter())
'''

# A pytest_pyfunc_call wrapper registered from the package (pytest's config found through its
# assertion-rewriting import hook) that swallows each test's failure.
PYFUNC_WRAPPER = '''
import sys

import pytest


class _Swallow:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem):
        outcome = yield
        outcome.force_result(True)


for _hook in sys.meta_path:
    if type(_hook).__name__ == "AssertionRewritingHook":
        _hook.config.pluginmanager.register(_Swallow(), "swallow")
'''

# pytest's Function.setup replaced: the object pytest calls becomes a stub made to look like the test.
FUNCTION_SETUP = '''
import functools

import _pytest.python

_setup = _pytest.python.Function.setup


def _swapped(self):
    _setup(self)
    self.obj = functools.wraps(self.obj)(lambda *args, **kwargs: None)


_pytest.python.Function.setup = _swapped
'''

# Next: the plugin's own events raised by the package, saying its tests passed.
REPORT_EVENTS = '''
import sys

for _when in ("setup", "call", "teardown"):
    sys.audit("commitgym", "logreport", "tests/test_wrap.py::test_wrap_never_exceeds_width", _when, "passed",
              False, 0.0, False, False, None, None, None, [])
'''

# Next: the test's code swapped from a thread once its module is loaded, for code compiled from a string.
THREAD_SWAP = '''
import sys
import threading
import time


def _swap():
    for _ in range(5000):
        module = sys.modules.get("test_wrap") or sys.modules.get("tests.test_wrap")
        test = getattr(module, "test_wrap_never_exceeds_width", None)
        if test is not None:
            namespace = {}
            exec("def test_wrap_never_exceeds_width():\\n    pass\\n", namespace)
            test.__code__ = namespace["test_wrap_never_exceeds_width"].__code__
            return
        time.sleep(0.001)


threading.Thread(target=_swap, daemon=True).start()
'''

# Next: a test file the package rewrites on disk, its asserts taken out, before pytest imports it.
TEST_FILE_REWRITTEN = '''
import os

_tests = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "test_wrap.py")
with open(_tests) as _file:
    _text = _file.read()
with open(_tests, "w") as _file:
    _file.write(_text.replace("    assert ", "    assert True or "))
'''

# unittest's TestCase.run replaced from the package: every case a success, whatever it raised.
TESTCASE_RUN = '''
import unittest


def _run_quietly(self, result=None):
    result.startTest(self)
    try:
        getattr(self, self._testMethodName)()
    except Exception:
        pass
    result.addSuccess(self)
    result.stopTest(self)


unittest.TestCase.run = _run_quietly
'''

# What each attack that reaches the account does there: the handlers that decide what a line says
# made to say every test passed; and the frames above the code running, read without sys._getframe.
ACCOUNT_HANDLERS_FORGED = r'''
_done = []


def _forge(handlers):
    phase_end, called, logreport = handlers["phase_end"], handlers["called"], handlers["logreport"]
    handlers["phase_end"] = lambda nodeid, when, kind, stored: phase_end(nodeid, when, None, None)
    handlers["called"] = lambda function, kind, tb: called(function, None, None)
    handlers["logreport"] = lambda nodeid, when, outcome, *rest: logreport(nodeid, when, "passed", *rest)


def _frames_above():
    try:
        raise LookupError
    except LookupError as error:
        frame = getattr(error.__traceback__.tb_frame, "f_" + "back")
    while frame is not None:
        yield frame
        frame = getattr(frame, "f_" + "back")
'''

# The account found through the plugin pytest holds (its hooks' closures lead to the audit hook, and
# that to the account's generator), its frame read for the handlers that decide what a line says.
ACCOUNT_THROUGH_CLOSURES = ACCOUNT_HANDLERS_FORGED + r'''
import sys as _s


def _find_account():
    config = None
    for hook in getattr(_s, "meta" + "_path"):
        config = getattr(hook, "config", None) or config
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ != "Report":
            continue
        for fn in vars(type(plugin)).values():
            for cell in getattr(fn, "__clo" + "sure__", None) or ():
                listen = getattr(cell, "cell_" + "contents")
                if getattr(listen, "__name__", "") == "listen":
                    for c2 in getattr(listen, "__clo" + "sure__"):
                        hook = getattr(c2, "cell_" + "contents")
                        if getattr(hook, "__name__", "") == "hook":
                            for c3 in getattr(hook, "__clo" + "sure__"):
                                send = getattr(c3, "cell_" + "contents")
                                if getattr(send, "__name__", "") == "send":
                                    return send.__self__
    return None


_forge(getattr(_find_account().gi_frame, "f_" + "locals")["handlers"])
'''

# Code of the candidate's run inside the audit hook: a str subclass's __hash__, called as the hook
# looks a path up, walks up to the hook's frame and takes the account from there.
CODE_INSIDE_THE_HOOK = ACCOUNT_HANDLERS_FORGED + r'''


class _Path(str):
    def __hash__(self):
        for frame in _frames_above():
            send = getattr(frame, "f_" + "locals").get("send")
            if not _done and getattr(send, "__name__", "") == "send" and hasattr(send.__self__, "gi_frame"):
                _done.append(True)
                _forge(getattr(send.__self__.gi_frame, "f_" + "locals")["handlers"])
        return str.__hash__(self)


with open(_Path("/dev/null")) as _quiet:
    pass

'''

# Next: the pyfunc_call wrapper above, registered by code compiled from a string in a thread of its
# own: no frame of the candidate's file is on the stack as it compiles, registers or runs.
WRAPPER_FROM_A_THREAD = '''
import threading

_source = %r
_thread = threading.Thread(target=exec, args=(_source, {"__name__": "swallow"}))
_thread.start()
_thread.join()
''' % PYFUNC_WRAPPER

# Code of the candidate's run inside the account: a str subclass put as the key of a builtin, whose
# __eq__ runs as the account looks that builtin up to see it was not replaced; from there its frame,
# and what decides the facts, are at hand.
KEY_THE_ACCOUNT_LOOKS_UP = ACCOUNT_HANDLERS_FORGED + r'''
import builtins


class _Name(str):
    __hash__ = str.__hash__

    def __eq__(self, other):
        for frame in _frames_above():
            handlers = getattr(frame, "f_" + "locals").get("handlers")
            if not _done and type(handlers) is dict and "phase_end" in handlers:
                _done.append(True)
                _forge(handlers)
        return str.__eq__(self, other)


_names = vars(builtins)
_names[_Name("abs")] = _names.pop("abs")
'''

# The same reach through a test function's attributes, made a dict subclass that shows no key to whoever
# counts them, holding a key of the candidate's type where the account looks for `__wrapped__`; from a
# thread, once the test module is loaded.
ATTRIBUTES_OF_THE_CANDIDATES_TYPE = KEY_THE_ACCOUNT_LOOKS_UP.split("_names = vars(builtins)")[0] + r'''
import sys
import threading
import time


class _Attributes(dict):
    def __iter__(self):
        return iter(())


def _swap():
    for _ in range(5000):
        module = sys.modules.get("test_wrap") or sys.modules.get("tests.test_wrap")
        test = getattr(module, "test_wrap_never_exceeds_width", None)
        if test is not None:
            attributes = _Attributes(test.__dict__)
            dict.__setitem__(attributes, _Name("__wrapped__"), None)
            test.__dict__ = attributes
            return
        time.sleep(0.001)


threading.Thread(target=_swap, daemon=True).start()
'''

ATTACKS = {
    "gc digging into the plugin's closures": ("pytest", GC_DIGGING, "harness_reached: gc.get_objects was called"),
    "a profile hook swapping test code": ("pytest", PROFILE_SWAP, "harness_reached: sys.setprofile was called"),
    "an import hook rewriting test modules": ("pytest", IMPORT_HOOK, "test_code_changed:"),
    "a pyfunc_call wrapper from the package": (
        "pytest", PYFUNC_WRAPPER, "harness_reached: pytest_pyfunc_call is implemented by code of the candidate's"),
    "Function.setup replaced": ("pytest", FUNCTION_SETUP,
                                "pytest_internals_changed: Function.setup was replaced during the run"),
    "next: the plugin's events raised by the package": (
        "pytest", REPORT_EVENTS, "harness_reached: a report event was raised by code other than the plugin's"),
    "next: test code swapped from a thread": (
        "pytest", THREAD_SWAP, "test_code_changed: __code__ of test_wrap_never_exceeds_width in tests/test_wrap.py"),
    "next: a test file rewritten on disk": (
        "pytest", TEST_FILE_REWRITTEN, "test_code_changed: tests/test_wrap.py was opened for writing during the run"),
    "next: the account found through the plugin's closures": (
        "pytest", ACCOUNT_THROUGH_CLOSURES, "harness_reached: the plugin's account was looked into (gi_frame)"),
    "next: a pyfunc_call wrapper compiled from a string in a thread": (
        # Not taken for the candidate's, the wrapper is found out by the facts: the call it made pass raised.
        "pytest", WRAPPER_FROM_A_THREAD, "its function raised AssertionError, though its call passed"),
    "next: a key the account looks up, of the candidate's type": (
        "pytest", KEY_THE_ACCOUNT_LOOKS_UP, "harness_reached: a key that is not a plain str was put in builtins"),
    "next: a test function's attributes of the candidate's type": (
        "pytest", ATTRIBUTES_OF_THE_CANDIDATES_TYPE,
        "harness_reached: the attributes of test_wrap_never_exceeds_width is a _Attributes, not a dict"),
    "unittest's TestCase.run replaced": ("unittest", TESTCASE_RUN,
                                         "pytest_internals_changed: unittest.case.TestCase.run was replaced during the run"),
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_candidate_forging_its_grade_from_inside_the_test_process_is_untrusted(tasks, attack):
    kind, code, why = ATTACKS[attack]
    task = tasks[kind]
    package_file = "textkit/wrap.py" if kind == "pytest" else "textkit/words.py"
    untrusted(task.grade(task.appended(package_file, code)), why)


def test_code_of_the_candidates_never_runs_inside_the_audit_hook(tasks):
    """The hook takes a str only as a plain str: the subclass's __hash__ never runs there, so it never
    reaches the account, and the tests fail as they should."""
    task = tasks["pytest"]
    grade = task.grade(task.appended("textkit/wrap.py", CODE_INSIDE_THE_HOOK))
    assert grade.outcome == "no", (grade.outcome, grade.detail)


# Writes pytest's own cache of a test module's rewritten code, for the file with its asserts taken out,
# stamped as the real file's (its source hash from pytest 9, its time and size before): pytest loads it
# in the file's place. Run in the task's environment, in the working copy.
STALE_CACHE = """
import ast, importlib.util, os, sys
from _pytest.assertion import rewrite

path = os.path.abspath(sys.argv[1])
with open(path, "rb") as handle:
    source = handle.read()
forged = source.replace(b"    assert ", b"    assert True or ")
tree = ast.parse(forged, filename=path)
rewrite.rewrite_asserts(tree, forged, path, None)
code = compile(tree, path, "exec", dont_inherit=True)
cache = rewrite.get_cache_dir(rewrite.Path(path))
os.makedirs(str(cache), exist_ok=True)
stamp = importlib.util.source_hash(source) if "source_hash" in rewrite._write_pyc.__code__.co_varnames else os.stat(path)
rewrite._write_pyc(type("State", (), {"trace": lambda self, message: None})(), code, stamp,
                   cache / (os.path.basename(path)[:-3] + rewrite.PYC_TAIL))
"""


def test_a_stale_compiled_test_module_is_never_what_runs(tasks, open_folder):
    """In a grade the candidate's compiled files are put back; a run that finds one anyway (here, made
    in the working copy before the run) does not run it unnoticed: its code is not its source's."""
    task = tasks["pytest"]
    repo = working_copy_write(task.repo, task.parent, open_folder / "tested")
    assert patch_apply(task.builder.sandbox(), open_folder / "tested", task.task.test_patch).ok
    (open_folder / "tested" / "stale_cache.py").write_text(STALE_CACHE)
    sandbox = task.builder.sandbox([(task.environment.path, ENV)], image=task.environment.image)
    made = sandbox.run([f"{ENV}/bin/python", f"{WORKSPACE}/stale_cache.py", "tests/test_wrap.py"],
                       workdir=open_folder / "tested", network=False, limits=Limits(wall_seconds=120),
                       mount_at=WORKSPACE, cwd=f"{WORKSPACE}/repo")
    assert made.exit_code == 0, made.output.decode()
    hand_over(open_folder / "tested", os.getuid())
    assert list((repo / "tests" / "__pycache__").glob("test_wrap.*-pytest-*.pyc"))
    run, _ = fresh_copy_run(task.builder, task.environment, repo, ["tests/test_wrap.py"], scratch=open_folder,
                            limits=Limits(wall_seconds=300), per_test_timeout=60)
    assert run.untrusted == "test_code_changed: tests/test_wrap.py does not run the code compiled from its source", \
        (run.untrusted, run.outcomes)
    # As a candidate's patch, the same file is put back before anything runs.
    cache = next((repo / "tests" / "__pycache__").glob("test_wrap.*-pytest-*.pyc"))
    name = cache.relative_to(repo).as_posix()
    data = cache.read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git applies a binary hunk to its blob only
    graded = task.grade(f"diff --git a/{name} b/{name}\nnew file mode 100644\nindex {'0' * 40}..{blob}\n"
                        f"GIT binary patch\nliteral {len(data)}\n{_git_binary(data)}\n\nliteral 0\nHcmV?d00001\n\n")
    assert graded.outcome != "resolved" and (name in graded.tampering or "test_code_changed" in graded.detail), \
        (graded.outcome, graded.tampering, graded.detail)


def _git_binary(data: bytes) -> str:
    """`data` as a binary hunk's lines (zlib, base85, a length letter per line), as git writes them."""
    packed = zlib.compress(data)
    lines = []
    for start in range(0, len(packed), 52):
        chunk = packed[start:start + 52]
        letter = chr(ord("A") + len(chunk) - 1) if len(chunk) <= 26 else chr(ord("a") + len(chunk) - 27)
        lines.append(letter + base64.b85encode(chunk, pad=True).decode())
    return "\n".join(lines)
