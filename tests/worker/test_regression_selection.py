"""Which existing test files the execution verifier runs as regression tests: those near the code
the candidates touch, most related first."""

from worker.engine.verify.regression import imported_modules, module_name, regression_test_files

FILES = {
    "tests/test_slug.py": "from textkit.slug import slugify\n",  # imports the module: first
    "tests/test_wrap.py": "import textkit\n",  # imports the package only: third
    "tests/test_cache.py": "from textkit.cache import LRUCache\n",  # another module of the package: last
    "tests/test_other.py": "from otherkit.slug import slugify\n",  # another package: unrelated
    "tests/slug_test.py": "import os\n",  # named after the module: second
    "tests/test_hidden.py": "from textkit.slug import slugify\n",  # the task's own test: never
    "tests/test_modules.py": "from textkit import slug\n",  # `from pkg import mod`: imports the module
    "tests/conftest.py": "from textkit.slug import slugify\n",  # not a test file of its own
    "textkit/slug.py": "import re\n",
    "tests/test_broken.py": "from textkit.slug import (\n",  # does not parse: no imports seen
}


def test_related_test_files_come_most_related_first_and_never_the_hidden_ones():
    chosen = regression_test_files(FILES, ["textkit/slug.py"], hidden=["tests/test_hidden.py"])
    assert chosen == ["tests/test_modules.py", "tests/test_slug.py", "tests/slug_test.py", "tests/test_wrap.py",
                      "tests/test_cache.py"]


def test_module_names_and_imports():
    assert module_name("textkit/slug.py") == "textkit.slug"
    assert module_name("src/pkg/__init__.py") == "pkg" and module_name("lib/pkg/mod.py") == "pkg.mod"
    assert imported_modules("import a.b, c\nfrom d import e\nfrom . import f\nfrom g import *\n") == {
        "a.b", "c", "d", "d.e", "g"}
    assert imported_modules("def (") == set()


def test_a_change_to_tests_or_other_files_only_selects_nothing():
    assert regression_test_files(FILES, ["tests/test_slug.py", "README.md"]) == []
