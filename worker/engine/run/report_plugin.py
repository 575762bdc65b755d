"""Our pytest plugin and the script that starts pytest with it: what each test did, as raw facts
the worker decides outcomes from, written through a channel the tested code cannot cheaply forge.

pytest_run.py copies this file into a folder beside the repository, with a key file, and runs
`python -B -E -s -S <this file> <pytest arguments>` in the sandbox, so it must run wherever an old
commit's tests run: Python 2.7 and 3.7 to 3.14, pytest 4.6 to 9.x, standard library only.

Start-up: `-E -s -S` ignore PYTHON* variables and the user's site folder, and skip `site`, so no
sitecustomize.py, usercustomize.py or .pth file of the repository runs; the script's own folder
leaves `sys.path` first thing (what `-I` does, which Python 2 lacks). This script then adds the environment's
site-packages (their .pth files: an editable install's), imports pytest, and only then puts the
repository first on `sys.path`, as `python -m pytest` would; the plugin is registered before any
conftest loads. `-B`: nothing compiled is written.

Before any code of the repository runs, the script:
- reads the run's key (a nonce of the worker's), the report's path (a named pipe the worker reads
  as it is written: a line, once written, is out of the process's reach) and the files that are
  the candidate's own (`untrusted`: what its patch changed and grading kept), and removes their names;
- reads the test files named on its command line and the conftest.py files above them, and
  compiles each as pytest will (asserts rewritten by pytest's own rewriter) and plain: what a test
  module may run is one of these. pytest is handed this rewriting instead of doing it again, so
  the check costs nothing, and a test file changed on disk later is not what runs;
- takes the functions pytest, pluggy, unittest and the builtins run a test with (`_watched`).

The account (`_account`) holds all of that, the key and the report; it is the only writer. On
Python 3.8+ nothing holds it but an audit hook (PEP 578: once added, it cannot be removed), added
as the repository's first code (its conftests) is about to run; candidate code can reach the
account only through what the hook sees. It is a generator, whose frame only audited attributes
reach; it takes an event only from the hook (or, before 3.8, the plugin's courier) and a report
event only from the plugin's own code. What it sees as it happens (3.8+): gc's object walks; code a
test module executes that is not what its source compiles to (a stale or foreign .pyc, an import
hook that rewrites it); code swapped into functions; tracing and profiling hooks set, code built or
compiled, Python's own C API looked up, by the candidate's code (its files, and code they
compiled). Each is written at once as an `untrusted` line (other lines wait, at most until the
next test starts or ends).

The pytest plugin (`_plugin`) holds no key and decides nothing: its hooks hand plain facts of
pytest's objects to the account. Before each test's call phase the account checks the function
pytest will call (the one collected, its code the code compiled from its file, no wrapper of the
candidate's code) and that pytest's, pluggy's and unittest's functions and the builtins are those
taken at start, and before its setup the fixtures' functions. Around the test's function (or its
unittest method) the plugin puts a wrapper that tells the account, as it happens, whether the
function returned or raised, and what and where. Coroutine tests that a plugin runs its own way are
traced instead. Outcomes are the worker's to decide (pytest_run.py): this plugin reports.

Lines (JSON, each `<mac> <json>`: an HMAC-SHA256 of the JSON under the key; "seq" numbers them from 0):
  {"event": "collected", "nodeids"}                    the tests collected
  {"event": "collect_error", "nodeid"}                 a file or class that failed to collect
  {"event": "start", "nodeid"}                         before a test runs
  {"event": "phase", "nodeid", "when", "saw"[, "watched"]}  what a phase raised, from the plugin's
                                                       own wrapper: passed, failed or skipped ("watched":
                                                       the call phase's function is wrapped or traced)
  {"event": "called", "nodeid", "saw", "raised", "at"} what the test's own function did
  {"event": "report", "nodeid", "when", "outcome", "wasxfail", "seconds", "may_differ"}  pytest's report
  {"event": "subtest_failed", "nodeid"}                a subtest of it failed
  {"event": "untrusted", "reason"}                     something the run does makes its facts unbelievable
  {"event": "end", "exitstatus"}                       when the session ends

Node ids are relative to the directory pytest was started in (the repository's root), even when
pytest's rootdir is below it.
"""

import sys

PYTHON2 = sys.version_info[0] == 2


def _python2_standard_library():
    """With -S, a virtualenv of Python 2 finds only the few modules it links (os, site): its site.py,
    skipped, would have put the base Python's standard library in their place, from pyvenv.cfg."""
    try:
        with open(sys.prefix + "/pyvenv.cfg") as handle:
            settings = dict((key.strip(), value.strip()) for key, _, value in
                            (line.partition("=") for line in handle.read().splitlines()))
    except EnvironmentError:
        return
    base, ours = settings.get("base-prefix", ""), sys.prefix + "/lib/python2."
    if base:
        sys.path[:] = [base + path[len(sys.prefix):] if path.startswith(ours) else path for path in sys.path]
        import encodings  # noqa: F401 (what start-up could not find there: no codec works without it)


if __name__ == "__main__":
    del sys.path[0]  # this file's folder, as `-I` would (Python 2 has none): ours, but nothing comes from it
    if PYTHON2:
        _python2_standard_library()

import binascii  # noqa: E402 (imported once this file's folder has left sys.path)
import dis  # noqa: E402
import hashlib  # noqa: E402
import io  # noqa: E402
import itertools  # noqa: E402
import operator  # noqa: E402
import os  # noqa: E402
import posixpath  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import types  # noqa: E402
from contextlib import contextmanager  # noqa: E402

try:
    import builtins
except ImportError:  # Python 2
    import __builtin__ as builtins

AUDITED = hasattr(sys, "addaudithook")  # Python 3.8+
EVENT = "commitgym"  # the audit event the plugin's facts travel as
FunctionType, MethodType, CodeType = types.FunctionType, types.MethodType, types.CodeType
# The hooks that decide how a test runs and what is reported of it: one of these implemented by the
# candidate's code could change either.
RUN_HOOKS = ("pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown",
             "pytest_pyfunc_call", "pytest_runtest_makereport", "pytest_runtest_logreport", "pytest_fixture_setup")
# Audit events the account looks at (3.8+); the rest pass by at the cost of a set lookup.
AUDIT_EVENTS = frozenset([EVENT, "exec", "open", "object.__getattr__", "compile", "code.__new__", "function.__new__", "gc.get_objects",
                          "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys.settrace",
                          "sys.setprofile", "sys._settraceallthreads", "sys._setprofileallthreads",
                          "sys.monitoring.register_callback", "object.__setattr__", "marshal.loads", "marshal.load",
                          "ctypes.dlsym"])
SWAPPED_ATTRIBUTES = frozenset(["__code__", "__defaults__", "__kwdefaults__", "__class__"])
CANDIDATES_ONLY = frozenset(["compile", "code.__new__", "marshal.loads", "marshal.load", "ctypes.dlsym"])
HEAP_WALKS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames")
HOOK_SETTERS = ("sys.settrace", "sys.setprofile", "sys._settraceallthreads", "sys._setprofileallthreads",
                "sys.monitoring.register_callback")
FRAMES_SEEN = 256  # frames of a stack the account looks through, at most
FRAMES_NEAR = 8  # ... above one of the plugin's own events: code that drives pytest's runner to call its hooks
# Flags pytest itself sets on a node class the first time it makes one of its items (nodes.py, 7.0+).
PYTEST_OWN_FLAGS = frozenset(["_pytest_diamond_inheritance_warning_shown"])


def _of_type(value, types, issubclass=issubclass, type=type):
    """isinstance by the value's type alone: isinstance reads `__class__` when the type does not
    match, and a candidate's object can make that a property, whose code would then run inside the
    account."""
    return issubclass(type(value), types)


# --- the channel ------------------------------------------------------------------------------


def _channel(folder):
    """(key, the report's descriptor, the candidate's own files) from the run's folder, the names
    removed; None when the key file is missing (the plugin then writes nothing)."""
    try:
        with open(os.path.join(folder, "key")) as handle:
            key_hex, report_path = handle.read().split("\n")[:2]
    except (EnvironmentError, ValueError):  # EnvironmentError: Python 2's IOError is no OSError
        return None
    os.unlink(os.path.join(folder, "key"))
    fd = os.open(report_path, os.O_WRONLY | os.O_APPEND)
    os.unlink(report_path)
    untrusted = []
    try:
        with io.open(os.path.join(folder, "untrusted"), encoding="utf-8") as handle:
            untrusted = [line for line in handle.read().split("\n") if line]
        os.unlink(os.path.join(folder, "untrusted"))
    except EnvironmentError:
        pass
    return binascii.unhexlify(key_hex), fd, untrusted


def _line_writer(key, fd):
    """Writes an event as a MAC'd, numbered line: at once with `now` (and all before it), else with the
    next that is (a test's start and end, what makes the run untrusted, the session's end). HMAC-SHA256
    built from C hash objects keyed once, and JSON from `_encoder`: no Python code of a library (hmac,
    json) that could be replaced runs while a line is made."""
    sha256, block = hashlib.sha256, 64
    if len(key) > block:
        key = sha256(key).digest()
    key = bytearray(key) + bytearray(block - len(key))
    inner, outer = sha256(bytes(bytearray(b ^ 0x36 for b in key))), sha256(bytes(bytearray(b ^ 0x5C for b in key)))
    encode, write, counter, waiting, join = _encoder(), os.write, [0], [], b"".join

    def written(event, now=False):
        event["seq"] = counter[0]
        counter[0] += 1
        body = encode(event).encode("utf-8")
        digest = inner.copy()
        digest.update(body)
        mac = outer.copy()
        mac.update(digest.digest())
        waiting.append(mac.hexdigest().encode("ascii") + b" " + body + b"\n")
        if now or len(waiting) > 64:
            data = join(waiting)
            del waiting[:]
            while data:
                data = data[write(fd, data):]

    return written


def _encoder():
    """JSON of dicts, lists, strings, numbers, booleans and None, from builtins taken now."""
    from json.encoder import encode_basestring_ascii as string  # the C version where there is one

    text_types, number_types = (type(u""), type("")), (int, float) + ((long,) if PYTHON2 else ())  # noqa: F821
    join, sorted_, repr_, type_, bool_, isinstance_, dict_ = ", ".join, sorted, repr, type, bool, _of_type, dict

    def encode(value):
        kind = type_(value)
        if value is None:
            return "null"
        if kind is bool_:
            return "true" if value else "false"
        if isinstance_(value, text_types):
            return string(value)
        if isinstance_(value, number_types):
            return repr_(value)
        if isinstance_(value, dict_):
            return "{" + join([string(key) + ": " + encode(value[key]) for key in sorted_(value)]) + "}"
        return "[" + join([encode(item) for item in value]) + "]"

    return encode


# --- the code the task's test files compile to --------------------------------------------------


def _test_files(arguments, root):
    """The test files named on pytest's command line (a node id's file included), with the conftest.py
    files of their folders up to the repository's root: their real paths."""
    found = []
    for argument in arguments:
        path = os.path.realpath(os.path.join(root, argument.split("::")[0]))
        if argument.startswith("-") or not path.endswith(".py") or not os.path.isfile(path):
            continue
        found.append(path)
        folder = os.path.dirname(path)
        while folder == root or folder.startswith(root + os.sep):
            conftest = os.path.join(folder, "conftest.py")
            if os.path.isfile(conftest):
                found.append(conftest)
            folder = os.path.dirname(folder)
    return sorted(set(found))


def _compiled(path):
    """The module codes a test file may run (pytest's rewriting of its asserts, and the plain
    compile of its source), and its functions' codes by (name, first line). None when unreadable."""
    try:
        with open(path, "rb") as handle:
            source = handle.read()
        codes = [compile(source, path, "exec", 0, True)]
    except (EnvironmentError, SyntaxError, ValueError, TypeError):
        return None
    rewritten = _rewritten(source, path)
    if rewritten is not None:
        codes.append(rewritten)
    functions = {}
    for module in codes:
        pending = [module]
        while pending:
            code = pending.pop()
            if code is not module:
                functions.setdefault((code.co_name, code.co_firstlineno), []).append(code)
            pending.extend(const for const in code.co_consts if type(const) is CodeType)
    return tuple(codes), functions


def _rewritten(source, path):
    """The code pytest's assertion rewriting makes of a test file (None where it cannot say)."""
    import ast

    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return None
    try:
        tree = ast.parse(source, filename=path)
        try:
            rewrite.rewrite_asserts(tree, source, path, None)  # pytest 5+
        except TypeError:  # pytest 4.6, which writes the file's path into the code it makes
            import py

            rewrite.rewrite_asserts(tree, py.path.local(path), None)
        return compile(tree, path, "exec", 0, True)
    except Exception:  # noqa: BLE001 - a file pytest cannot rewrite is compared with its plain compile
        return None


def _rewrites_served(served):
    """pytest's rewriting of the test files' asserts served from the code compiled at start
    (`served`: real path -> code): pytest does not rewrite them a second time, and a test file changed
    on disk once the run has started is not what runs. A config that asks for assertion pass hooks gets
    pytest's own rewriting."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    original, realpath = rewrite._rewrite_test, os.path.realpath
    config_first = original.__code__.co_varnames[:1] == ("config",)  # pytest 4.6: (config, fn)

    def _rewrite_test(*args):
        config, path = (args[0], args[1]) if config_first else (args[1], args[0])
        code = served.get(realpath(str(path)))
        try:
            pass_hook = code is not None and bool(config.getini("enable_assertion_pass_hook"))
        except (ValueError, AttributeError):  # an ini name pytest 4.6 does not know
            pass_hook = False
        if code is None or pass_hook:
            return original(*args)
        return None, code  # the first is what a pyc of it would be stamped with: none is written (-B)

    rewrite._rewrite_test = _rewrite_test


# --- what pytest, pluggy and unittest run a test with --------------------------------------------


def _watched():
    """(strict, lenient): [(label, holder, name)] of attributes whose replacement during the run
    forges outcomes. Strict ones are flagged whatever replaced them: pytest's functions that run a
    test and report it, the helpers tests assert with (raises, approx, warns, ...), pluggy's calls,
    unittest's cases and results. Lenient ones (pytest's unittest bridge, which pytest-django
    swaps, and the builtins, which pyfakefs swaps) only when the new value is not a function or is
    the candidate's code."""
    import unittest.case
    import unittest.result

    import _pytest.python
    import _pytest.reports
    import _pytest.runner
    import _pytest.unittest  # noqa: F401 (its TestCaseFunction, below)

    strict, lenient = [], []

    def module(name, *names):
        found = sys.modules.get(name)
        if found is None:
            return
        for attribute in names or sorted(vars(found)):
            value = vars(found).get(attribute)
            if isinstance(value, type) and getattr(value, "__module__", "") == name:
                klass(name + "." + attribute, value)
            elif value is not None and callable(value):
                strict.append((name + "." + attribute, found, attribute))

    def klass(label, cls, *names):
        for attribute in names or sorted(vars(cls)):
            value = vars(cls).get(attribute)
            if attribute not in ("__doc__", "__module__", "__dict__", "__weakref__") and (
                    callable(value) or isinstance(value, (property, classmethod, staticmethod))):
                strict.append((label + "." + attribute, cls, attribute))

    module("_pytest.runner", "call_and_report", "call_runtest_hook", "runtestprotocol", "pytest_runtest_makereport",
           "pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown", "check_interactive_exception")
    module("_pytest.python", "pytest_pyfunc_call")
    module("_pytest.fixtures", "pytest_fixture_setup", "call_fixture_func")
    for cls in (_pytest.runner.CallInfo, _pytest.reports.BaseReport, _pytest.reports.TestReport,
                _pytest.python.Function):
        for base in cls.__mro__:
            if base.__module__.startswith("_pytest."):
                klass(base.__name__, base)
    for name in ("_pytest.python_api", "_pytest.raises", "_pytest.recwarn", "_pytest.outcomes"):
        module(name)
    module("pytest", "raises", "approx", "warns", "deprecated_call", "fail", "skip", "xfail", "importorskip")
    for name in ("pluggy._manager", "pluggy.manager", "pluggy._callers", "pluggy.callers", "pluggy._result",
                 "pluggy._hooks", "pluggy.hooks"):
        module(name)
    module("unittest.case")
    module("unittest.result")
    bridge = sys.modules.get("_pytest.unittest")
    if bridge is not None:
        lenient.extend(("TestCaseFunction." + name, bridge.TestCaseFunction, name)
                       for name in sorted(vars(bridge.TestCaseFunction)) if callable(vars(bridge.TestCaseFunction)[name]))
    lenient.extend(("builtins." + name, builtins, name) for name in sorted(vars(builtins))
                   if callable(vars(builtins)[name]) and not name.startswith("__"))
    return strict, lenient


# --- what runs around a test's function ---------------------------------------------------------


def _recording(function, courier):
    """The test's function, wrapped: the account hears what it did as it returns or raises, before
    any other code of pytest, unittest or the repository's sees it."""

    def called(*args, **kwargs):
        __tracebackhide__ = True  # pytest leaves this frame out of what it shows
        try:
            result = function(*args, **kwargs)
        except:  # noqa: E722 - Python 2 raises old-style classes, which nothing else catches
            kind, _, traceback = sys.exc_info()
            courier(EVENT, "called", function, kind, traceback)
            raise
        courier(EVENT, "called", function, None, None)
        return result

    for name in ("__module__", "__name__", "__doc__", "__qualname__"):
        if hasattr(function, name):
            setattr(called, name, getattr(function, name))
    called.__dict__.update(getattr(getattr(function, "__func__", function), "__dict__", {}))
    called.__wrapped__ = function
    return called


def _frames_traced(codes, seen, opnames):
    """A trace function that follows only the frames of `codes`: `seen` gets, for each that ran, how it
    last left: "ran" by a return instruction, else "raised <the exception>" (a coroutine's frame leaves
    at every await and is called again; its last exit counts)."""
    raising = {}

    def local(frame, event, arg):
        if event == "exception":
            raising[frame.f_code] = getattr(arg[0], "__name__", "an exception")
        elif event == "return":
            instruction = opnames[bytearray(frame.f_code.co_code)[frame.f_lasti]]  # Python 2's code is a str
            seen[frame.f_code] = "ran" if instruction.startswith("RETURN") else \
                "raised " + raising.get(frame.f_code, "an exception")
        return local

    def on_call(frame, event, arg):
        if frame.f_code in codes:
            seen[frame.f_code] = "ran"
            return local
        return None

    return on_call


class PerTestTimeout(BaseException):
    """Raised inside a test that ran past COMMITGYM_TEST_TIMEOUT (a BaseException, so the
    test's own `except Exception` does not swallow it)."""


# --- the account: all the plugin knows, and its only writer ---------------------------------------


def _account(write, root, checked, untrusted, watched, skip_types):
    """A generator: each event sent to it arrives as (name, args). The first, sent by `_main` before
    any code of the repository runs, says who may send (the courier's code) and which code may raise
    the plugin's events; after that, an event from any other sender, or a plugin event raised by other
    code, is itself what gets written (harness_reached)."""
    # Every name the account uses is its own, taken before any code of the repository runs: replacing
    # a module's name or a builtin later changes nothing here.
    getframe, type_, isinstance_, len_, str_, vars_, dict_get, any_, set_, round_, exception_ = (
        sys._getframe, type, _of_type, len, str, vars, dict.get, any, set, round, Exception)
    map_, zip_, is_not, itemgetter, repeat_ = map, zip, operator.is_not, operator.itemgetter, itertools.repeat
    lazy_map = getattr(itertools, "imap", map)  # Python 2's map pads the shorter with None, past the end
    dict_type, proxy_type, unicode_type, module_type = dict, type(type.__dict__), type(u""), types.ModuleType
    module_dict = types.ModuleType.__dict__["__dict__"].__get__  # not a subclass's own `__dict__`
    function_type, method_type, code_type, traceback_type = FunctionType, MethodType, CodeType, types.TracebackType
    classic_class = getattr(types, "ClassType", None)
    frames_near, event_name, heap_walks, hook_setters = FRAMES_NEAR, EVENT, HEAP_WALKS, HOOK_SETTERS
    pytest_own_flags = PYTEST_OWN_FLAGS
    outcome_events = frozenset(["call_start", "phase_end", "called", "traced", "logreport"])
    os_flags_writing = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    mro_of, dict_of, name_of = (type.__dict__[name].__get__ for name in ("__mro__", "__dict__", "__name__"))
    couriers, raisers = yield
    text_types, int_types = (str, type(u"")), (int, type(1 << 64))  # Python 2's long
    candidates = bool(untrusted)
    flagged, place, repo_ids, collected, calling, checked_setups = set_(), {"started_in": root, "prefix": ""}, {}, {}, {}, {}
    implementations_seen, candidate_ran = set_(), [False]
    # A file's name as code carries it -> ("checked", its path, its module codes, its functions by
    # (name, first line), their names) or ("candidate", its path or what compiled it).
    kinds = {}
    for path, (codes, functions) in checked.items():
        kinds[path] = ("checked", path[len(root) + 1:], codes, functions, frozenset(key[0] for key in functions))
    for path in untrusted:
        kinds.setdefault(os.path.realpath(os.path.join(root, path)), ("candidate", path))
        kinds.setdefault(os.path.join(root, path), ("candidate", path))

    def own_dict(holder):
        if isinstance_(holder, type_):
            return dict_of(holder)
        return module_dict(holder) if isinstance_(holder, module_type) else vars_(holder)

    def plain_keys(mapping, where):
        """Whether a dictionary the candidate's code can write to (a module's, a function's, a class's)
        is a plain dict whose every key is an exact str, flagging it where not: a lookup in it then
        compares the name only with plain strings. A str subclass's `__eq__` put there, or a dict
        subclass's own methods, would run inside the account, where the audit hook, waiting for the
        account, hears nothing."""
        if type_(mapping) is not dict_type and type_(mapping) is not proxy_type:
            flag("harness_reached: %s is a %s, not a dict" % (where, named(type_(mapping))))
            return False
        odd = any_(lazy_map(is_not, lazy_map(type_, mapping), repeat_(str_)))
        if odd and unicode_type is not str_:  # Python 2: unicode keys are plain too
            odd = any_(kind is not str_ and kind is not unicode_type for kind in lazy_map(type_, mapping))
        if not odd:
            return True
        flag("harness_reached: a key that is not a plain str was put in %s" % where)
        return False

    def grouped(entries):
        """The watched attributes by the module or class that holds them: [holder, labels, names, the
        values as they are now, a getter of those names (one C call), the names it has now]."""
        groups = {}
        for label, holder, name in entries:
            group = groups.get(id(holder))
            if group is None:
                group = groups[id(holder)] = [holder, [], [], [], None, frozenset(own_dict(holder))]
            group[1].append(label)
            group[2].append(name)
            group[3].append(own_dict(holder)[name])
        for group in groups.values():
            group[4] = itemgetter(*group[2]) if len(group[2]) > 1 else (lambda mapping, name=group[2][0]: (mapping[name],))
        return [tuple(group) for group in groups.values()]

    strict, lenient = grouped(watched[0]), grouped(watched[1])

    def flag(reason):
        if reason not in flagged:
            flagged.add(reason)
            write({"event": "untrusted", "reason": reason}, True)

    def text(value):
        return str_.__str__(value) if type_(value) is not str_ and isinstance_(value, str_) else \
            value if isinstance_(value, text_types) else ""

    def under_root(path):
        return path[len(root) + 1:] if path.startswith(root + "/") else path

    def file_of(code):
        return text(code.co_filename)

    def named(thing):
        """A type's name, as a plain string."""
        return text(name_of(thing))

    def origin(code):
        """The candidate's file (or what it compiled) a code object comes from; None for any other."""
        kind = kinds.get(file_of(code)) if type_(code) is code_type else None
        return kind[1] if kind is not None and kind[0] == "candidate" else None

    def candidate_on_stack(frame, depth=FRAMES_SEEN, through_imports=True):
        """The candidate's file whose code is running at `frame` or below it; with `through_imports`
        False, not past the import system (a module the candidate imports runs its own code)."""
        while candidates and frame is not None and depth:
            name = frame.f_code.co_filename
            name = name if type_(name) is str_ else text(name)
            kind = kinds.get(name)
            if kind is not None and kind[0] == "candidate":
                return kind[1]
            if not through_imports and name.startswith("<frozen importlib"):
                return None
            frame, depth = frame.f_back, depth - 1
        return None

    def functions_of(function):
        """The functions a callable wraps (`__wrapped__`), outermost first, and what in the chain is not
        a function (None when all are)."""
        chain = []
        while function is not None and len_(chain) < 16:
            if type_(function) is method_type:
                function = function.__func__
            if type_(function) is not function_type:
                return chain, function
            chain.append(function)
            if not plain_keys(function.__dict__, "the attributes of %s" % text(function.__name__)):
                return chain, None
            function = dict_get(function.__dict__, "__wrapped__")
        return chain, None

    def compiled_from_source(code):
        """'' when `code` is one the test files' sources compile to (or comes from no file checked),
        else why not."""
        kind = kinds.get(file_of(code))
        if kind is None or kind[0] != "checked":
            return ""
        for expected in kind[3].get((text(code.co_name), code.co_firstlineno), ()):
            if expected == code:
                return ""
        return "is not the code compiled from " + kind[1]

    def function_check(rid, function, collected_function, path, name, unittest_case):
        """Why the function pytest is about to call for a test is not the one its file defines ('' if it is)."""
        chain, odd = functions_of(function)
        if odd is not None:
            return "forged_result: %s: pytest calls a %s, not a function" % (rid, named(type_(odd)))
        if not chain:
            return ""
        if collected_function is not None and chain[0] is not collected_function:
            return "forged_result: %s: the function pytest calls is not the one it collected" % rid
        for function in chain:
            found = origin(function.__code__)
            if found:
                return "forged_result: %s: it runs through code of the candidate's (%s)" % (rid, found)
        own = kinds.get(path)
        if unittest_case is True and dict_get(chain[0].__dict__, "__unittest_skip__") is True:
            return ""  # unittest skips it without a call (Python 2's skip puts a wrapper of its own in its place)
        if own is None or own[0] != "checked" or name not in own[4]:
            why = compiled_from_source(chain[-1].__code__)
            return "test_code_changed: %s: its function %s" % (rid, why) if why else ""
        # The file defines the test: its function, compiled from it, must be what runs (reached through
        # `__wrapped__`, or the closure of a decorator that sets none, as Python 2's functools.wraps).
        for function in chain + [cell_function for wrapper in chain for cell_function in closed_over(wrapper)]:
            code = function.__code__
            if text(code.co_name) == name and any_(
                    expected == code for expected in own[3].get((name, code.co_firstlineno), ())):
                return ""
        return "test_code_changed: %s: its function is not the code compiled from %s" % (rid, own[1])

    def closed_over(function):
        found = []
        for cell in function.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if type_(value) is function_type:
                found.append(value)
        return found

    def setup_check(rid, label, function):
        if type_(function) is not function_type or function in checked_setups:
            return
        chain, _ = functions_of(function)
        for function_ in chain:
            found = origin(function_.__code__)
            if found:
                flag("forged_result: %s: its %s runs code of the candidate's (%s)" % (rid, label, found))
                return
        why = compiled_from_source(chain[-1].__code__) if chain else ""
        if why:
            flag("test_code_changed: %s: its %s %s" % (rid, label, why))
            return
        checked_setups[function] = True

    def replacement_why(value):
        chain, odd = functions_of(value)
        if odd is not None or not chain:
            return "by a %s" % named(type_(odd if odd is not None else value))
        found = origin(chain[0].__code__)
        return "by code of the candidate's (%s)" % found if found else ""

    def replaced(group):
        """[(label, its value now)] of a group's attributes that are not what they were; and, for a
        class, what was added to it that shadows a base's attribute (or is a special method)."""
        holder, labels, names, originals, getter, had = group
        mapping = own_dict(holder)
        if not plain_keys(mapping, labels[0].rpartition(".")[0]):
            return []
        try:
            if not any_(map_(is_not, getter(mapping), originals)) and len_(mapping) == len_(had):
                return []
        except KeyError:
            pass
        found = [(label, mapping.get(name)) for label, name, original in zip_(labels, names, originals)
                 if mapping.get(name) is not original]
        if isinstance_(holder, type_):
            bases = mro_of(holder)[1:]
            for name in [text(name) for name in mapping if text(name) not in had]:
                if name in pytest_own_flags and mapping.get(name) is True:
                    continue
                if name.startswith("__") or any_(plain_keys(dict_of(base), named(base)) and name in dict_of(base)
                                                 for base in bases):
                    found.append(("%s.%s" % (named(holder), name), mapping.get(name)))
        return found

    def internals_check():
        for group in strict:
            for label, _ in replaced(group):
                flag("pytest_internals_changed: %s was replaced during the run" % label)
        for group in lenient:
            for label, value in replaced(group):
                why = replacement_why(value)
                if why:
                    flag("pytest_internals_changed: %s was replaced during the run %s" % (label, why))

    def implementations_check(implementations):
        for hook, function, wraps, trylast in implementations if type_(implementations) is list else ():
            chain, odd = functions_of(function)
            if odd is not None or not chain:
                flag("harness_reached: %s is implemented by a %s" % (text(hook), named(type_(odd or function))))
                continue
            seen_before = (chain[0], wraps is True, trylast is True, text(hook))
            if seen_before in implementations_seen:
                continue
            implementations_seen.add(seen_before)
            code = chain[0].__code__
            found = origin(code)
            if found:
                flag("harness_reached: %s is implemented by code of the candidate's (%s)" % (text(hook), found))
            elif wraps is True and trylast is True and file_of(code).startswith(place["started_in"] + "/") \
                    and text(hook) in ("pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown"):
                # Registered after the plugin, it would run inside its account and could hide what the phase raised.
                flag("pytest_internals_changed: a trylast wrapper of %s in %s"
                     % (text(hook), file_of(code)[len(place["started_in"]) + 1:]))

    def told_not_to_run(options):
        if options and type_(options) is list:
            flag("pytest_internals_changed: pytest was told not to run the tests (%s)"
                 % ", ".join(text(option) for option in options))

    def repo_nodeid(nodeid):
        """Ours for a collected test; otherwise (a collector) pytest's, moved under the rootdir's folder."""
        nodeid = text(nodeid)
        if nodeid in repo_ids:
            return repo_ids[nodeid]
        path, separator, rest = nodeid.partition("::")
        return (place["prefix"] + path if place["prefix"] else path) + separator + rest

    def raised(kind):
        """passed, skipped or failed, from the type of what was raised (None: nothing)."""
        if kind is None:
            return "passed"
        for base in mro_of(kind) if isinstance_(kind, type_) else ():
            for skipping in skip_types:
                if base is skipping:
                    return "skipped"
        return "failed"

    def kind_name(kind):
        if isinstance_(kind, type_):
            return named(kind)
        if type_(kind) is classic_class:  # Python 2's old-style classes
            return text(kind.__name__)
        return "an exception"

    def where(traceback):
        last = None
        while type_(traceback) is traceback_type:
            last, traceback = traceback, traceback.tb_next
        if last is None:
            return None
        return "%s:%d" % (under_root(file_of(last.tb_frame.f_code)), last.tb_lineno)

    # --- the plugin's events --------------------------------------------------------------------

    def configure(started_in, rootdir):
        started_in, rootdir = text(started_in), text(rootdir)
        if started_in:
            place["started_in"] = started_in
        place["prefix"] = rootdir[len(started_in) + 1:] + "/" if rootdir.startswith(started_in + "/") else ""

    def itemcollected(item_id, nodeid, path, runtest, function):
        """pytest's node ids start at its rootdir, which is below the repository's root when the ini
        file is (and a file outside the rootdir loses its path: "::test_x"); ours start at the root:
        the item's file from there, then the rest of pytest's id."""
        nodeid, path = text(nodeid), text(path)
        _, separator, rest = nodeid.partition("::")
        if separator and path.startswith(place["started_in"] + "/"):
            repo_ids[nodeid] = path[len(place["started_in"]) + 1:] + separator + rest
        chain, _ = functions_of(function)
        if type_(item_id) in int_types:
            collected[item_id] = (nodeid, runtest, chain[0] if chain else None)

    def collection_finish(nodeids, options, implementations):
        internals_check()  # every conftest is loaded by now
        implementations_check(implementations)
        told_not_to_run(options)
        nodeids = [repo_nodeid(nodeid) for nodeid in nodeids] if type_(nodeids) is list else []
        if len_(set_(nodeids)) != len_(nodeids):
            flag("pytest_internals_changed: a node id was collected twice")
        write({"event": "collected", "nodeids": nodeids}, True)

    def collectreport(nodeid, failed):
        if failed is True:
            write({"event": "collect_error", "nodeid": repo_nodeid(nodeid)}, True)

    def logstart(nodeid):
        write({"event": "start", "nodeid": repo_nodeid(nodeid)}, True)

    def setup_start(nodeid, setups):
        rid = repo_nodeid(nodeid)
        for label, function in setups if type_(setups) is list else ():
            setup_check(rid, text(label), function)

    def call_start(nodeid, item_id, path, name, function, watched, implementations, unittest_case):
        internals_check()
        implementations_check(implementations)
        rid = repo_nodeid(nodeid)
        entry = collected.get(item_id) if type_(item_id) in int_types else None
        why = function_check(rid, function, entry[2] if entry else None, text(path), text(name), unittest_case)
        if why:
            flag(why)
        calling["now"] = (text(nodeid), function, watched is True)

    def phase_end(nodeid, when, kind, stored):
        event = {"event": "phase", "nodeid": repo_nodeid(nodeid), "when": text(when),
                 "saw": raised(stored if kind is None else kind)}
        if event["when"] == "call":
            now = calling.pop("now", None)
            event["watched"] = bool(now and now[0] == text(nodeid) and now[2])
        write(event)

    def called(function, kind, traceback):
        now = calling.get("now")
        if now is None:
            flag("harness_reached: a test's function reported running outside its call phase")
            return
        rid = repo_nodeid(now[0])
        if function is not now[1]:
            flag("forged_result: %s: the function its wrapper called was swapped" % rid)
        write({"event": "called", "nodeid": rid, "saw": raised(kind), "raised": kind_name(kind) if kind else None,
               "at": where(traceback)})

    def traced(nodeid, exit):
        exit = text(exit)
        if exit:
            write({"event": "called", "nodeid": repo_nodeid(nodeid), "saw": "passed" if exit == "ran" else "failed",
                   "raised": exit[len("raised "):] or None, "at": None})

    def logreport(nodeid, when, outcome, wasxfail, seconds, subtest, may_differ, item_id, nodeid_now, runtest_now,
                  options):
        rid = repo_nodeid(nodeid)
        if subtest is True:  # pytest-subtests, pytest 9's subtests
            if text(outcome) == "failed":
                write({"event": "subtest_failed", "nodeid": rid})
            return
        if text(when) == "teardown":  # the last phase, run even when setup failed
            entry = collected.get(item_id) if type_(item_id) in int_types else None
            if entry is not None and (entry[0] != text(nodeid_now) or entry[1] is not runtest_now):
                flag("forged_result: %s: its node id or the way it runs was changed after it was collected" % rid)
            told_not_to_run(options)
        write({"event": "report", "nodeid": rid, "when": text(when), "outcome": text(outcome),
               "wasxfail": wasxfail is True, "may_differ": may_differ is True,
               "seconds": round_(seconds, 6) if type_(seconds) is int or type_(seconds) is float else 0}, text(when) == "teardown")

    def sessionfinish(exitstatus, implementations):
        internals_check()
        implementations_check(implementations)
        write({"event": "end", "exitstatus": exitstatus if type_(exitstatus) is int else -1}, True)

    handlers = {"configure": configure, "itemcollected": itemcollected, "collection_finish": collection_finish,
                "collectreport": collectreport, "logstart": logstart, "setup_start": setup_start,
                "call_start": call_start, "phase_end": phase_end, "called": called, "traced": traced,
                "logreport": logreport, "sessionfinish": sessionfinish}

    # --- what the interpreter saw (3.8+) --------------------------------------------------------

    def seen(event, args, raiser):
        if event == "object.__getattr__":  # the hook passes on only reads of the account's own frame
            flag("harness_reached: the plugin's account was looked into (%s)" % text(args[1] if len_(args) > 1 else ""))
        elif event == "exec":
            code = args[0] if args else None
            if type_(code) is code_type and text(code.co_name) == "<module>":
                kind = kinds.get(file_of(code))
                if kind is not None and kind[0] == "candidate":
                    candidate_ran[0] = True
                if kind is not None and kind[0] == "checked" and not any_(code == expected for expected in kind[2]):
                    flag("test_code_changed: %s does not run the code compiled from its source" % kind[1])
        elif event == "open":
            kind = kinds.get(text(args[0])) if args else None
            mode, flags = (text(args[1]) if len_(args) > 1 else ""), (args[2] if len_(args) > 2 else 0)
            writing = any_(letter in mode for letter in "wax+") or (
                type_(flags) is int and flags & (os_flags_writing))
            if kind is not None and kind[0] == "checked" and writing:
                flag("test_code_changed: %s was opened for writing during the run" % kind[1])
        elif event in ("compile", "code.__new__"):
            # Code the candidate's code makes is the candidate's, whatever file it says it comes from.
            name = text(args[1]) if len_(args) > 1 else ""
            found = origin(raiser.f_code) if raiser is not None else None
            if found and name:
                kind = kinds.get(name)
                if kind is not None and kind[0] == "checked":
                    flag("test_code_changed: the candidate's code (%s) compiled code named %s" % (found, kind[1]))
                else:
                    kinds[name] = ("candidate", "%s, compiled by %s" % (name, found))
        elif event == "function.__new__":
            code = args[0] if args else None
            for ours in raisers:
                if code is ours:
                    flag("harness_reached: a function was made of the plugin's own code")
        elif event in heap_walks:
            flag("harness_reached: %s was called%s" % (
                event, " (%s)" % where_frame(raiser) if raiser is not None else ""))
        elif event in hook_setters:
            found = candidate_on_stack(raiser)
            if found:
                flag("harness_reached: %s was called from the candidate's code (%s)" % (event, found))
        elif event == "object.__setattr__" and len_(args) == 3:
            target, name = args[0], text(args[1])
            if name in ("__code__", "__defaults__", "__kwdefaults__") and type_(target) is function_type:
                kind = kinds.get(file_of(target.__code__))
                found = candidate_on_stack(raiser, through_imports=False)  # asyncio's import sets one
                if kind is not None and kind[0] == "checked":
                    flag("test_code_changed: %s of %s in %s was replaced" % (name, text(target.__name__), kind[1]))
                elif found:
                    flag("harness_reached: a function's %s was replaced from the candidate's code (%s)" % (name, found))
            elif name == "__class__" and plain_keys(dict_of(type_(target)), "a class") and text(
                    dict_get(dict_of(type_(target)), "__module__", "")).startswith(("_pytest", "pluggy", "unittest")):
                flag("harness_reached: the class of one of pytest's objects was replaced")
        elif event in ("marshal.loads", "marshal.load", "ctypes.dlsym"):
            found = origin(raiser.f_code) if raiser is not None else None
            name = text(args[1]) if event == "ctypes.dlsym" and len_(args) > 1 else "Py"
            if found and name.startswith(("Py", "_Py")):
                flag("harness_reached: %s was called from the candidate's code (%s)" % (event, found))

    def where_frame(frame):
        return "%s:%d" % (under_root(file_of(frame.f_code)), frame.f_lineno)

    while True:
        message = yield candidate_ran[0]
        try:
            caller = getframe(1)
            if caller.f_code is not couriers[0] and caller.f_code is not couriers[-1]:
                flag("harness_reached: the plugin's account was handed an event by other code")
                continue
            event, args, raiser = message[0], message[1], caller.f_back
            if event != event_name:
                seen(event, args, raiser)
                continue
            if raiser is None or not any_(raiser.f_code is code for code in raisers):
                flag("harness_reached: a report event was raised by code other than the plugin's (%s)"
                     % (where_frame(raiser) if raiser is not None else "no frame"))
                continue
            found = candidate_on_stack(raiser, frames_near) if args[0] in outcome_events else None
            if found:
                flag("harness_reached: a report event was raised with the candidate's code running (%s)" % found)
            handler = handlers.get(args[0]) if args and isinstance_(args[0], str_) else None
            if handler is not None:
                handler(*args[1:])
        except exception_ as error:  # noqa: BLE001 - whatever broke the account, the run says so
            flag("harness_reached: the plugin's account failed (%s)" % named(type_(error)))


def _audit_courier(account, lock, files):
    """The audit hook: the events the account looks at go to it, one at a time; those its own work
    raises do not (the account is running already in this thread). A module's execution or a file's
    opening goes only for `files` (the test files checked, the candidate's), an attribute set only for
    the names that swap code or classes, and what only the candidate's code can do wrong only once a module of it has run
    (the account answers so)."""
    send, running_here, exception_, code_type, type_ = account.send, lock._is_owned, Exception, CodeType, type
    events, names, candidates_only, ran = AUDIT_EVENTS, SWAPPED_ATTRIBUTES, CANDIDATES_ONLY, [False]
    str_, of_type, as_str = str, _of_type, str.__str__

    def plain(value):
        """A str as an exact str (a subclass's own `__hash__` or `__eq__` never runs here), else None."""
        return value if type_(value) is str_ else as_str(value) if of_type(value, str_) else None

    def hook(event, args):
        if type_(event) is not str_ or event not in events:  # sys.audit() takes a str subclass too
            return
        if event == "exec":
            if type_(args[0]) is not code_type or plain(args[0].co_filename) not in files:
                return
        elif event == "open":
            if plain(args[0]) not in files:
                return
        elif event == "object.__setattr__":
            if plain(args[1]) not in names:
                return
        elif event == "object.__getattr__":
            if args[0] is not account:  # its frame, read through gi_frame, holds all it knows
                return
        elif event in candidates_only and not ran[0]:
            return
        if running_here():
            return
        with lock:
            try:
                if send((event, args)):
                    ran[0] = True
            except exception_:  # noqa: S110 - an audit hook that raises would fail the audited call
                pass

    return hook


def _listener(hook):
    """Adds the audit hook, once: as the repository's first code is about to run (pytest's own start-up,
    and its plugins', need not be heard)."""
    added = []

    def listen():
        if hook is not None and not added:
            added.append(True)
            sys.addaudithook(hook)

    return listen


def _direct_courier(account, lock):
    """Before Python 3.8 (no audit hooks): the plugin's events go straight to the account."""
    send = account.send

    def courier(event, *args):
        with lock:
            send((event, args))

    return courier


# --- the pytest plugin: pytest's facts handed to the account --------------------------------------


def _plugin(pytest, courier, test_timeout, listen):
    """The plugin object. It holds no key and decides nothing: replaced, unregistered or called by
    other code, it can only fall silent or be caught lying (its events come from its code alone)."""
    recording, traced_by, timeout_error, run_hooks = _recording, _frames_traced, PerTestTimeout, RUN_HOOKS
    opnames, signals, get_id, hookimpl = tuple(dis.opname), (signal.signal, signal.setitimer if hasattr(
        signal, "setitimer") else None), id, pytest.hookimpl
    function_item, unittest_item = pytest.Function, sys.modules["_pytest.unittest"].TestCaseFunction
    state = {"config": None}
    items = {}  # pytest's node id -> the item, while it runs
    setup_names = ("setUp", "tearDown", "setUpClass", "tearDownClass", "setup_method", "teardown_method",
                   "setup_class", "teardown_class")

    def implementations():
        found, config = [], state["config"]
        for name in run_hooks if config is not None else ():
            caller = getattr(config.pluginmanager.hook, name, None)
            for impl in caller.get_hookimpls() if caller is not None else ():
                found.append((name, impl.function, bool(getattr(impl, "hookwrapper", False) or
                                                        getattr(impl, "wrapper", False)), bool(impl.trylast)))
        return found

    def told_not_to_run(config):
        """The options that make pytest go through the motions without running a test, set from a
        config file or by code at import: what such a run reports says nothing."""
        return [name for name in ("setuponly", "setupplan", "collectonly")
                if config is not None and getattr(config.option, name, False)]

    def function_of(item):
        return item.obj if isinstance(item, function_item) else None

    def codes_of(function):
        """The code objects of a function and of those it wraps, outermost first."""
        found = []
        while function is not None and len(found) < 16:
            code = getattr(getattr(function, "__func__", function), "__code__", None)
            if code is not None and code not in found:
                found.append(code)
            function = getattr(function, "__wrapped__", None)
        return found

    def coroutine(function):
        """A coroutine's, or a wrapper around one (an async plugin's): a plugin runs it its own way."""
        return any(code.co_flags & 0x380 for code in codes_of(function))  # CO_COROUTINE, _ITERABLE_, CO_ASYNC_GENERATOR

    def unittest_case(item):
        case = item.__dict__.get("_testcase") or item.__dict__.get("_instance")
        return case if case is not None and hasattr(case, "_testMethodName") else None

    def setups(item):
        found = []
        for name, defs in sorted((getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", None) or {}).items()):
            found.extend(("fixture " + name, getattr(fixturedef, "func", None)) for fixturedef in defs)
        cls = getattr(item, "cls", None)
        for name in setup_names if cls is not None else ():
            value = cls.__dict__.get(name)
            if value is not None:
                found.append((name, getattr(value, "__func__", value)))
        return found

    @contextmanager
    def alarm_after_timeout():
        """SIGALRM raises PerTestTimeout in the test; only where signals reach us (POSIX, main thread)."""
        if not (test_timeout > 0 and signals[1] is not None
                and isinstance(threading.current_thread(), threading._MainThread)):  # Python 2 has no main_thread()
            yield
            return

        def on_alarm(signum, frame):
            raise timeout_error("the test ran past its timeout of %g seconds" % test_timeout)

        previous = signals[0](signal.SIGALRM, on_alarm)
        signals[1](signal.ITIMER_REAL, test_timeout)
        try:
            yield
        finally:
            signals[1](signal.ITIMER_REAL, 0)
            signals[0](signal.SIGALRM, previous)

    def phase(when):
        # trylast: inside every wrapper but the conftests' own trylast ones, so it sees what the
        # phase raised before the others, any hook or report can change it.
        @hookimpl(hookwrapper=True, trylast=True)
        def wrapper(self, item):
            items[item.nodeid] = item
            function = wrapped = case = None
            if when == "setup":
                courier(EVENT, "setup_start", item.nodeid, setups(item))
            elif when == "call":
                function = function_of(item)
                if function is not None and not coroutine(function):
                    wrapped = recording(function, courier)
                courier(EVENT, "call_start", item.nodeid, get_id(item), str(getattr(item, "path", None) or item.fspath),
                        getattr(item, "originalname", None) or item.name.partition("[")[0], function,
                        wrapped is not None or (function is not None and coroutine(function)), implementations(),
                        isinstance(item, unittest_item))
                if wrapped is not None:
                    item.obj, case = wrapped, unittest_case(item)
                    if case is not None:  # pytest 5+ sets it itself from item.obj; pytest 4.6 does not
                        setattr(case, item.name, wrapped)
            try:
                with alarm_after_timeout():
                    outcome = yield
            finally:
                if wrapped is not None:
                    item.obj = function
                    if case is not None and case.__dict__.get(item.name) is wrapped:
                        delattr(case, item.name)
            stored = getattr(item, "_excinfo", None) if when == "call" else None
            courier(EVENT, "phase_end", item.nodeid, when, outcome.excinfo[0] if outcome.excinfo else None,
                    getattr(stored[0], "type", None) if stored else None)
        return wrapper

    class Report(object):
        @hookimpl(tryfirst=True)
        def pytest_load_initial_conftests(self, early_config):
            listen()  # the repository's first code (its conftests) is about to run

        def pytest_configure(self, config):
            listen()
            state["config"] = config
            invocation = getattr(config, "invocation_params", None)  # pytest 5.1+
            started_in = str(invocation.dir) if invocation is not None else os.getcwd()
            courier(EVENT, "configure", started_in, str(getattr(config, "rootpath", None) or config.rootdir))

        @hookimpl(tryfirst=True)
        def pytest_itemcollected(self, item):
            courier(EVENT, "itemcollected", get_id(item), item.nodeid, str(getattr(item, "path", None) or item.fspath),
                    item.__dict__.get("runtest"), function_of(item))

        @hookimpl(trylast=True)
        def pytest_collection_finish(self, session):
            courier(EVENT, "collection_finish", [item.nodeid for item in session.items],
                    told_not_to_run(session.config), implementations())

        def pytest_collectreport(self, report):
            courier(EVENT, "collectreport", report.nodeid, bool(report.failed))

        def pytest_runtest_logstart(self, nodeid, location):
            courier(EVENT, "logstart", nodeid)

        def pytest_runtest_logreport(self, report):
            item = items.pop(report.nodeid, None) if report.when == "teardown" else items.get(report.nodeid)
            courier(EVENT, "logreport", report.nodeid, report.when, report.outcome, hasattr(report, "wasxfail"),
                    getattr(report, "duration", 0) or 0, type(report).__name__ == "SubTestReport",
                    item is not None and (item.get_closest_marker("xfail") is not None or hasattr(item, "_excinfo")),
                    get_id(item) if item is not None else None, item.nodeid if item is not None else None,
                    item.__dict__.get("runtest") if item is not None else None, told_not_to_run(state["config"]))

        def pytest_sessionfinish(self, session, exitstatus):
            courier(EVENT, "sessionfinish", int(exitstatus), implementations())

        @hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_pyfunc_call(self, pyfuncitem):
            """A coroutine test runs as a plugin of its own runs it (pytest's wrapper around the function
            would make it look like none): its own frames, traced, say whether it ran and how it left."""
            function = pyfuncitem.obj
            if not coroutine(function):
                yield
                return
            codes, seen = codes_of(function), {}
            previous = sys.gettrace()
            sys.settrace(traced_by(set(codes), seen, opnames))
            try:
                yield
            finally:
                sys.settrace(previous)
            exits = [seen[code] for code in codes if code in seen]  # the outermost that ran: its exit is the test's
            courier(EVENT, "traced", pyfuncitem.nodeid, exits[0] if exits else "")

        pytest_runtest_setup = phase("setup")
        pytest_runtest_call = phase("call")
        pytest_runtest_teardown = phase("teardown")

    return Report()


def _plugin_codes(plugin):
    """The code objects that may raise the plugin's events: its hooks' and the wrapper around a test."""
    codes = [_recording(None, None).__code__]
    for value in vars(type(plugin)).values():
        code = getattr(value, "__code__", None)
        if code is not None and code not in codes:
            codes.append(code)
    return tuple(codes)


def _site_packages():
    """What `site` would have added, without its sitecustomize and usercustomize imports: the
    environment's site-packages and their .pth files (an editable install's)."""
    if PYTHON2:
        return _site_packages_python2()
    import site

    prefix = sys.prefix
    site.venv(None)  # a virtualenv: its site-packages (sys.prefix becomes the virtualenv's)
    if sys.prefix == prefix:
        site.addsitepackages(None)
    else:
        site.addsitepackages(None, site.PREFIXES[1:])  # the system's too, if the virtualenv includes them


def _site_packages_python2():
    """The same on Python 2, whose `site` runs sitecustomize as it is imported: the virtualenv's
    site-packages (with -S, sys.prefix is already the virtualenv's) and its .pth files, read as
    `site` reads them: a line starting with `import` runs (a line that fails ends its file), a line
    naming a folder adds it. The folders are added once every line has run, so no line imports from
    a folder another file added (setuptools' easy-install.pth of old moves its folders first)."""
    sitedir = os.path.join(sys.prefix, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    if not os.path.isdir(sitedir):
        return
    sys.path.append(sitedir)
    added = []
    for name in sorted(os.listdir(sitedir)):  # `sitedir`: namespace packages' lines read it from this frame
        if not name.endswith(".pth") or name.startswith("."):
            continue
        try:
            with io.open(os.path.join(sitedir, name), encoding="utf-8-sig", errors="replace") as handle:
                lines = handle.read(1 << 20).splitlines()
        except EnvironmentError:
            continue
        for line in lines:
            if line.startswith(("import ", "import\t")):
                try:
                    exec(line)
                except Exception:
                    break
            elif line.strip() and not line.startswith("#"):
                added.append(os.path.abspath(os.path.join(sitedir, line.rstrip())))
    for path in added:
        if os.path.exists(path) and path not in sys.path:
            sys.path.append(path)


def _plugin_options():
    """Plugins that would run a test more than once, or elsewhere, told not to: their results
    cannot be matched with what happened (a repository's addopts may ask for them)."""
    try:
        from importlib.util import find_spec
    except ImportError:  # Python 2
        from pkgutil import find_loader as find_spec

    options = []
    if find_spec("xdist") is not None:
        options += ["-n", "0"]
    if find_spec("pytest_rerunfailures") is not None:
        options += ["--reruns", "0"]
    return options


# Options whose relative paths pytest (or a plugin of the time) reads from the ini's folder: ours is
# not the repository's, so they are made absolute.
_INI_PATH_OPTIONS = ("pythonpath", "python_paths", "site_dirs")


def legacy_pytest_ini(read, root):
    """The text of a pytest.ini holding a `[pytest]` section of the repository's setup.cfg, which
    pytest read until 4.0 and refuses since; None where pytest would read another file first or
    setup.cfg has no such section. `read(name)`: a file at the repository's root as text, or None;
    `root`: where the repository is as pytest sees it. The file is only parsed (configparser, no
    interpolation)."""
    try:
        import configparser
    except ImportError:  # Python 2
        import ConfigParser as configparser

    def has(name, marker):
        text = read(name)
        return text is not None and (marker is None or marker in text)

    if has("pytest.ini", None) or has(".pytest.ini", None) or has("pyproject.toml", "[tool.pytest.ini_options]") \
            or has("tox.ini", "[pytest]") or not has("setup.cfg", "[pytest]"):
        return None
    try:
        parser = configparser.RawConfigParser(strict=False)
    except TypeError:  # Python 2's own ConfigParser (pytest 4.6's backport takes it)
        parser = configparser.RawConfigParser()
    parser.optionxform = str
    try:
        (getattr(parser, "read_file", None) or parser.readfp)(io.StringIO(read("setup.cfg")))  # readfp: Python 2
    except configparser.Error:
        return None
    if not parser.has_section("pytest") or parser.has_section("tool:pytest"):
        return None
    lines = ["[pytest]"]
    for key, value in parser.items("pytest"):
        if key in _INI_PATH_OPTIONS:
            value = " ".join(posixpath.join(root, path) for path in value.split())
        parts = [part.strip() for part in value.split("\n") if part.strip()]
        lines.append(key + " =" + "".join(("\n    " if n else " ") + part for n, part in enumerate(parts)))
    return "\n".join(lines) + "\n"


def _read_here(name):
    try:
        with io.open(name, encoding="utf-8", errors="replace") as handle:
            return handle.read(1 << 20)
    except EnvironmentError:
        return None


def _legacy_config_options(pytest_version):
    """pytest 4 on refuses a setup.cfg `[pytest]` section: the same options, from a file of ours."""
    if int(pytest_version.split(".")[0]) < 4:
        return []
    text = legacy_pytest_ini(_read_here, os.getcwd())
    if text is None:
        return []
    ini = os.path.join(os.path.dirname(os.path.abspath(__file__)), "legacy-setup-cfg.ini")
    with io.open(ini, "w", encoding="utf-8") as handle:
        handle.write(text)
    return ["-c", ini, "--rootdir", os.getcwd()]


def _inside(path, folder):
    path = os.path.realpath(path)
    return path == folder or path.startswith(folder + os.sep)



def _main():
    """Start pytest as `python -m pytest` would, with the plugin (see the docstring)."""
    folder = os.path.dirname(os.path.abspath(__file__))
    channel = _channel(folder)
    test_timeout = float(os.environ.pop("COMMITGYM_TEST_TIMEOUT", "0") or 0)
    _site_packages()
    sys.dont_write_bytecode = True
    # The working copy's folders an install put on sys.path (an editable install's, src/) wait until
    # pytest and the plugin are loaded: a module of the repository's named like one pytest tries at
    # import (enum on Python 2, nt, org) would otherwise run before the plugin's account begins.
    repository, every_path = os.path.realpath(os.getcwd()), list(sys.path)
    sys.path[:] = [path for path in every_path if not _inside(path, repository)]
    import unittest

    import pytest  # after the channel and the site folders: nothing of the repository has run yet

    write = _line_writer(channel[0], channel[1]) if channel else (lambda event, now=False: None)
    checked = dict((path, _compiled(path)) for path in _test_files(sys.argv[1:], repository))
    _rewrites_served(dict((path, found[0][1]) for path, found in checked.items() if found and len(found[0]) > 1))
    account = _account(write, repository, dict((path, found) for path, found in checked.items() if found),
                       channel[2] if channel else [], _watched(),
                       (pytest.skip.Exception, pytest.xfail.Exception, unittest.SkipTest))
    next(account)
    lock = threading.RLock()
    untrusted = channel[2] if channel else []
    files = frozenset(list(checked) + [os.path.join(repository, path) for path in untrusted] +
                      [os.path.realpath(os.path.join(repository, path)) for path in untrusted])
    courier = _audit_courier(account, lock, files) if AUDITED else _direct_courier(account, lock)
    plugin = _plugin(pytest, sys.audit if AUDITED else courier, test_timeout, _listener(courier if AUDITED else None))
    account.send(((courier.__code__,), _plugin_codes(plugin)))
    # From here on the account is reached only through the courier: this frame, which lasts the whole
    # run, keeps nothing that could write.
    del write, checked, channel, account, courier, untrusted, files
    options = _legacy_config_options(pytest.__version__) + sys.argv[1:] + _plugin_options()
    sys.path[:] = [os.getcwd()] + every_path
    sys.argv[0] = "pytest"
    sys.exit(pytest.main(options, plugins=[plugin]))


if __name__ == "__main__":
    _main()
