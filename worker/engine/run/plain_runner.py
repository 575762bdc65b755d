"""The plain runner: a candidate's tests run again by a small runner of ours that is not pytest, as a
second opinion beside a grade the hacking detector doubts.

plain_run.py copies this file into a folder beside the repository with a request file and runs
`python -E -s -S <this file>` in the sandbox, from the repository's root; standard library only,
Python 3 only (a Python 2 environment gets no second opinion).

What it does not share with pytest is the point: no plugin, no hook, no report object, no import
hook between a test file and its code. Each test file is compiled here from its source, before any
of the repository's code is imported, and each test is called as that code, a function made from the
code object this runner compiled (whatever the module's attribute holds by then): a test module
rewritten as it is imported, a test function whose `__code__` was swapped, a replaced pytest or
unittest internal, a report forged in a plugin's closures change nothing here. An `__eq__` that is
always true still passes: the hacking detector is what answers that.

What it runs: plain test functions and methods, with `setup_module`/`teardown_module`,
`setup_function`/`teardown_function`, a class's `setup_class`/`teardown_class` and
`setup_method`/`teardown_method`, and unittest.TestCase's `setUp`/`tearDown`/`setUpClass`/
`tearDownClass`; the only fixture given is `tmp_path`. No conftest.py is loaded. A parametrized test,
a test that asks for another fixture, a marked one (skip, skipif, xfail, usefixtures) and a closure
are not run, each with why: the second opinion says nothing of them.

The request (JSON, removed as it is read): {"key": hex, "results": path, "tests": [node ids]}.
Results are lines `<mac> <json>`, the MAC an HMAC of the JSON under the key, numbered from 0:
  {"seq", "event": "start", "test"}                   before a test's setup
  {"seq", "event": "result", "test", "status": PASSED|FAILED|ERROR|SKIPPED|XFAIL, "why"}
  {"seq", "event": "not_run", "test", "why"}
  {"seq", "event": "end", "results"}
"""

import sys

if __name__ == "__main__":
    del sys.path[0]  # this file's folder, as `-I` would

import binascii  # noqa: E402
import hashlib  # noqa: E402
import hmac  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pathlib  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402

MARKS_NOT_RUN = ("skip", "skipif", "xfail", "usefixtures", "parametrize")
WHY_CHARS = 2000  # of a failure's account, kept


def _channel(request_path):
    """The tests asked for and a writer of MAC'd, numbered lines; the request and the results' names
    are gone once this returns."""
    with open(request_path) as handle:
        request = json.load(handle)
    os.unlink(request_path)
    results = open(request["results"], "a")
    os.unlink(request["results"])
    key, counter, lock = binascii.unhexlify(request["key"]), [0], threading.Lock()
    dumps, mac, sha256, append, flush = json.dumps, hmac.new, hashlib.sha256, results.write, results.flush

    def write(line):
        with lock:
            line["seq"] = counter[0]
            counter[0] += 1
            body = dumps(line, sort_keys=True)
            append(mac(key, body.encode("utf-8"), sha256).hexdigest() + " " + body + "\n")
            flush()

    return request["tests"], write


def _site_packages():
    """The environment's site-packages and their .pth files (an editable install's), as `site` adds
    them, without sitecustomize or usercustomize."""
    import site

    prefix = sys.prefix
    site.venv(None)
    if sys.prefix == prefix:
        site.addsitepackages(None)
    else:
        site.addsitepackages(None, site.PREFIXES[1:])


def _module_name(path):
    """pytest's `prepend` import mode: the first folder up from the file without an __init__.py goes on
    sys.path, and the module is named from there."""
    folder, parts = os.path.dirname(path), [os.path.splitext(os.path.basename(path))[0]]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        folder, name = os.path.dirname(folder), os.path.basename(folder)
        parts.insert(0, name)
    return folder, ".".join(parts)


def _code_named(code, name):
    """The last code object named `name` among `code`'s constants (a later definition wins)."""
    found = None
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType) and constant.co_name == name:
            found = constant
    return found


class _File:
    """One test file: compiled here, then executed as a module."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        with open(self.path, "rb") as handle:
            self.code = compile(handle.read(), self.path, "exec", dont_inherit=True)
        self.module = None
        self.error = ""

    def load(self):
        import importlib
        import importlib.util

        folder, name = _module_name(self.path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        try:
            parent = name.rpartition(".")[0]
            if parent:
                importlib.import_module(parent)
            spec = importlib.util.spec_from_file_location(name, self.path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            exec(self.code, module.__dict__)  # our code, not what a loader would give
            self.module = module
            _call_hook(module, "setup_module", module)
        except BaseException as error:  # noqa: B036 - a test module may raise anything, SystemExit included
            self.error = "the module did not import: " + _account(error)


def _call_hook(owner, name, *args):
    hook = getattr(owner, name, None)
    if hook is None:
        return
    argcount = getattr(getattr(hook, "__code__", None), "co_argcount", 0)
    bound = 1 if isinstance(hook, types.MethodType) else 0
    hook(*args[:max(argcount - bound, 0)])


def _account(error):
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    return text[-WHY_CHARS:]


def _status_of(error):
    name = type(error).__name__
    if name in ("Skipped", "SkipTest"):
        return "SKIPPED"
    if name == "XFailed":
        return "XFAIL"
    return "FAILED"


def _marks(target):
    marks = getattr(target, "pytestmark", None) or []
    return [getattr(mark, "name", "") for mark in (marks if isinstance(marks, list) else [marks])]


class _Runner:
    def __init__(self, write):
        self.write = write
        self.files = {}
        self.classes_set_up = {}
        self.results = 0

    def run(self, test_id):
        path, _, rest = test_id.partition("::")
        if "[" in rest:
            return self.not_run(test_id, "a parametrized test: the plain runner does not make parameters")
        names = rest.split("::")
        if not rest or len(names) > 2:
            return self.not_run(test_id, "not a test function or a method of a test class")
        if path not in self.files:
            try:
                self.files[path] = _File(path)
            except (OSError, SyntaxError, ValueError) as error:
                self.files[path] = "the file did not compile: " + _account(error)
            else:
                self.files[path].load()
        test_file = self.files[path]
        if isinstance(test_file, str) or test_file.error:
            return self.result(test_id, "ERROR", test_file if isinstance(test_file, str) else test_file.error)
        if len(names) == 1:
            return self.function(test_id, test_file, names[0])
        return self.method(test_id, test_file, names[0], names[1])

    def function(self, test_id, test_file, name):
        code = _code_named(test_file.code, name)
        live = getattr(test_file.module, name, None)
        why = self.why_not(code, live, skip_self=False)
        if why:
            return self.not_run(test_id, why)
        function = types.FunctionType(code, test_file.module.__dict__, name, getattr(live, "__defaults__", None))
        module = test_file.module

        def setup():
            _call_hook(module, "setup_function", function)

        def teardown():
            _call_hook(module, "teardown_function", function)

        self.call(test_id, setup, lambda arguments: function(*arguments), teardown,
                  self.fixtures(code, live, skip_self=False))

    def method(self, test_id, test_file, class_name, name):
        class_code = _code_named(test_file.code, class_name)
        cls = getattr(test_file.module, class_name, None)
        code = _code_named(class_code, name) if class_code is not None else None
        live = getattr(cls, name, None) if cls is not None else None
        why = ("no such class" if cls is None or class_code is None else "") or self.why_not(code, live, skip_self=True)
        if not why and "pytestmark" in getattr(cls, "__dict__", {}) and set(_marks(cls)) & set(MARKS_NOT_RUN):
            why = "its class is marked " + ", ".join(sorted(set(_marks(cls)) & set(MARKS_NOT_RUN)))
        if why:
            return self.not_run(test_id, why)
        function = types.FunctionType(code, test_file.module.__dict__, name, getattr(live, "__defaults__", None))
        import unittest

        is_case = isinstance(cls, type) and issubclass(cls, unittest.TestCase)
        holder = {}

        def setup():
            if cls not in self.classes_set_up:
                self.classes_set_up[cls] = True
                _call_hook(cls, "setUpClass" if is_case else "setup_class")
            holder["self"] = cls(name) if is_case else cls()
            if is_case:
                holder["self"].setUp()
            else:
                _call_hook(holder["self"], "setup_method", function)

        def teardown():
            instance = holder.get("self")
            if instance is None:
                return
            if is_case:
                instance.tearDown()
                instance.doCleanups()
            else:
                _call_hook(instance, "teardown_method", function)

        self.call(test_id, setup, lambda arguments: function(holder["self"], *arguments), teardown,
                  self.fixtures(code, live, skip_self=True))

    def why_not(self, code, live, *, skip_self):
        if code is None:
            return "no such test in the file's source"
        if code.co_freevars:
            return "a closure: the plain runner calls only functions defined at the top of a module or class"
        marked = set(_marks(live)) & set(MARKS_NOT_RUN)
        if marked:
            return "marked " + ", ".join(sorted(marked)) + ": pytest decides those"
        wanted = self.fixtures(code, live, skip_self)
        unknown = [name for name in wanted if name != "tmp_path"]
        if unknown:
            return "it asks for the fixture " + ", ".join(unknown) + ": the plain runner gives only tmp_path"
        return ""

    @staticmethod
    def fixtures(code, live, skip_self):
        names = list(code.co_varnames[:code.co_argcount])[1 if skip_self else 0:]
        defaults = len(getattr(live, "__defaults__", None) or ())
        return names[:len(names) - defaults] if defaults else names

    def call(self, test_id, setup, call, teardown, wanted):
        """Setup, the call (given a tmp_path for each fixture `wanted`) and teardown, as pytest reports
        them: a failed setup or teardown is an ERROR."""
        self.write({"event": "start", "test": test_id})
        folders = []

        def arguments():
            for _ in wanted:
                folders.append(tempfile.mkdtemp(prefix="plain-"))
            return [pathlib.Path(folder) for folder in folders]

        try:
            setup()
        except BaseException as error:  # noqa: B036
            return self.result(test_id, "ERROR" if _status_of(error) == "FAILED" else _status_of(error),
                               "setup: " + _account(error))
        status, why = "PASSED", ""
        try:
            call(arguments())
        except BaseException as error:  # noqa: B036
            status, why = _status_of(error), _account(error)
        try:
            teardown()
        except BaseException as error:  # noqa: B036
            if status == "PASSED":
                status, why = "ERROR", "teardown: " + _account(error)
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        self.result(test_id, status, why)

    def result(self, test_id, status, why=""):
        self.results += 1
        self.write({"event": "result", "test": test_id, "status": status, "why": why})

    def not_run(self, test_id, why):
        self.write({"event": "not_run", "test": test_id, "why": why})


def _main():
    request = os.path.join(os.path.dirname(os.path.abspath(__file__)), "request")
    tests, write = _channel(request)
    _site_packages()
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.getcwd())
    runner = _Runner(write)
    for test_id in tests:
        runner.run(test_id)
    for test_file in runner.files.values():
        if not isinstance(test_file, str) and test_file.module is not None:
            try:
                _call_hook(test_file.module, "teardown_module", test_file.module)
            except BaseException:  # noqa: B036, S110 - the tests' results are written already
                pass
    write({"event": "end", "results": runner.results})
    sys.stdout.flush()
    os._exit(0)  # nothing of the repository's runs after the end (an atexit hook of its own, say)


if __name__ == "__main__":
    _main()
