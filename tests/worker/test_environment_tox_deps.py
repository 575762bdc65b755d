"""A test dependency declared only where tox reads it, or nowhere: tox.ini's [testenv] deps are read
as a requirements file is, and a test module that does not import for want of a module gets what
provides it, as a test that skips for want of one does. The builds are real, in the local sandbox."""

from datetime import datetime, timezone

import pytest

from tests.worker.test_environment import PYTHON, UV
from worker.engine.env import recipes
from worker.engine.env.builder import EnvironmentBuilder
from worker.engine.env.recipes import REPO, install_recipe, install_strategies, tox_requirements
from worker.engine.env.skips import modules_not_found, optional_requirements

TOX_INI = """\
[tox]
envlist = py27, py36, flake8

[base]
deps =
    six>=1.10
    {[other]deps}

[other]
deps = attrs

[testenv]
deps =
    # what the tests need
    -r{toxinidir}/ci/test-requirements.pip
    freezegun  # the clock
    pytest-timeout
    py27: mock
    py{27,36}-django18: Django<1.9
    !py27: trio
    py3: sortedcontainers; sys_platform == "linux"
    pypy: cffi
    coverage: pytest-cov
    {[base]deps}
    {envsitepackagesdir}/extra
    -e .
    -c constraints.txt
    git+https://github.com/someone/plugin.git
    oldtox
commands = pytest {posargs}

[testenv:flake8]
deps = flake8
"""


def test_tox_deps_are_read_like_a_requirements_file_without_what_cannot_be_resolved(tmp_path):
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "test-requirements.pip").write_text("hypothesis\n-r ../requirements.txt\n")
    (tmp_path / "requirements.txt").write_text("simplejson\n")
    (tmp_path / "tox.ini").write_text(TOX_INI)
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='oldtox')\n")
    recipe = install_recipe(tmp_path)
    # The file tox includes is read with the install files, though no requirements file is named so.
    assert recipe["ci/test-requirements.pip"].startswith("hypothesis")
    assert tox_requirements(recipe) == [
        "hypothesis", "simplejson", "freezegun", "pytest-timeout", 'mock; python_version == "2.7"',
        'trio; python_version != "2.7"',
        'sortedcontainers; sys_platform == "linux" and (python_version >= "3" and python_version < "4")',
        "six>=1.10", "attrs", "oldtox"]
    strategies = {strategy.name: strategy.install_args for strategy in install_strategies(recipe)}
    # Beside the requirements files, never the package itself (it is the working copy).
    assert strategies["editable+requirements"] == ("-e", REPO, "simplejson", "hypothesis", "freezegun",
                                                   "pytest-timeout", 'mock; python_version == "2.7"',
                                                   'trio; python_version != "2.7"',
                                                   'sortedcontainers; sys_platform == "linux" and '
                                                   '(python_version >= "3" and python_version < "4")',
                                                   "six>=1.10", "attrs")
    assert "freezegun" in strategies["dependencies"] and "oldtox" not in strategies["dependencies"]
    assert recipes.pytest_plugins(recipe) == ["pytest-timeout"]  # go with pytest, as the requirements files' do


def test_tox_files_of_any_shape_are_read_without_a_crash_or_a_file_outside_the_copy(tmp_path):
    for tox in ("[testenv\ndeps = x\n", "[testenv]\ndeps = {[testenv]deps} {[testenv]deps}\n",
                "[testenv]\ndeps = -r../outside.txt\n  -r/etc/passwd\n  {[missing]deps}\n  py{27,3{5,6}}: x\n",
                "[testenv]\ndeps = py" + "{2,3}" * 30 + ": x\n"):
        assert isinstance(tox_requirements({"tox.ini": tox}), list)
    (tmp_path / "tox.ini").write_text("[testenv]\ndeps = -r../outside.txt\n")
    (tmp_path.parent / "outside.txt").write_text("secret\n")
    assert install_recipe(tmp_path) == {"tox.ini": "[testenv]\ndeps = -r../outside.txt\n"}
    legacy = '[tool.tox]\nlegacy_tox_ini = """\n[testenv]\ndeps = freezegun\n"""\n'
    assert tox_requirements({"pyproject.toml": legacy}) == ["freezegun"]
    setup_cfg = "[metadata]\nname = x\n\n[tox:tox]\nenvlist = py36\n\n[testenv]\ndeps = freezegun\n"
    assert tox_requirements({"setup.cfg": setup_cfg}) == ["freezegun"]
    assert tox_requirements({"setup.cfg": "[testenv]\ndeps = freezegun\n"}) == []  # not tox's without [tox:tox]


# What pytest prints where a test module does not import for want of a module: Python 3, then Python 2.
_NOT_COLLECTED = """\
_____________ ERROR collecting tests/test_clock.py _____________
ImportError while importing test module '/workspace/repo/tests/test_clock.py'.
Traceback:
tests/test_clock.py:1: in <module>
    import freezegun
E   ModuleNotFoundError: No module named 'freezegun'
_____________ ERROR collecting tests/test_other.py _____________
E   ModuleNotFoundError: No module named 'yaml'
E   ModuleNotFoundError: No module named 'oldpkg.compat'
"""


def test_a_module_a_test_did_not_import_is_wanted_as_a_skip_for_it_is():
    assert modules_not_found(_NOT_COLLECTED) == {"freezegun": "ModuleNotFoundError: No module named 'freezegun'",
                                                 "yaml": "ModuleNotFoundError: No module named 'yaml'"}
    assert modules_not_found("E   ImportError: No module named freezegun\n") == {
        "freezegun": "ImportError: No module named freezegun"}
    recipe = {"setup.py": "setup(name='x', extras_require={'time': ['freezegun<1']})"}
    assert optional_requirements(modules_not_found(_NOT_COLLECTED), recipe, said="tests do not collect") == [
        ("freezegun<1", "an extra of the package; tests do not collect: ModuleNotFoundError: No module named "
                        "'freezegun'"),
        ("pyyaml", "tests do not collect: ModuleNotFoundError: No module named 'yaml'")]


CLOCK = "import datetime\n\n\ndef today():\n    return datetime.date.today()\n"
CLOCK_TEST = """import datetime

import freezegun

from clock import today


@freezegun.freeze_time("2018-03-01")
def test_today():
    assert today() == datetime.date(2018, 3, 1)
"""
MAY_2018 = datetime(2018, 5, 2, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def place(open_module_folder):
    return open_module_folder


def _clock_repository(work, **extra_files):
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "setup.py").write_text(
        "from setuptools import setup\n\nsetup(name='clock', py_modules=['clock'])\n")
    (work / "repo" / "clock.py").write_text(CLOCK)
    (work / "repo" / "tests" / "test_clock.py").write_text(CLOCK_TEST)
    for name, text in extra_files.items():
        (work / "repo" / name).write_text(text)
    return work


def test_a_test_dependency_only_tox_declares_is_installed(place):
    work = _clock_repository(place / "tox-deps", **{"tox.ini": "[tox]\nenvlist = py27,py36\n\n[testenv]\n"
                                                                "deps =\n    pytest\n    py27: mock\n    freezegun\n"
                                                                "commands = pytest\n"})
    built = EnvironmentBuilder(env_root=place / "envs", uv=UV).build(work, as_of=MAY_2018,
                                                                     probe=["tests/test_clock.py"])
    kept = built.attempts[-1]
    assert kept.strategy.startswith(f"{PYTHON} editable+requirements"), [a.strategy for a in built.attempts]
    assert "freezegun==" in built.lock and "mock==" not in built.lock
    assert "1 passed" in kept.output


def test_a_module_the_tests_do_not_collect_for_want_of_is_installed_as_of_the_commit(place):
    work = _clock_repository(place / "undeclared")
    built = EnvironmentBuilder(env_root=place / "envs", uv=UV).build(work, as_of=MAY_2018,
                                                                     probe=["tests/test_clock.py"])
    missing, kept = built.attempts[-2:]
    assert (missing.step, missing.reason) == ("collect", "tests_do_not_collect"), [a.strategy for a in built.attempts]
    assert "No module named 'freezegun'" in missing.output
    assert kept.status == "ok" and kept.strategy == f"{missing.strategy} freezegun"
    assert kept.added == [{"requirement": "freezegun",
                           "why": "tests do not collect: ModuleNotFoundError: No module named 'freezegun'"}]
    # As of the commit's date: a freezegun of 2018 (0.3.x), not today's.
    assert "freezegun==0.3." in built.lock and "1 passed" in kept.output
