"""Signs of Python 2 code that send the search to Python 2.7: a syntax error Python 2's own parser
accepts and every Python 3's here refuses, whatever the syntax; and a setup.py that stops on Python 3.
The builds are real, in the docker backend (Python 2.7 lives in the bullseye image)."""

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from worker.engine.env.builder import Attempt, EnvironmentFailed
from worker.engine.env.era import (
    PARSE_SCRIPT,
    parse_answers,
    setup_refuses,
    syntax_error_files,
    with_era_reason,
)
from worker.engine.env.rebuild import release_lock
from worker.engine.env.recipes import REPO, WORKSPACE
from worker.engine.env.runtimes import Runtime
from tests.worker.environment_rebuilt import rebuilt_freeze

# Every syntax Python 3 removed, one file each.
REMOVED_SYNTAX = {
    "tuple_parameters.py": "def first((a, b)):\n    return a\n",
    "tuple_lambda.py": "by_value = lambda (k, v): v\n",
    "backticks.py": "text = `42`\n",
    "not_equal.py": "differ = 1 <> 2\n",
    "unicode_raw.py": "pattern = ur'\\d+'\n",
    "octal.py": "mode = 0777\n",
    "long.py": "big = 10L\n",
    "print_statement.py": "print 'hello'\n",
    "print_no_newline.py": "print 'hello',\n",  # (`print >>f, x` parses in Python 3: it fails when run)
    "exec_statement.py": "exec 'x = 1' in {}\n",
    "except_comma.py": "try:\n    pass\nexcept ValueError, error:\n    pass\n",
    "raise_comma.py": "raise ValueError, 'why'\n",
}
PYTHON3_ONLY = {"fstring.py": "name = 'x'\ntext = f'{name}'\n", "keyword_only.py": "def f(*, a):\n    return a\n"}


@pytest.fixture(scope="module")
def place(open_module_folder):
    return open_module_folder


@pytest.fixture(scope="module")
def docker_builder(place, docker_builder_make):
    return docker_builder_make(place / "envs-docker")


def test_python_2_and_each_python_3_parser_say_which_syntax_each_accepts(place, docker_builder):
    work = place / "parsed"
    (work / "repo").mkdir(parents=True)
    for name, text in {**REMOVED_SYNTAX, **PYTHON3_ONLY}.items():
        (work / "repo" / name).write_text(text)
    (work / "repo" / "huge.py").write_text("x = 1\n" * 200_000)  # past what is read: not parsed at all
    names = [*REMOVED_SYNTAX, *PYTHON3_ONLY, "huge.py"]
    pythons = {runtime.version: runtime for runtime in docker_builder.runtimes}
    assert {"2.7", "3.9", "3.11"} <= set(pythons)
    said = {}
    for version in ("2.7", "3.9", "3.11"):
        runtime = pythons[version]
        result = docker_builder.sandbox(image=runtime.image).run(
            [runtime.interpreter, "-c", PARSE_SCRIPT, *names], workdir=work, mount_at=WORKSPACE, cwd=REPO)
        said[version] = dict(zip(names, parse_answers(result.output.decode(), len(names))))
    assert said["2.7"] == {**dict.fromkeys(REMOVED_SYNTAX, "ok"), **dict.fromkeys(PYTHON3_ONLY, "syntax"),
                           "huge.py": "other"}
    for version in ("3.9", "3.11"):
        assert said[version] == {**dict.fromkeys(REMOVED_SYNTAX, "syntax"), **dict.fromkeys(PYTHON3_ONLY, "ok"),
                                 "huge.py": "other"}, version


# What Python 3.9 printed collecting tests that import a module of tuple parameters, and building a
# package whose setup.py is Python 2.
_COLLECTED = """tests/test_pairs.py:1: in <module>
    from pairs import by_value
E     File "/workspace/repo/pairs.py", line 2
E       return sorted(mapping.items(), key=lambda (k, v): v)
E                                      ^
E   SyntaxError: expression cannot contain assignment, perhaps you meant "=="?
"""
_BUILT = """  File "<string>", line 3
    print "installing", `version`
                        ^
SyntaxError: invalid syntax
error: Failed to build `oldpkg @ file:///workspace/repo`
"""


def test_the_files_a_syntax_error_is_in_are_read_from_what_the_step_printed():
    files = frozenset({"pairs.py", "setup.py", "tests/test_pairs.py"})
    assert syntax_error_files(_COLLECTED, files) == ["pairs.py"]
    assert syntax_error_files(_BUILT, files, installing=True) == ["setup.py"]
    # A dependency's file, a file the working copy does not have, setup.py of another build: none.
    assert syntax_error_files(_COLLECTED.replace("/workspace/repo/pairs.py", "/env/lib/x/pairs.py"), files) == []
    assert syntax_error_files(_COLLECTED, frozenset({"setup.py"})) == []
    assert syntax_error_files(_BUILT.replace("oldpkg @ file:///workspace/repo", "oldlib==0.1"), files,
                              installing=True) == []
    assert parse_answers("ok\nsyntax\n", 2) == ["ok", "syntax"]
    assert parse_answers("ok\n", 2) == [] and parse_answers("ok\nrm -rf\n", 2) == []


REFUSING_SETUP = """import sys
from setuptools import setup

if sys.version_info[0] >= 3:
    raise RuntimeError("Python 3 support en route")

setup(name="oldmap", version="0.1", py_modules=["oldmap"])
"""


def test_a_setup_py_stopping_on_python_3_is_told_from_one_stopping_on_old_pythons():
    assert setup_refuses(REFUSING_SETUP, "3.9") and setup_refuses(REFUSING_SETUP, "3.13")
    for refusing in ("import sys\nPY3 = sys.version_info.major == 3\nif PY3 and True:\n    sys.exit('later')\n",
                     "import sys\nassert sys.version_info < (3,), 'Python 2 only'\n",
                     "import sys\nif sys.version < '3':\n    pass\nelse:\n    raise SystemExit(1)\n",
                     "import six\nif six.PY3:\n    exit('no')\n",
                     "import sys\ntry:\n    if sys.hexversion >= 0x3000000:\n        raise ImportError\n"
                     "except X:\n    pass\n"):
        assert setup_refuses(refusing, "3.11"), refusing
    for not_refusing in ("import sys\nif sys.version_info < (2, 6):\n    raise RuntimeError('too old')\n",
                         "raise SystemExit('never builds')\n",
                         "import os\nif os.environ.get('X'):\n    raise SystemExit(1)\n",
                         "import sys\nif sys.version_info >= (3, 10):\n    sys.exit('not yet')\n",
                         "def f():\n    if sys.version_info[0] == 3:\n        raise X\n",
                         "print 'a Python 2 setup.py'\n", "(" * 100_000,
                         # Read without end: a name bound to itself, a hostile depth of `not`.
                         "a = b\nb = a\nif a:\n    raise X\n",
                         "import sys\nif " + "not " * 500 + "sys.version_info[0] == 2:\n    raise X\n"):
        assert not setup_refuses(not_refusing, "3.9"), not_refusing
    # Where no Python 2 is here, the package's own build failed for want of a Python of the code's era.
    failed = "error: The build backend returned an error\nRuntimeError: Python 3 support en route\n"
    attempt = Attempt("python3.11 editable", [], "failed", "install", failed, 0.0, reason="build_failed", said=failed)
    recipe = {"setup.py": REFUSING_SETUP}
    assert EnvironmentFailed(with_era_reason([attempt], recipe, [Runtime("3.11")])).reason == "no_python_for_era"
    assert EnvironmentFailed(with_era_reason([attempt], {}, [Runtime("3.11")])).reason == "build_failed"
    dependency = replace(attempt, reason="dependency_build_failed")  # a dependency's setup.py is not the code's
    assert EnvironmentFailed(with_era_reason([dependency], recipe, [Runtime("3.11")])).reason == \
        "dependency_build_failed"


def _working_copy(work, files):
    (work / "repo" / "tests").mkdir(parents=True)
    for name, text in files.items():
        (work / "repo" / name).write_text(text)
    return work


def _story(attempts) -> str:
    return "\n".join(f"{a.strategy}: {a.status} at {a.step or '-'} ({a.reason})\n{a.output[-1200:]}" for a in attempts)


PAIRS_SETUP = "from setuptools import setup\n\nsetup(name='pairs', version='0.1', py_modules=['pairs'])\n"
PAIRS = "def by_value(mapping):\n    return sorted(mapping.items(), key=lambda (k, v): v)\n"
PAIRS_TEST = ("from pairs import by_value\n\n\ndef test_by_value():\n"
              "    assert by_value({'a': 2, 'b': 1}) == [('b', 1), ('a', 2)]\n")


def test_code_in_a_syntax_only_python_2_parses_gets_python_2_7(place, docker_builder):
    work = _working_copy(place / "tuple-parameters", {"setup.py": PAIRS_SETUP, "pairs.py": PAIRS,
                                                      "tests/test_pairs.py": PAIRS_TEST})
    built = docker_builder.build(work, as_of=datetime(2013, 5, 1, tzinfo=timezone.utc), probe=["tests/test_pairs.py"])
    assert built.python_version.startswith("2.7."), _story(built.attempts)
    # Python 3.9 (with the oldest pytest it runs: none of 2013 does) printed a SyntaxError that speaks
    # of assignment; the parsers told the rest, and no other strategy or Python 3 was tried.
    tried = [attempt.strategy for attempt in built.attempts]
    assert tried[:3] == ["python3.9 editable", "python3.9 editable pytest~=6.1.0", "python2.7 editable"], tried
    assert built.attempts[1].step == "collect" and "lambda (k, v)" in built.attempts[1].output
    assert "SyntaxError: expression cannot contain assignment" in built.attempts[1].output
    assert "1 passed" in built.attempts[-1].output
    # From a release's files, `docker build` alone makes it again: the same distributions, the same versions.
    rebuilt = rebuilt_freeze(built, work / "repo", place / "tuple-parameters-release", base="commitgym-base:bullseye")
    assert release_lock(rebuilt) == release_lock(built.lock) and "pytest==4.6" in release_lock(built.lock)


OLDMAP = "def pairs(mapping):\n    return sorted(mapping.iteritems())\n"
OLDMAP_TEST = ("from oldmap import pairs\n\n\ndef test_pairs():\n"
               "    assert pairs({'b': 1, 'a': 2}) == [('a', 2), ('b', 1)]\n")


def test_a_package_whose_setup_py_stops_on_python_3_gets_python_2_7(place, docker_builder):
    work = _working_copy(place / "setup-refusing", {"setup.py": REFUSING_SETUP, "oldmap.py": OLDMAP,
                                                    "tests/test_oldmap.py": OLDMAP_TEST})
    built = docker_builder.build(work, as_of=datetime(2012, 9, 1, tzinfo=timezone.utc), probe=["tests/test_oldmap.py"])
    assert built.python_version.startswith("2.7."), _story(built.attempts)
    first, *_, kept = built.attempts
    assert (first.strategy, first.step, first.reason) == ("python3.9 editable", "install", "build_failed")
    assert "Python 3 support en route" in first.output
    # No other strategy or Python 3 was tried (tests-only there collects, and fails on iteritems).
    assert [attempt.strategy.split()[0] for attempt in built.attempts[1:]] == ["python2.7"] * (len(built.attempts) - 1)
    assert "1 passed" in kept.output
