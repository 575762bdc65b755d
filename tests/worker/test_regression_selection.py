"""Which existing test files the execution verifier runs as regression tests: those that exercise the
code the candidates touch, most related first, each with the reason it was chosen; never a test of
another module of the same package."""

from worker.engine.verify.regression import (
    imported_modules,
    module_name,
    regression_test_files,
    regression_tests_chosen,
)

FILES = {
    "tests/test_slug.py": "from textkit.slug import slugify\n",  # imports the module: first
    "tests/test_modules.py": "from textkit import slug\n",  # `from pkg import mod`: imports the module
    "tests/slug_test.py": "import os\n",  # named after the module: second
    "tests/test_wrap.py": "from textkit.wrap import wrap_text\n",  # wrap imports slug: third
    "tests/test_api.py": "import textkit\n",  # the package's __init__ imports slug: third
    "tests/test_report.py": "from textkit.report import render\n",  # report -> wrap -> slug: fourth
    "tests/test_deep.py": "from textkit.deep import x\n",  # deep -> report -> wrap -> slug: too far
    "tests/test_cache.py": "from textkit.cache import LRUCache\n",  # another module of the package: unrelated
    "tests/test_other.py": "from otherkit.slug import slugify\n",  # another package: unrelated
    "tests/test_hidden.py": "from textkit.slug import slugify\n",  # the task's own test: never
    "tests/conftest.py": "from textkit.slug import slugify\n",  # not a test file of its own
    "tests/test_broken.py": "from textkit.slug import (\n",  # does not parse: no imports seen
    "textkit/__init__.py": "from textkit.slug import slugify\n",
    "textkit/slug.py": "import re\n",
    "textkit/wrap.py": "from .slug import slugify\n",
    "textkit/report.py": "from .wrap import wrap_text\n",
    "textkit/deep.py": "from textkit.report import render\n",
    "textkit/cache.py": "from collections import OrderedDict\n",
}


def test_related_test_files_come_most_related_first_each_with_its_reason():
    chosen = regression_tests_chosen(FILES, ["textkit/slug.py"], hidden=["tests/test_hidden.py"])
    assert [(c.path, c.reason) for c in chosen] == [
        ("tests/test_modules.py", "imports textkit.slug, which the candidates change"),
        ("tests/test_slug.py", "imports textkit.slug, which the candidates change"),
        ("tests/slug_test.py", "named after textkit/slug.py, which the candidates change"),
        ("tests/test_api.py", "imports textkit → textkit.slug (changed by the candidates)"),
        ("tests/test_wrap.py", "imports textkit.wrap → textkit.slug (changed by the candidates)"),
        ("tests/test_report.py", "imports textkit.report → textkit.wrap → textkit.slug (changed by the candidates)"),
    ]
    assert regression_test_files(FILES, ["textkit/slug.py"], hidden=["tests/test_hidden.py"]) == [
        c.path for c in chosen]


def test_a_test_of_another_module_of_the_package_is_not_chosen():
    chosen = regression_test_files(FILES, ["textkit/slug.py"])
    assert "tests/test_cache.py" not in chosen and "tests/test_other.py" not in chosen
    # The cache's own change chooses its own test, and none of the slug's.
    assert regression_test_files(FILES, ["textkit/cache.py"]) == ["tests/test_cache.py"]


def test_module_names_and_imports():
    assert module_name("textkit/slug.py") == "textkit.slug"
    assert module_name("src/pkg/__init__.py") == "pkg" and module_name("lib/pkg/mod.py") == "pkg.mod"
    assert imported_modules("import a.b, c\nfrom d import e\nfrom . import f\nfrom g import *\n") == {
        "a.b", "c", "d", "d.e", "g"}
    # Relative imports, where the file's place is known: `from . import mod` names the module only.
    assert imported_modules("from . import f\nfrom .g import h\nfrom .. import top\n", path="pkg/sub/mod.py") == {
        "pkg.sub.f", "pkg.sub.g", "pkg.sub.g.h", "pkg.top"}
    assert imported_modules("from .g import h\n", path="pkg/__init__.py") == {"pkg.g", "pkg.g.h"}
    assert imported_modules("def (") == set()


def test_a_change_to_tests_or_other_files_only_selects_nothing():
    assert regression_test_files(FILES, ["tests/test_slug.py", "README.md"]) == []
