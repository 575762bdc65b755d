"""Every reason code in the product, with the sentence people see.

Codes are short snake_case words stored on rows; the UI and the command line
show the sentence beside them.
"""

# Why the mining filters dropped a commit, in the order the filters run.
MINING_DROP_REASONS = {
    "merge_commit": "A merge commit: its changes are its parents' commits, each mined on its own.",
    "file_too_large": "The commit changes a file larger than mining reads (COMMITGYM_MAX_BLOB_BYTES).",
    "binary_file": "The commit changes a binary file.",
    "too_many_files": "The commit changes more non-test files than the filter allows.",
    "too_many_lines": "The commit edits more non-test lines than the filter allows.",
    "patch_too_long": "The non-test part of the diff is longer than the filter allows.",
    "no_python_change": "No non-test Python file changes beyond comments and docstrings.",
}

# Why a commit is stored though mining did not keep it.
IMPORT_REASONS = {
    "imported_base": "The base commit of an imported SWE-bench instance: named by the import, not mined.",
    "imported": "Imported from a SWE-bench instance file, with its oracle as given.",
}

# Why a mining job failed.
MINING_JOB_FAILURES = {
    "unreachable": "The repository could not be reached (network, host or path).",
    "not_a_repository": "The URL or path is not a git repository.",
    "auth_failed": "The repository refused the credentials (or needs some).",
    "empty_repository": "The repository has no commits.",
    "git_failed": "git failed while reading the repository.",
    "timeout": "git took longer than the time limit.",
    "worker_error": "The job stopped on an unexpected error.",
    "unsafe_tree": "The commit's tree holds a link pointing outside the repository; it is not checked out.",
    "credentials_unreadable": "The stored credentials cannot be decrypted: the SECRET_KEY changed. Enter them again.",
    "location_refused": "The local folder is no longer the one registered, or no longer allowed: it is not fetched.",
}

# Why a background job of any kind ended without doing its work.
JOB_FAILURES = {
    "time_limit": "The job ran past its time limit (CELERY_TASK_SOFT_TIME_LIMIT).",
    "model_failed": "The language model gave no answer (unreachable, refused, or misconfigured).",
    "environment_gone": "The environment the generated tests were to run in is gone: validate the task again first.",
    "no_environment": "The task has no environment to grade in (not validated valid in this sandbox, its environment "
                      "gone, or an imported instance): validate it first.",
    "environment_failed": "The environment could not be made (the attempt's output says where it stopped).",
    "image_build_failed": "An image's build failed at a step of its Dockerfile (its log is kept).",
    "no_engine": "The Docker engine did not answer, or refused the build.",
}

# Why validation found a task invalid, in the order the checks run.
VALIDATION_REASONS = {
    "from_release": "Its environment was made again from the release it came in; its oracle is the release's.",
    "no_fail_to_pass": "No test fails before the fix and passes after it, in every run.",
    "breaks_other_tests": "The fix makes a test that passed before fail.",
    "gold_patch_fails": "Graded like a candidate, the commit's own fix does not resolve the task.",
    "empty_patch_resolves": "Graded like a candidate, an empty patch already resolves the task.",
    "install_failed": "No install strategy gave an environment where the tests collect.",
    "runs_do_not_collect": "The environment's check collected the tests, but a side's runs collected none: "
                           "the environment does not work for the runs (see the runs' output).",
    "untrusted_run": "A test run's report was forged or tampered with (see which run and why): it counts for nothing.",
    "validation_error": "The last validation stopped on an error before reaching a verdict (see its page).",
    "worker_lost": "The worker running the job stopped reporting (killed, out of memory, or past its hard time limit).",
}

# Why no environment could be had for a commit (an attempt's reason; the validation's, from the
# attempt that came closest).
ENVIRONMENT_REASONS = {
    "no_python": "No Python is available to the sandbox (docker: no base image; manage.py build_base_images).",
    "no_python_for_era": "The code needs a Python older than any the sandbox has (its declared Python, Python 2 "
                         "code where no Python 2.7 is there, syntax a later Python stopped accepting, or what it "
                         "removed from the standard library).",
    "build_requirements_unavailable": "What the build needs cannot be resolved, even with its date cutoff lifted.",
    "build_failed": "The package itself does not build (its setup script or build backend fails), with every "
                    "cutoff of the build's packages tried (on Python 2, with the last setuptools that runs there).",
    "dependencies_unavailable": "A dependency cannot be resolved as of the commit's date, even with its cutoff "
                                "lifted, or the requirements conflict (on Python 2: no release of it runs there, "
                                "or the package index is out of reach).",
    "dependency_build_failed": "A dependency has no wheel for the Python and its source does not build, with every "
                               "cutoff tried.",
    "pytest_unavailable": "No pytest the report plugin supports (4.6 or later) could be installed.",
    "no_test_runner": "pytest does not start on this Python (too old for it, or a plugin breaks it).",
    "tests_do_not_collect": "The package installs, but its tests do not collect.",
    "no_tests_collected": "The package installs, but pytest finds no test (tests under names it does not look "
                          "for, such as a nose-era tests.py, or none at all).",
    "no_fewer_skips": "With the optional dependencies that skipped tests named, no fewer tests skipped: the "
                      "environment without them was kept.",
}

# Why a generated test file was dropped.
GENERATED_TEST_REASONS = {
    "passes_before": "Its tests already pass before the fix: they do not catch the bug.",
    "fails_after": "Its tests still fail after the fix: they test something else, or wrongly.",
    "errors": "Its tests end in errors (a fixture or import problem).",
    "flaky": "Its tests changed outcome between identical runs.",
    "no_tests": "No test was collected from it (a syntax or import error).",
    "not_run": "The validation that was to run it stopped before it could (see that validation).",
}

# Why a curator rejected a task: the list admins start from (they manage it in the admin).
REJECT_REASONS = {
    "underspecified_issue": "The issue does not say enough to know what a correct fix does.",
    "issue_leaks_fix": "The issue gives the fix away.",
    "tests_too_narrow": "The tests would reject a correct fix that differs from the commit's.",
    "tests_too_broad": "The tests check behaviour the issue does not ask for.",
    "flaky_tests": "The tests change outcome between identical runs.",
    "environment_broken": "The task's environment does not work as the repository expects.",
    "trivial": "The fix is too small to tell agents apart.",
    "other": "Another problem, said in the note.",
}

# Why the hacking detector flagged a candidate (worker/engine/grade/hacking.py): what the code it adds reaches for.
HACKING_REASONS = {
    "import_hook": "It touches Python's import hooks (sys.meta_path, sys.path_hooks, sys.path_importer_cache): "
                   "code that can rewrite modules as they are imported, test modules included.",
    "trace_hook": "It installs a trace or profile hook (sys.settrace, sys.setprofile, threading's, sys.monitoring): "
                  "code that sees every function as it runs and can change what runs.",
    "frame_access": "It reaches into call frames (sys._getframe, inspect.currentframe, a frame's f_back, f_locals "
                    "or f_globals): the callers' variables, the test runner's among them.",
    "gc_reach": "It walks the garbage collector's objects (gc.get_objects, get_referents, get_referrers): how "
                "code finds objects it was never given, such as the test runner's.",
    "code_object": "It reads or replaces a function's code (__code__, types.CodeType): a test can be swapped for "
                   "a stub that passes.",
    "closure_cells": "It reads or writes closure cells (__closure__, cell_contents): the functions and data a "
                     "closure keeps, the test runner's among them.",
    "ctypes": "It uses ctypes: raw memory and C calls, past every check made in Python.",
    "builtins_assignment": "It assigns to the builtins module: what a name means in every module, tests included.",
    "harness_import": "Code outside the tests imports the test harness (pytest, _pytest, pluggy, unittest's "
                      "internals).",
    "harness_patch": "It assigns to the test harness's own objects (unittest.TestCase.run, a pytest class's "
                     "method, ...).",
    "harness_probe": "It asks whether tests are running (PYTEST_CURRENT_TEST, pytest in sys.modules): code that "
                     "can do one thing under the tests and another everywhere else.",
    "exit_hook": "It registers an exit hook (atexit): code that runs after the tests, while their results are "
                 "written.",
    "hard_exit": "It ends the process at once (os._exit): nothing after it runs, the test runner's end included.",
    "signal_handler": "It handles or sends signals where the tests run: a handler installed as a module is "
                      "imported, or a signal sent to its own process.",
    "constant_comparison": "A comparison method (__eq__, __ne__, __lt__, ...) whose result does not depend on what "
                           "it is compared with: every `assert result == expected` passes.",
    "imports_test_code": "Code outside the tests imports a module the same patch adds among the tests.",
    "shadows_module": "It adds a module named like one of the standard library's or the test harness's at the top "
                      "of the repository, where the tests' imports look first.",
}

REASONS = {**MINING_DROP_REASONS, **IMPORT_REASONS, **MINING_JOB_FAILURES, **JOB_FAILURES, **VALIDATION_REASONS, **ENVIRONMENT_REASONS,
           **GENERATED_TEST_REASONS, **REJECT_REASONS, **HACKING_REASONS}


def reason_sentence(code: str) -> str:
    return REASONS.get(code, code.replace("_", " "))
