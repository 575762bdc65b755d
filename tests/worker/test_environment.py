"""Environments built for real in the local sandbox, with packages from the index."""

import os
import stat
import subprocess
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from worker.demo.sample_repo import sample_repo_write
from worker.engine.env.builder import (
    LEGACY_INI,
    Attempt,
    EnvironmentBuilder,
    EnvironmentFailed,
    legacy_config_options,
    nose_era_test_folders,
)
from worker.engine.env.era import dependency_too_old, python2_code, removed_by_code, removed_in, with_era_reason
from worker.engine.env.files import environment_files, environment_files_lay
from worker.engine.env.recipes import (
    ENV,
    REPO,
    WORKSPACE,
    build_packages,
    declared_dependencies,
    declared_python,
    install_recipe,
    install_strategies,
    project_name,
    recipe_key,
)
from worker.engine.env.resolve import Cutoffs, install_failure_reason, lifts_wanted
from worker.engine.env.runtimes import Runtime, default_images, docker_runtimes, local_runtimes, python_order
from worker.engine.env.skips import missing_modules, optional_requirements
from worker.engine.reasons import ENVIRONMENT_REASONS
from worker.engine.run.pytest_run import pytest_run
from worker.engine.run.report_plugin import legacy_pytest_ini
from worker.engine.sandbox.base import Limits
from worker.engine.sandbox.local import LocalSandbox

UV = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "uv"
AS_OF = datetime(2026, 6, 1, tzinfo=timezone.utc)
PYTHON = local_runtimes()[0].interpreter  # attempts are named after the Python they used


def _names(recipe):
    return [strategy.name for strategy in install_strategies(recipe)]


def test_strategies_follow_what_the_repository_declares():
    pyproject = '[project]\nname = "x"\n[project.optional-dependencies]\ntest = ["pytest"]\ndocs = ["sphinx"]\n'
    assert _names({"pyproject.toml": pyproject}) == [
        "editable[test]", "editable", "editable-compat", "install", "tests-only"]
    setup_py = "setup(name='x', extras_require={'testing': ['pytest'], 'dev': ['tox']})"
    assert _names({"setup.py": setup_py}) == [
        "editable[testing]", "editable[dev]", "editable", "editable-compat", "install", "dependencies", "tests-only"]
    setup_cfg = "[options.extras_require]\ntests = pytest\n"
    assert _names({"setup.cfg": setup_cfg, "setup.py": "setup()", "requirements-dev.txt": "mock\n"}) == [
        "editable[tests]", "editable+requirements", "editable", "editable-compat", "install", "dependencies",
        "tests-only"]
    assert _names({"requirements.txt": "six\n"}) == ["dependencies", "tests-only"]
    assert _names({}) == ["tests-only"]
    assert _names({"pyproject.toml": "not [toml"}) == ["editable", "editable-compat", "install", "tests-only"]
    hatch = '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n[project]\nname = "x"\n'
    assert _names({"pyproject.toml": hatch}) == ["editable", "install", "tests-only"]


def test_requirements_files_of_every_era_are_read_without_what_no_sandbox_reaches(tmp_path):
    for name in ("requirements.txt", "requirements-dev.txt", "dev-requirements.txt", "test-requirements.txt"):
        (tmp_path / name).write_text(f"pytz  # {name}\n")
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='Old_Pkg')\n")
    assert set(install_recipe(tmp_path)) == {"setup.py", "requirements.txt", "requirements-dev.txt",
                                             "dev-requirements.txt", "test-requirements.txt"}
    dev = ("-r requirements.txt\n-r requirements/missing.txt\n--index-url https://example.org/simple\n"
           "-e git+https://github.com/someone/theme.git#egg=theme\ngit+https://github.com/someone/other.git\n"
           "docs-theme @ https://example.org/theme.zip\n-e .\n.\nold-pkg\n"
           "flake8==2.4.0 \\\n    --hash=sha256:0123\npytest==3.0.2 ; python_version < '4'  # pinned\n"
           "not a requirement!\n")
    recipe = {"setup.py": "setup(name='Old_Pkg')", "dev-requirements.txt": dev,
              "requirements.txt": "simplejson>=2.1\n-r dev-requirements.txt\n"}
    strategies = {s.name: s for s in install_strategies(recipe)}
    assert strategies["editable+requirements"].install_args == (
        "-e", REPO, "simplejson>=2.1", "flake8==2.4.0", 'pytest==3.0.2; python_version < "4"')
    assert strategies["dependencies"].install_args == ("simplejson>=2.1", "flake8==2.4.0",
                                                       'pytest==3.0.2; python_version < "4"')
    nested = {"requirements/test.txt": "-r base.txt\nmock\n", "requirements/base.txt": "six\n-r ../requirements.txt\n",
              "requirements.txt": "attrs\n"}
    assert {s.name: s for s in install_strategies(nested)}["dependencies"].install_args == (
        "six", "attrs", "mock")


def test_only_what_runs_beside_the_working_copy_puts_it_on_the_path():
    strategies = {s.name: s for s in install_strategies({"setup.py": "setup(name='old', install_requires=['six'])",
                                                         "requirements.txt": "mock\n"})}
    assert not strategies["editable"].working_copy_on_path
    assert strategies["install"].install_args == (REPO,) and strategies["install"].working_copy_on_path
    assert strategies["dependencies"].working_copy_on_path and strategies["tests-only"].working_copy_on_path
    assert strategies["dependencies"].install_args == ("six", "mock")
    assert strategies["editable-compat"].install_args == (
        "-e", REPO, "--config-settings-package", "old:editable_mode=compat")


def test_dependencies_are_read_from_the_install_files_without_running_them():
    setup_py = ("import os\nfrom setuptools import setup\nREQS = ['six>=1.4', 'requests']\n"
                "setup(name='old', version=os.environ['V'], install_requires=REQS, tests_require=['mock'],\n"
                "      extras_require={'test': ['nose'], 'docs': ['sphinx']})\n")
    assert declared_dependencies({"setup.py": setup_py}) == ["six>=1.4", "requests", "mock", "nose"]
    assert project_name({"setup.py": setup_py}) == "old"
    setup_cfg = "[metadata]\nname = cfgpkg\n[options]\ninstall_requires =\n    attrs>=17\n    # a comment\n"
    assert declared_dependencies({"setup.cfg": setup_cfg}) == ["attrs>=17"] and project_name(
        {"setup.cfg": setup_cfg}) == "cfgpkg"
    poetry = ('[tool.poetry]\nname = "po"\n[tool.poetry.dependencies]\npython = "^3.7"\nclick = "^7.0"\n'
              '[tool.poetry.dev-dependencies]\npytest = "^6"\nhypothesis = "*"\n')
    assert declared_dependencies({"pyproject.toml": poetry}) == ["click", "hypothesis"]
    assert declared_dependencies({"setup.py": "setup(install_requires=compute())"}) == []
    assert declared_dependencies({"setup.py": "def (:"}) == [] and project_name({"setup.py": "setup(name=x)"}) == ""


def test_what_the_build_needs_is_told_apart_from_what_the_code_imports():
    pyproject = ('[build-system]\nrequires = ["setuptools>=61", "cython", "numpy", "not a requirement!"]\n'
                 '[project]\nname = "x"\ndependencies = ["numpy>=1.20"]\n')
    packages = build_packages({"pyproject.toml": pyproject})
    assert {"setuptools", "wheel", "hatchling", "flit-core", "poetry-core", "cython"} <= set(packages)
    assert "numpy" not in packages and "pytest" not in packages


def test_a_cutoff_is_lifted_a_step_at_a_time_then_dropped():
    as_of = datetime(2014, 6, 1, tzinfo=timezone.utc)
    cutoffs = Cutoffs(as_of, {}, ("setuptools",))
    seen = []
    while cutoffs.lift(["six"]):
        seen.append(cutoffs.lifted["six"])
    assert [s.year if s else None for s in seen] == [2015, 2016, 2018, 2022, None]
    assert "--exclude-newer-package" in cutoffs.args() and "six=false" in cutoffs.args()
    assert cutoffs.args()[:2] == ["--exclude-newer", as_of.isoformat()]
    assert cutoffs.recorded() == {"six": "none"}
    # A cutoff already past today has nothing newer to let in: it is not stepped through.
    recent = Cutoffs(datetime(2026, 6, 1, tzinfo=timezone.utc), {}, ())
    assert recent.lift(["six"]) and recent.lifted["six"] is None and not recent.lift(["six"])


UV_HELD = """error: Failed to resolve requirements from `setup.py` build
  cause: No solution found when resolving: `setuptools>=40.8.0`
  cause: Because only setuptools<=3.8 is available and you require setuptools>=40.8.0, we can conclude that your requirements are unsatisfiable.

hint: `setuptools` was filtered by `exclude-newer` to only include packages uploaded before 2014-06-02T00:00:00Z. The latest version satisfying the requirement is v84.2.1, published at 2026-10-20T19:01:35.678Z. Consider using `exclude-newer-package` to override the cutoff for this package.
"""
UV_DEPENDENCY_BUILD = """error: Failed to build `numpy==1.8.1`
  cause: The build backend returned an error
  cause: Call to `setuptools.build_meta:__legacy__.prepare_metadata_for_build_wheel` failed (exit status: 1)
"""
UV_OWN_BUILD = """   Building file:///workspace/repo
error: The build backend returned an error
  cause: Call to `setuptools.build_meta:__legacy__.build_editable` failed (exit status: 1)
         AttributeError: '_BuildMetaLegacyBackend' object has no attribute 'build_editable'
"""


def test_what_uv_says_decides_which_cutoff_to_lift_and_the_reason():
    build = ("setuptools", "wheel")
    cutoffs = Cutoffs(datetime(2014, 6, 1, tzinfo=timezone.utc), {}, build)
    assert lifts_wanted(UV_HELD, build) == ["setuptools"]
    assert install_failure_reason(UV_HELD, cutoffs) == "build_requirements_unavailable"
    assert install_failure_reason(UV_HELD.replace("setuptools", "six"), cutoffs) == "dependencies_unavailable"
    assert lifts_wanted(UV_DEPENDENCY_BUILD, build) == ["numpy"]
    assert install_failure_reason(UV_DEPENDENCY_BUILD, cutoffs) == "dependency_build_failed"
    assert lifts_wanted(UV_OWN_BUILD, build) == ["setuptools", "wheel"]
    assert install_failure_reason(UV_OWN_BUILD, cutoffs) == "build_failed"
    named_own = "error: Failed to build `old @ file:///workspace/repo`\n  cause: The build backend returned an error\n"
    assert lifts_wanted(named_own, build) == ["setuptools", "wheel"]
    assert lifts_wanted("error: No solution found when resolving dependencies", build) == []
    assert install_failure_reason("error: No solution found when resolving dependencies", cutoffs) == "dependencies_unavailable"
    assert install_failure_reason("error: something else", cutoffs) == "install_failed"


def _failed(strategy, step, reason):
    return Attempt(strategy, [], "failed", step, "", 0.0, reason=reason)


def test_a_failed_build_gives_the_reason_of_the_attempt_that_came_closest():
    attempts = [_failed("3.11 editable", "install", "build_failed"), _failed("3.11 tests-only", "collect",
                                                                          "tests_do_not_collect"),
                _failed("3.9 editable", "install", "dependencies_unavailable")]
    assert EnvironmentFailed(attempts).reason == "tests_do_not_collect"
    assert EnvironmentFailed(attempts[::2]).reason == "dependencies_unavailable"  # the latest of those as far
    assert EnvironmentFailed([Attempt("reuse", [], "failed", "collect", "", 0.0)]).reason == "install_failed"
    assert all(code in ENVIRONMENT_REASONS for code in (
        "no_python", "no_python_for_era", "build_requirements_unavailable", "build_failed", "dependencies_unavailable",
        "dependency_build_failed", "pytest_unavailable", "no_test_runner", "tests_do_not_collect", "no_tests_collected"))


def test_python_2_code_fails_as_code_of_another_era():
    python2 = _failed("3.11 tests-only", "collect", "tests_do_not_collect")
    said = 'print "x"\nSyntaxError: Missing parentheses in call to \'print\'. Did you mean print(...)?'
    python2 = Attempt(python2.strategy, [], "failed", "collect", said, 0.0, reason="tests_do_not_collect", said=said)
    assert EnvironmentFailed(with_era_reason([python2], {}, [Runtime("3.11")])).reason == "no_python_for_era"
    declared = {"setup.py": "setup(python_requires='>=2.6,<3')"}
    plain = _failed("3.11 editable", "install", "build_failed")
    assert EnvironmentFailed(with_era_reason([plain], declared, [Runtime("3.11")])).reason == "no_python_for_era"
    assert EnvironmentFailed(with_era_reason([plain], {}, [Runtime("3.11")])).reason == "build_failed"


# What Python 3.9 printed building a 2012 package, and collecting its tests: only "invalid syntax".
_BUILD_OF_PYTHON2 = """  File "<string>", line 9, in <module>
  File "/workspace/repo/pkg/__init__.py", line 17, in <module>
    from pkg import lexer
  File "/workspace/repo/pkg/lexer.py", line 82
    except Exception, err:
                    ^
SyntaxError: invalid syntax
"""
_COLLECTION_OF_PYTHON2 = """tests/test_format.py:3: in <module>
    from tests.utils import TestCaseBase
E     File "/workspace/repo/tests/utils.py", line 38
E       print fp.getvalue()
E             ^
E   SyntaxError: invalid syntax
"""


def test_python_2_code_is_known_by_the_line_shown_where_the_python_says_only_invalid_syntax():
    assert python2_code(_COLLECTION_OF_PYTHON2) and python2_code(_BUILD_OF_PYTHON2, installing=True)
    assert python2_code("E   TypeError: unsupported operand type(s) for *: 'range' and 'int'")
    assert python2_code("E   TypeError: 'dict_keys' object is not subscriptable")
    assert not python2_code("E   TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'")
    # A dependency's sdist of Python 2 code fails the install without saying anything of the code here.
    dependency = _BUILD_OF_PYTHON2.replace("/workspace/repo/pkg", "/root/.cache/uv/sdists/oldlib/oldlib")
    assert not python2_code(dependency, installing=True)
    assert not python2_code("SyntaxError: Missing parentheses in call to 'print'", installing=True)
    # Python 3 lines of the same look are not Python 2.
    assert not python2_code('  File "/workspace/repo/a.py", line 3\n    print(x, y\n          ^\nSyntaxError: invalid syntax')
    assert not python2_code("E   SyntaxError: invalid syntax\nE       except (A, B) as e:")
    # setup.py as setuptools runs it is "<string>": the repository's own where its own build failed.
    setup_py = ('  File "<string>", line 4\n    print "installing"\n    ^\nSyntaxError: invalid syntax\n'
                "error: Failed to build `oldpkg @ file:///workspace/repo`")
    assert python2_code(setup_py, installing=True)
    assert not python2_code(setup_py.replace("oldpkg @ file:///workspace/repo", "oldlib==0.1"), installing=True)
    assert python2_code('  File "/workspace/repo/a.py", line 2\n    print >>sys.stderr, "x"\nSyntaxError: x')
    # Collecting, what Python said of a dependency's old Python 2 code is that release's, not the code's.
    dependency_collect = ("tests/test_a.py:1: in <module>\n    import oldlib\n"
                          "../env/lib/python3.11/site-packages/oldlib/__init__.py:3: in <module>\n"
                          "    import urlparse\nE   ModuleNotFoundError: No module named 'urlparse'\n")
    assert not python2_code(dependency_collect) and dependency_too_old(dependency_collect) == "oldlib"
    assert python2_code(dependency_collect.replace("../env/lib/python3.11/site-packages/oldlib", "oldlib"))
    assert dependency_too_old(dependency_collect.replace("../env/lib/python3.11/site-packages/oldlib", "oldlib")) == ""


def test_python_2_implicit_relative_imports_are_known_by_the_sibling_the_importing_folder_holds():
    # humanize of 2011: humanize/__init__.py says `from number import *`, and humanize/number.py is there.
    collect = ("tests/test_number.py:3: in <module>\n    import humanize\n"
               "humanize/__init__.py:5: in <module>\n    from number import *\n"
               "E   ModuleNotFoundError: No module named 'number'\n")
    files = frozenset({"humanize/__init__.py", "humanize/number.py", "tests/test_number.py"})
    assert python2_code(collect, files=files)
    assert python2_code(collect.replace("humanize/__init__.py:5: in <module>",
                                        '  File "/workspace/repo/humanize/__init__.py", line 5, in <module>'),
                        files=files, installing=True)
    assert python2_code(collect, files=frozenset({"humanize/__init__.py", "humanize/number/__init__.py"}))
    # A missing dependency, a sibling elsewhere, or a top-level module of its own: not Python 2.
    assert not python2_code(collect, files=frozenset({"humanize/__init__.py", "tests/number.py"}))
    assert not python2_code(collect, files=files | {"number.py"})
    assert not python2_code(collect.replace("humanize/__init__.py:5", "../env/lib/python3.9/site-packages/h/x.py:5"),
                            files=files | {"../env/lib/python3.9/site-packages/h/number.py"})
    attempt = Attempt("python3.9 editable", [], "failed", "collect", collect, 0.0, reason="no_tests_collected",
                      said=collect)
    assert EnvironmentFailed(with_era_reason([attempt], {}, [Runtime("3.9")], files)).reason == "no_python_for_era"
    assert EnvironmentFailed(with_era_reason([attempt], {}, [Runtime("3.9")])).reason == "no_tests_collected"


def test_where_python_2_is_here_the_verdict_on_python_2_code_is_its_attempts():
    on_python3 = Attempt("python3.9 editable", [], "failed", "collect", _COLLECTION_OF_PYTHON2, 0.0,
                         reason="tests_do_not_collect", said=_COLLECTION_OF_PYTHON2)
    on_python2 = Attempt("python2.7 editable", [], "failed", "install", "error: no such distribution", 0.0,
                         reason="build_failed", said="error: no such distribution")
    runtimes = [Runtime("3.9"), Runtime("2.7")]
    marked = with_era_reason([on_python3, on_python2], {}, runtimes)
    assert [attempt.reason for attempt in marked] == ["no_python_for_era", "build_failed"]
    # Python 2's install got less far than Python 3's collection, and is the verdict all the same.
    assert EnvironmentFailed(marked).reason == "build_failed"
    assert EnvironmentFailed(with_era_reason([on_python3], {}, runtimes)).reason == "no_python_for_era"


def test_hostile_output_is_read_in_time_linear_in_its_length():
    # Patterns that could cross lines would rescan every run of blank lines from each of its starts:
    # minutes for this, days for a step's whole output.
    for hostile in ("SyntaxError\n" + "\n" * 200_000, "E" + " " * 200_000 + "\n" * 200_000,
                    "No module named 'imp'\n" + "\n" * 200_000 + "x.py:1: in f\n"):
        assert not python2_code(hostile) and not python2_code(hostile, installing=True)
        removed_in(hostile), removed_by_code(hostile), dependency_too_old(hostile)
    attempt = Attempt("python3.9 editable", [], "failed", "install", _BUILD_OF_PYTHON2, 0.0, reason="build_failed",
                      said=_BUILD_OF_PYTHON2)
    assert EnvironmentFailed(with_era_reason([attempt], {}, [Runtime("3.9")])).reason == "no_python_for_era"


def test_what_a_later_python_removed_from_the_standard_library_is_told_by_its_message():
    assert removed_in("E   AttributeError: module 'collections' has no attribute 'MutableMapping'") == "3.10"
    assert removed_in("ImportError: cannot import name 'Mapping' from 'collections' (/usr/lib/...)") == "3.10"
    assert removed_in("ModuleNotFoundError: No module named 'imp'") == "3.12"
    assert removed_in("ModuleNotFoundError: No module named 'distutils'") == "3.12"
    assert removed_in("AttributeError: module 'inspect' has no attribute 'getargspec'") == "3.11"
    assert removed_in("AttributeError: module 'time' has no attribute 'clock'") == "3.8"
    # Two removals in one output: the earlier Python is the one that matters.
    assert removed_in("No module named 'imp'\nmodule 'base64' has no attribute 'encodestring'") == "3.9"
    # Syntax Python 3.7 stopped accepting; installing, only in the repository's own files.
    bare_generator = ('E     File "/workspace/repo/toolz/functoolz.py", line 414\n'
                      "E       f.__name__ for f in reversed(funcs),\nE   SyntaxError: Generator expression must be "
                      "parenthesized")
    assert removed_in(bare_generator) == "3.7" and removed_by_code(bare_generator, installing=True) == "3.7"
    assert removed_by_code(bare_generator.replace("/workspace/repo/", "/cache/sdists/"), installing=True) == ""
    # A module of the working copy's own with a removed module's name is not the standard library's.
    assert removed_in("No module named 'parser'") == "3.10"
    assert removed_in("No module named 'parser'", frozenset({"parser.py"})) == ""
    own_collections = frozenset({"collections/__init__.py"})
    assert removed_in("module 'collections' has no attribute 'Mapping'", own_collections) == "3.10"
    # Neither a module of the same name's start nor a name the module still has.
    assert removed_in("No module named 'impala'") == ""
    assert removed_in("module 'collections' has no attribute 'OrderedDict2'") == ""
    assert removed_in("cannot import name 'OrderedDict' from 'collections'") == ""


def test_code_reaching_for_a_removed_module_is_of_another_era_only_without_an_older_python():
    said = "E   AttributeError: module 'collections' has no attribute 'Mapping'"
    gone = Attempt("python3.11 tests-only", [], "failed", "collect", said, 0.0, reason="tests_do_not_collect",
                   said=said)
    assert EnvironmentFailed(with_era_reason([gone], {}, [Runtime("3.11")])).reason == "no_python_for_era"
    assert EnvironmentFailed(with_era_reason([gone], {}, [Runtime("3.11"), Runtime("3.10")])).reason \
        == "no_python_for_era"
    # A dependency's build that failed the same way, before its cutoff was lifted, is not the collection.
    lifted = replace(gone, output="$ uv pip install pytest~=6.2.5\n" + gone.output + "\n$ python -m pytest "
                     "--collect-only\nno tests collected in 0.01s", reason="no_tests_collected",
                     said="no tests collected in 0.01s")
    assert EnvironmentFailed(with_era_reason([lifted], {}, [Runtime("3.11")])).reason == "no_tests_collected"
    # Python 3.9 still had it: the failure there (if any) was something else.
    assert EnvironmentFailed(with_era_reason([gone], {}, [Runtime("3.11"), Runtime("3.9")])).reason \
        == "tests_do_not_collect"


def test_generated_files_are_laid_where_the_copy_has_nothing_and_never_through_a_link(tmp_path):
    env = tmp_path / "envs" / "abc"
    env.mkdir(parents=True)
    files = environment_files(env)
    (files / "src" / "pkg").mkdir(parents=True)
    (files / "src" / "pkg" / "_version.py").write_text("version = '1.0'\n")
    (files / "pkg.txt").write_text("generated\n")
    # What changes how pytest or the interpreter starts is never laid, whoever wrote it there.
    for never in ("conftest.py", "src/sitecustomize.py", "evil.pth", "pytest.ini"):
        (files / never).write_text("raise SystemExit('planted')\n")
    (files / "linked").mkdir()
    (files / "linked" / "x.py").write_text("x\n")
    repo = tmp_path / "repo"
    (repo / "src" / "pkg").mkdir(parents=True)
    (repo / "pkg.txt").write_text("the commit's own\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "linked").symlink_to(outside)
    assert environment_files_lay(env, repo) == ["src/pkg/_version.py"]
    assert (repo / "src" / "pkg" / "_version.py").read_text() == "version = '1.0'\n"
    assert (repo / "pkg.txt").read_text() == "the commit's own\n"
    assert list(outside.iterdir()) == []
    assert environment_files_lay(tmp_path / "envs" / "none", repo) == []


def _versions(recipe, as_of, available=("3.13", "3.11", "3.9", "3.8")):
    return [runtime.version for runtime in python_order([Runtime(v) for v in available], recipe, as_of)]


def test_pythons_are_searched_from_the_one_of_the_commits_day():
    assert _versions({}, datetime(2026, 1, 1)) == ["3.13", "3.11", "3.9", "3.8"]
    # In mid-2021 the newest Python was 3.9: try it, then older ones, then those that came later.
    assert _versions({}, datetime(2021, 6, 1)) == ["3.9", "3.8", "3.11", "3.13"]
    assert _versions({}, datetime(2015, 1, 1)) == ["3.8", "3.9", "3.11", "3.13"]
    # Python 2 comes last whatever the date: the builder turns to it for code no Python 3 runs.
    assert _versions({}, datetime(2012, 1, 1), ("3.11", "2.7", "3.9")) == ["3.9", "3.11", "2.7"]
    assert _versions({"setup.py": "setup(python_requires='>=2.7,<3')"}, datetime(2012, 1, 1),
                     ("3.11", "2.7", "3.9")) == ["2.7"]


def test_the_pythons_a_repository_declares_come_first_and_alone():
    pyproject = '[project]\nname = "x"\nrequires-python = ">=3.8,<3.10"\n'
    assert _versions({"pyproject.toml": pyproject}, datetime(2026, 1, 1)) == ["3.9", "3.8"]
    setup_cfg = "[options]\npython_requires = >=3.10\n"
    assert _versions({"setup.cfg": setup_cfg}, datetime(2021, 6, 1)) == ["3.11", "3.13"]
    setup_py = "setup(name='x', python_requires='>=3.9.1')"
    assert _versions({"setup.py": setup_py}, datetime(2026, 1, 1)) == ["3.13", "3.11", "3.9"]
    # Nothing available fits: every Python is tried rather than none.
    assert _versions({"setup.py": "setup(python_requires='<3')"}, datetime(2026, 1, 1)) == [
        "3.13", "3.11", "3.9", "3.8"]
    assert declared_python({"setup.py": "setup(python_requires='not a specifier')"}) is None
    assert declared_python({"pyproject.toml": "[project\n"}) is None


def test_the_recipe_key_follows_the_install_files_only():
    assert recipe_key({"setup.py": "a"}) == recipe_key({"setup.py": "a"}) != recipe_key({"setup.py": "b"})


@pytest.fixture(scope="module")
def place(open_module_folder):
    return open_module_folder


@pytest.fixture(scope="module")
def sample(place):
    return place / "sample", sample_repo_write(place / "sample")


def _working_copy(place: Path, repo: Path, sha: str, name: str) -> Path:
    work = place / name
    (work / "repo").mkdir(parents=True)
    subprocess.run(f"git -C {repo} archive {sha} | tar -x -C {work / 'repo'}", shell=True, check=True)
    return work


def _builder(place: Path) -> EnvironmentBuilder:
    return EnvironmentBuilder(env_root=place / "envs", uv=UV)


def test_the_sample_repository_builds_and_its_environment_is_shared(place, sample):
    repo, commits = sample
    built = _builder(place).build(_working_copy(place, repo, commits[-1].sha, "last"), as_of=AS_OF)
    assert [(a.strategy, a.status) for a in built.attempts] == [(f"{PYTHON} editable[test]", "ok")]
    assert "pytest==" in built.lock and built.python_version.startswith("3.")
    assert (built.path / "bin" / "python").exists() and built.path.parent == place / "envs"

    again = _builder(place).build(_working_copy(place, repo, commits[-1].sha, "last-again"), as_of=AS_OF)
    assert again.key == built.key and again.path == built.path

    earlier = [c for c in commits if c.kind == "fix_with_test"][2]
    reuse = _builder(place).reuse_check(built, _working_copy(place, repo, earlier.sha, "earlier"))
    assert reuse.status == "ok", reuse.output
    assert "collected" in reuse.output or "tests collected" in reuse.output or "::" in reuse.output


def test_an_install_that_fails_records_every_attempt(place):
    work = place / "broken"
    (work / "repo").mkdir(parents=True)
    (work / "repo" / "setup.py").write_text("raise SystemExit('this package refuses to install')\n")
    with pytest.raises(EnvironmentFailed) as failed:
        _builder(place).build(work, as_of=AS_OF)
    attempts = failed.value.attempts
    assert [a.strategy for a in attempts] == [f"{PYTHON} {name}" for name in (
        "editable", "editable-compat", "install", "tests-only")]
    for attempt in attempts[:3]:
        assert (attempt.step, attempt.status, attempt.reason) == ("install", "failed", "build_failed")
        assert "this package refuses to install" in attempt.output
    # The build failed: tried again with the build's packages as of today (a step past the date is
    # past today), and no further.
    installs = attempts[0].commands[1:]
    assert len(installs) == 2 and "setuptools=" not in installs[0] and "setuptools=false" in installs[1]
    assert attempts[0].lifted["setuptools"] == "none" and "six" not in attempts[0].lifted
    assert (attempts[-1].step, attempts[-1].reason) == ("collect", "no_tests_collected") and attempts[-1].on_path
    assert failed.value.reason == "build_failed"


def test_code_using_what_this_python_removed_stops_the_search_on_it(place):
    work = place / "removed"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "setup.py").write_text("from setuptools import setup\nsetup(name='old', py_modules=['old'])\n")
    (work / "repo" / "old.py").write_text("import collections\n\n\nclass Store(collections.MutableMapping):\n"
                                           "    pass\n")
    (work / "repo" / "tests" / "test_old.py").write_text("import old\n\n\ndef test_old():\n    assert old.Store\n")
    with pytest.raises(EnvironmentFailed) as failed:
        _builder(place).build(work, as_of=AS_OF)
    # The first strategy installed and failed to collect for want of what Python 3.10 removed: no other
    # strategy on this Python (or a later one) can change that.
    (attempt,) = failed.value.attempts
    assert (attempt.strategy, attempt.step) == (f"{PYTHON} editable", "collect"), attempt.output
    assert "MutableMapping" in attempt.output
    assert failed.value.reason == "no_python_for_era"


def test_code_importing_pkg_resources_gets_the_setuptools_a_virtualenv_of_its_day_had(place):
    work = place / "pkg-resources"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "tests" / "test_version.py").write_text(
        "import pkg_resources\n\n\ndef test_version():\n    assert pkg_resources.parse_version('1.0')\n")
    built = _builder(place).build(work, as_of=datetime(2020, 3, 9, tzinfo=timezone.utc))
    assert [(a.strategy.split(" ", 1)[1], a.status) for a in built.attempts][-2:] == [
        ("tests-only pytest~=6.2.5", "failed"), ("tests-only setuptools pytest~=6.2.5", "ok")], \
        [a.strategy for a in built.attempts]
    assert "No module named 'pkg_resources'" in built.attempts[-2].output
    assert "setuptools==" in built.lock


def test_old_dev_requirements_install_without_their_vcs_lines_and_their_pytest_plugins_go_with_pytest(place):
    work = place / "dev-requirements"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "setup.py").write_text("from setuptools import setup\nsetup(name='old', py_modules=['old'])\n")
    (work / "repo" / "old.py").write_text("VALUE = 1\n")
    # marshmallow's of 2014: pytest-xdist of that year fails to load in any pytest that runs here, and
    # a docs theme comes from GitHub, which no sandbox reaches.
    (work / "repo" / "dev-requirements.txt").write_text(
        "pytest\npytest-xdist  # for test watching\nsimplejson\n"
        "-e git+https://github.com/someone/theme.git#egg=theme\n")
    (work / "repo" / "tests" / "test_old.py").write_text(
        "import simplejson\nimport old\n\n\ndef test_value():\n    assert simplejson.loads('1') == old.VALUE\n")
    built = _builder(place).build(work, as_of=datetime(2014, 8, 10, tzinfo=timezone.utc))
    kept = built.attempts[-1]
    assert kept.strategy.startswith(f"{PYTHON} editable+requirements pytest~="), [a.strategy for a in built.attempts]
    assert "pytest-xdist==" in built.lock and "simplejson==" in built.lock and "github" not in kept.commands[1]
    # Lifted with pytest (and past it, where what it needs of that day is held to 2014), never left at 2014.
    assert kept.lifted["pytest-xdist"] in (kept.lifted["pytest"], "none") and "simplejson" not in kept.lifted


def test_a_dependency_older_than_the_python_has_its_cutoff_lifted_until_it_imports(place):
    work = place / "aged-dependency"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "requirements.txt").write_text("pytz\n")
    (work / "repo" / "tests" / "test_tz.py").write_text(
        "import pytz\n\n\ndef test_utc():\n    assert pytz.utc.zone == 'UTC'\n")
    built = _builder(place).build(work, as_of=datetime(2015, 1, 1, tzinfo=timezone.utc))
    # pytz of 2014 reads collections.Mapping, which Python 3.10 removed: its cutoff moves a step at a
    # time until a release that imports on this Python, and only pytz's.
    aged = [a for a in built.attempts if "pytz (later)" in a.strategy]
    assert aged and aged[-1].status == "ok" and built.attempts[-1] is aged[-1], [a.strategy for a in built.attempts]
    before = built.attempts[built.attempts.index(aged[0]) - 1]
    assert "'collections'" in before.output and "site-packages/pytz/" in before.output
    assert set(aged[-1].lifted) - set(before.lifted) == {"pytz"}
    assert aged[-1].lifted["pytz"] > "2015-12-31"


def test_a_commit_with_no_test_modules_at_all_is_not_tried_with_every_strategy(place):
    work = place / "no-tests"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "tests" / "__init__.py").write_text("")
    (work / "repo" / "setup.py").write_text("from setuptools import setup\nsetup(name='bare', py_modules=['bare'])\n")
    (work / "repo" / "bare.py").write_text("VALUE = 1\n")
    with pytest.raises(EnvironmentFailed) as failed:
        _builder(place).build(work, as_of=AS_OF)
    (attempt,) = failed.value.attempts
    assert (attempt.strategy, attempt.reason) == (f"{PYTHON} editable", "no_tests_collected")
    assert failed.value.reason == "no_tests_collected"


def test_a_setup_cfg_pytest_section_becomes_an_ini_only_where_pytest_would_have_read_it():
    files = {"setup.cfg": "[metadata]\nname = x\n\n[pytest]\npython_files = check_*.py\naddopts =\n  -v\n"
                          "  --strict\nnorecursedirs = %(here)s build\n"}
    assert legacy_pytest_ini(files.get, "/w/repo") == ("[pytest]\npython_files = check_*.py\naddopts = -v\n    --strict\n"
                                            "norecursedirs = %(here)s build\n")
    for first in ({"pytest.ini": ""}, {".pytest.ini": "[pytest]\n"}, {"tox.ini": "[tox]\n[pytest]\nx = 1\n"},
                  {"pyproject.toml": "[tool.pytest.ini_options]\nx = 1\n"}):
        assert legacy_pytest_ini({**files, **first}.get, "/w/repo") is None, first
    assert legacy_pytest_ini({"setup.cfg": "[tool:pytest]\nx = 1\n"}.get, "/w/repo") is None
    assert legacy_pytest_ini({"setup.cfg": "[tool:pytest]\nx = 1\n[pytest]\ny = 2\n"}.get, "/w/repo") is None
    assert legacy_pytest_ini({"setup.cfg": "[pytest\nnot = ini\n"}.get, "/w/repo") is None
    assert legacy_pytest_ini({"setup.cfg": "[pytest]\n  bad continuation\n= nothing\n"}.get, "/w/repo") is None
    assert legacy_pytest_ini({"tox.ini": "[tox]\n"}.get, "/w/repo") is None
    # Paths pytest reads from the ini's own folder point into the repository still.
    assert legacy_pytest_ini({"setup.cfg": "[pytest]\npython_paths = src lib\n  /abs\n"}.get, "/w/repo") == (
        "[pytest]\npython_paths = /w/repo/src /w/repo/lib /abs\n")


def test_a_legacy_setup_cfg_pytest_section_is_honoured_by_the_build_and_by_runs(place):
    work = place / "legacy-setup-cfg"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "setup.cfg").write_text("[pytest]\npython_files = check_*.py\n")
    (work / "repo" / "tests" / "check_math.py").write_text("def test_adds():\n    assert 1 + 1 == 2\n")
    built = _builder(place).build(work, as_of=datetime(2016, 9, 20, tzinfo=timezone.utc))
    attempt = built.attempts[-1]
    assert attempt.status == "ok" and "tests/check_math.py::test_adds" in attempt.output, attempt.output
    assert f"-c {WORKSPACE}/legacy-setup-cfg.ini --rootdir {REPO}" in attempt.commands[-1]
    # A run through the report plugin reads the same section, from the copy it runs in.
    run = pytest_run(sandbox=LocalSandbox(read_only=[(built.path, ENV)]), workdir=work, repo_dir=work / "repo",
                     python=f"{ENV}/bin/python", selection=[], per_test_timeout=30, limits=Limits(wall_seconds=120),
                     mount_at=WORKSPACE)
    assert run.outcomes == {"tests/check_math.py::test_adds": "PASSED"}, run.output


def test_a_link_in_place_of_setup_cfg_is_not_read_for_its_pytest_section(place):
    secret = place / "host-secret.cfg"
    secret.write_text("[pytest]\npassword = hunter2\n")
    work = place / "legacy-link"
    (work / "repo").mkdir(parents=True)
    (work / "repo" / "setup.cfg").symlink_to(secret)
    (work / LEGACY_INI).symlink_to(place / "host-file-to-clobber")
    assert legacy_config_options(work) == []
    (work / "repo" / "setup.cfg").unlink()
    (work / "repo" / "setup.cfg").write_text("[pytest]\nx = 1\n")
    assert legacy_config_options(work)[:2] == ["-c", f"{WORKSPACE}/{LEGACY_INI}"]
    assert not (work / LEGACY_INI).is_symlink() and not (place / "host-file-to-clobber").exists()


def test_a_pytest_the_requirements_pin_gives_way_to_the_one_the_attempt_asks_for(place):
    work = place / "pinned-pytest"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "setup.py").write_text("from setuptools import setup\nsetup(name='pinned', py_modules=['pinned'])\n")
    (work / "repo" / "pinned.py").write_text("VALUE = 1\n")
    (work / "repo" / "requirements-dev.txt").write_text("pytest==3.0.2\niniconfig\n")
    (work / "repo" / "tests" / "test_value.py").write_text("import pinned\n\n\ndef test_value():\n"
                                                           "    assert pinned.VALUE == 1\n")
    built = _builder(place).build(work, as_of=datetime(2022, 1, 10, tzinfo=timezone.utc))
    assert built.attempts[0].strategy == f"{PYTHON} editable+requirements" and built.attempts[-1].status == "ok", \
        [(a.strategy, a.reason) for a in built.attempts]
    assert "pytest==3.0.2" not in built.lock and "iniconfig==" in built.lock
    assert f"--override {WORKSPACE}/pytest-override.txt" in built.attempts[-1].commands[1]


def test_tests_that_do_not_collect_fail_the_attempt(place):
    work = place / "uncollectable"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "tests" / "test_x.py").write_text("def test_x(:\n")
    with pytest.raises(EnvironmentFailed) as failed:
        _builder(place).build(work, as_of=AS_OF)
    (attempt,) = failed.value.attempts
    assert attempt.strategy == f"{PYTHON} tests-only" and attempt.step == "collect"
    assert "SyntaxError" in attempt.output or "error" in attempt.output.lower()


def test_a_build_that_swaps_its_environment_for_a_link_is_refused(place):
    secret = place / "secret-folder"
    secret.mkdir(mode=0o700)
    os.chown(secret, 4242, 4242)
    work = place / "swapper"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "tests" / "conftest.py").write_text(
        "import os, shutil\nshutil.rmtree('/workspace/env', ignore_errors=True)\n"
        f"os.symlink({str(secret)!r}, '/workspace/env')\n")
    (work / "repo" / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    with pytest.raises(EnvironmentFailed) as failed:
        _builder(place).build(work, as_of=AS_OF)
    assert failed.value.attempts[-1].step in {"collect", "keep"}
    assert os.stat(secret).st_uid == 4242 and stat.S_IMODE(os.stat(secret).st_mode) == 0o700
    assert not any(path.is_symlink() for path in (place / "envs").glob("*")) if (place / "envs").exists() else True


def test_a_file_hard_linked_into_the_working_copy_is_copied_when_the_environment_is_kept(place):
    from worker.engine.env.files import environment_seal

    env = place / "linked-env"
    (env / "lib").mkdir(parents=True)
    outside = place / "linked-outside.py"
    outside.write_text("original\n")
    os.link(outside, env / "lib" / "sitecustomize.py")
    environment_seal(env)
    outside.write_text("changed from the working copy\n")
    assert (env / "lib" / "sitecustomize.py").read_text() == "original\n"
    assert os.stat(env / "lib" / "sitecustomize.py").st_nlink == 1


def test_old_code_gets_the_older_python_it_needs_from_the_docker_backend(place, docker_builder_make):
    runtimes = docker_runtimes(default_images())
    assert {"3.11", "3.9"} <= {runtime.version for runtime in runtimes}, \
        "make test builds commitgym-base:bookworm and commitgym-base:bullseye (deploy/dev/docker.sh)"
    work = place / "old-code"
    (work / "repo" / "tests").mkdir(parents=True)
    # collections.Mapping went away in Python 3.10.
    (work / "repo" / "tests" / "test_old.py").write_text(
        "from collections import Mapping\n\n\ndef test_mapping():\n    assert isinstance({}, Mapping)\n")
    builder = docker_builder_make(place / "envs-docker", runtimes=runtimes)
    built = builder.build(work, as_of=AS_OF)
    assert [(a.strategy, a.step, a.status) for a in built.attempts] == [
        ("python3.11 tests-only", "collect", "failed"), ("python3.9 tests-only", "", "ok")]
    assert "Mapping" in built.attempts[0].output
    assert built.python_version.startswith("3.9.") and built.image == "commitgym-base:bullseye"
    assert builder.runs(built)
    run = builder.sandbox([(built.path, ENV)], image=built.image).run(
        [f"{ENV}/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider"], workdir=work, mount_at=WORKSPACE,
        cwd=REPO)
    assert run.ok and b"1 passed" in run.output, run.output


def test_a_dependency_that_broke_later_is_held_back_until_the_tests_collect(place):
    work = place / "held-back"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "requirements.txt").write_text("itsdangerous\n")
    # itsdangerous 2.1 removed this class; code written against 2.0 still imports it.
    (work / "repo" / "tests" / "test_token.py").write_text(
        "from itsdangerous import TimedJSONWebSignatureSerializer\n\n\n"
        "def test_token():\n    assert TimedJSONWebSignatureSerializer('k').loads(\n"
        "        TimedJSONWebSignatureSerializer('k').dumps({'a': 1})) == {'a': 1}\n")
    built = _builder(place).build(work, as_of=AS_OF)
    *held, last = built.attempts
    assert (last.strategy, last.status) == (f"{PYTHON} dependencies itsdangerous<2.1", "ok")
    assert held and all(a.step == "collect" and "TimedJSONWebSignatureSerializer" in a.output for a in held)
    assert held[0].strategy == f"{PYTHON} dependencies"
    assert "itsdangerous==2.0." in built.lock


def test_an_import_error_in_the_repositorys_own_code_holds_nothing_back(place):
    work = place / "own-error"
    (work / "repo" / "mypkg").mkdir(parents=True)
    (work / "repo" / "mypkg" / "__init__.py").write_text("")
    (work / "repo" / "tests").mkdir()
    (work / "repo" / "tests" / "test_x.py").write_text("from mypkg import missing\n\n\ndef test_x():\n    pass\n")
    with pytest.raises(EnvironmentFailed) as failed:
        _builder(place).build(work, as_of=AS_OF)
    assert [a.strategy for a in failed.value.attempts] == [f"{PYTHON} tests-only"]


def test_what_a_sandbox_left_is_read_without_following_a_swapped_working_copy(tmp_path):
    from worker.engine.env.files import generated_files_keep, working_copy_files

    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "shadow").write_text("TOPSECRET\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "repo").symlink_to(secret)  # the build swapped its working copy for a link
    assert working_copy_files(work / "repo") == set()
    generated_files_keep(work / "repo", ["shadow"], tmp_path / "kept.files")
    assert list((tmp_path / "kept.files").iterdir()) == []


def test_skip_reasons_never_become_options_or_the_standard_library():
    missing = {"_tkinter": "could not import '_tkinter'", "-e": "x", "json": "could not import 'json'",
               "yaml": "could not import 'yaml'", "wcwidth": "could not import 'wcwidth'"}
    recipe = {"pyproject.toml": '[project]\nname = "x"\n[project.optional-dependencies]\nwide = ["wcwidth>=0.2"]\n'}
    assert optional_requirements(missing, recipe) == [
        ("pyyaml", "tests skipped: could not import 'yaml'"),
        ("wcwidth>=0.2", "an extra of the package; tests skipped: could not import 'wcwidth'")]
    assert missing_modules("SKIPPED [2] tests/test_x.py:3: could not import 'a.b': No module named 'a'\n"
                            "SKIPPED [1] tests/test_y.py:9: PyYAML is not installed\n"
                            "SKIPPED [1] tests/test_z.py:1: unrelated reason\n") == {
        "a": "could not import 'a.b': No module named 'a'", "PyYAML": "PyYAML is not installed"}


def test_untrusted_install_files_of_any_shape_are_read_without_a_crash():
    for pyproject in ('project = 1\n', '[project]\ndependencies = "abc"\noptional-dependencies = [1]\n',
                      '[tool]\npoetry = "x"\n', '[build-system]\nrequires = "setuptools"\nbuild-backend = 3\n'):
        recipe = {"pyproject.toml": pyproject, "setup.py": "(" * 200_000}
        assert isinstance(declared_dependencies(recipe), list) and isinstance(install_strategies(recipe), list)
        assert isinstance(build_packages(recipe), list) and project_name(recipe) in ("", "x")
    assert declared_dependencies({"pyproject.toml": '[project]\ndependencies = "abc"\n'}) == ["abc"]


def test_dates_round_up_the_same_whatever_the_time_zone():
    from datetime import timedelta

    from worker.engine.env.resolve import date_rounded_up

    utc = datetime(2020, 3, 4, 23, 30, tzinfo=timezone.utc)
    east = utc.astimezone(timezone(timedelta(hours=9)))  # already the 5th there
    assert date_rounded_up(utc, 7) == date_rounded_up(east, 7) >= utc
    assert date_rounded_up(utc, 7) - utc < timedelta(days=7) and date_rounded_up(utc, 0) == utc


def test_nose_era_tests_in_modules_pytest_does_not_look_for_are_collected_from_their_folder(place):
    work = place / "nose-era"
    (work / "repo" / "tests").mkdir(parents=True)
    (work / "repo" / "tests" / "__init__.py").write_text("")
    (work / "repo" / "tests" / "number.py").write_text(
        "import unittest\n\n\nclass NumberTests(unittest.TestCase):\n    def test_one(self):\n"
        "        self.assertEqual(1 + 1, 2)\n")
    builder = _builder(place)
    built = builder.build(work, as_of=AS_OF)
    assert built.suite_args == ("-o", "python_files=*.py", "tests")
    assert "no tests" in built.attempts[-1].output and "tests/number.py::NumberTests::test_one" in (
        built.attempts[-1].output)
    run = builder.sandbox([(built.path, ENV)]).run(
        [f"{ENV}/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *built.suite_args], workdir=work,
        mount_at=WORKSPACE, cwd=REPO)
    assert run.ok and b"1 passed" in run.output, run.output
    assert builder.reuse_check(built, work).status == "ok"


def test_a_tests_module_of_a_package_is_collected_as_nose_found_it(place):
    work = place / "nose-era-module"
    (work / "repo" / "oldlib").mkdir(parents=True)
    (work / "repo" / "oldlib" / "__init__.py").write_text("def double(x):\n    return 2 * x\n")
    (work / "repo" / "oldlib" / "tests.py").write_text(
        "import unittest\n\nfrom oldlib import double\n\n\nclass DoubleTests(unittest.TestCase):\n"
        "    def test_double(self):\n        self.assertEqual(double(2), 4)\n")
    (place / "elsewhere").mkdir()
    (place / "elsewhere" / "helpers.py").write_text("")
    (work / "repo" / "test").symlink_to(place / "elsewhere")  # a link is never taken for a test folder
    assert nose_era_test_folders(work / "repo") == ["oldlib/tests.py"]
    built = _builder(place).build(work, as_of=AS_OF)
    assert built.suite_args == ("-o", "python_files=*.py", "oldlib/tests.py")
    assert "oldlib/tests.py::DoubleTests::test_double" in built.attempts[-1].output


def test_two_builds_of_one_environment_at_once_leave_one_whole_environment(tmp_path):
    """Two workers build the same environment (same key) at the same time: the first renamed into place
    stays whole; the second's is dropped, never moved inside it."""
    from worker.engine.env.builder import rename_unless_there

    target = tmp_path / "abc"
    for name in ("first", "second"):
        (tmp_path / name / "bin").mkdir(parents=True)
        (tmp_path / name / "bin" / "python").write_text(name)
    rename_unless_there(tmp_path / "first", target)
    rename_unless_there(tmp_path / "second", target)
    assert sorted(p.name for p in target.iterdir()) == ["bin"] and (target / "bin" / "python").read_text() == "first"
