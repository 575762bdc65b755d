"""Our pytest plugin and the script that starts pytest with it: each test's outcome, written to a
report as the run goes, through a channel the tested code cannot cheaply forge.

pytest_run.py copies this file into a folder beside the repository, with a key file, and runs
`python -E -s -S <this file> <pytest arguments>` in the sandbox, so it must run wherever an old
commit's tests run: Python 2.7 and 3.7 to 3.14, pytest 4.6 to 9.x, standard library only.

Start-up: `-E -s -S` ignore PYTHON* variables and the user's site folder, and skip `site`, so no
sitecustomize.py, usercustomize.py or .pth file of the repository runs; the script's own folder
leaves `sys.path` first thing (what `-I` does, which Python 2 lacks). This script then adds the environment's
site-packages (their .pth files: an editable install's), imports pytest, and only then puts the
repository first on `sys.path`, as `python -m pytest` would; the plugin is registered before any
conftest loads.

The channel: before anything else the script reads the run's key and the report's path from the
key file, opens the report, and removes both names (the host reads the report through a handle of
its own). Each line is `<mac> <json>`: an HMAC of the JSON under the key and a sequence number
from 0; the host checks every MAC and the order. The key, the report and everything the plugin
knows live in closures of `_plugin`, not in names a conftest can import and replace.

The plugin's own account: trylast wrappers of pytest_runtest_setup/call/teardown (inside the
other wrappers) see what each phase raised before any other hook can rewrite the report; a test
whose reports disagree is forged. The functions pytest runs a test with are fingerprinted at load
and checked after every test; a test whose node id, runtest or function's code changed after
collection is forged. Where anything but pytest itself implements pytest_pyfunc_call (a plugin
for async tests, or a conftest that returns True without calling the test), a trace of the
test's own frames shows whether its function ran and whether it raised: a passing call whose
function never ran, or raised, is forged.

Lines (JSON):
  {"seq", "event": "collected", "nodeids"}             the tests collected
  {"seq", "event": "start", "nodeid"}                  before a test runs
  {"seq", "event": "result", "nodeid", "status", "seconds"[, "forged"]}  when it has ended
  {"seq", "event": "collect_error", "nodeid"}          a file or class that failed to collect
  {"seq", "event": "tampered", "what"}                 pytest's internals were changed, or a repository
                                                       wrapper runs inside the plugin's account
  {"seq", "event": "end", "exitstatus", "results"}     when the session ends

Statuses: PASSED, FAILED, ERROR (setup or teardown failed), SKIPPED, XFAIL. An unexpected
pass is PASSED, or FAILED when the xfail is strict (pytest reports it failed); a failed subtest
fails its test. Node ids are relative to the directory pytest was started in (the repository's
root), even when pytest's rootdir is below it.
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
import hashlib
import hmac
import io
import json
import os
import posixpath
import signal
import threading
from contextlib import contextmanager


def _channel():
    """A writer of MAC'd, numbered lines to the report; the key and the names are gone once this
    returns. None when the key file is missing (the plugin then writes nothing)."""
    key_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "key")
    try:
        with open(key_path) as handle:
            key_hex, report_path = handle.read().split("\n")[:2]
    except (EnvironmentError, ValueError):  # EnvironmentError: Python 2's IOError is no OSError
        return None
    os.unlink(key_path)
    report = open(report_path, "a")
    os.unlink(report_path)
    key, counter, lock = binascii.unhexlify(key_hex), [0], threading.Lock()
    # Taken now, before the repository's code runs: replacing json.dumps later changes nothing here.
    dumps, mac, sha256, append, flush = json.dumps, hmac.new, hashlib.sha256, report.write, report.flush

    def write(line):
        with lock:
            line["seq"] = counter[0]
            counter[0] += 1
            body = dumps(line, sort_keys=True)
            append(mac(key, body.encode("utf-8"), sha256).hexdigest() + " " + body + "\n")
            flush()  # the host reads it once the process has ended: the kernel has it

    return write


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


def _fingerprint():
    """The functions pytest runs a test with: a repository that replaces one forges outcomes."""
    import _pytest.python
    import _pytest.reports
    import _pytest.runner

    def attribute(cls, name):
        """The class's own object for `name` (a classmethod or property itself: the same every time)."""
        for klass in cls.__mro__:
            if name in klass.__dict__:
                return klass.__dict__[name]
        return None

    found = {}
    for name in ("call_and_report", "call_runtest_hook", "runtestprotocol", "pytest_runtest_makereport",
                 "pytest_runtest_call", "check_interactive_exception"):
        found["runner." + name] = getattr(_pytest.runner, name, None)
    found["python.pytest_pyfunc_call"] = getattr(_pytest.python, "pytest_pyfunc_call", None)
    for cls, names in ((_pytest.runner.CallInfo, ("from_call",)), (_pytest.reports.TestReport, ("from_item_and_call",)),
                       (_pytest.python.Function, ("runtest",)),
                       (_pytest.reports.BaseReport, ("passed", "failed", "skipped"))):
        for name in names:
            found[cls.__name__ + "." + name] = attribute(cls, name)
    return found


class PerTestTimeout(BaseException):
    """Raised inside a test that ran past COMMITGYM_TEST_TIMEOUT (a BaseException, so the
    test's own `except Exception` does not swallow it)."""


def _plugin(pytest, write, test_timeout):
    """The plugin object; its state is in this function's closure."""
    skip_exception, xfail_exception = pytest.skip.Exception, pytest.xfail.Exception
    opnames = tuple(dis.opname)
    fingerprint = _fingerprint
    as_loaded = fingerprint()
    tampered = set()
    place = {"started_in": os.getcwd(), "prefix": ""}  # the repository's root; pytest's rootdir below it
    repo_ids = {}  # pytest's node id -> ours, for each collected test
    collected_as = {}  # id(item) -> (its node id, its own runtest) when collected
    phases = {}  # node id -> (when, outcome, wasxfail, seconds) of its reports so far
    happened = {}  # node id -> {phase: "passed" | "failed" | "skipped"}, from what the phase raised
    items = {}  # node id -> the item, while it runs
    collected_codes = {}  # id(item) -> the code of its function and of those it wraps, when collected
    belied_calls = {}  # node id -> what its function did that a passing call phase would belie
    subtest_failed = set()
    results = [0]
    config_of = [None]  # the session's config, once collected

    def check_internals():
        for name, value in fingerprint().items():
            if value is not as_loaded[name] and name not in tampered:
                tampered.add(name)
                write({"event": "tampered", "what": name + " was replaced during the run"})
        for what in wrappers_inside():
            if what not in tampered:
                tampered.add(what)
                write({"event": "tampered", "what": what})

    def wrappers_inside():
        """The repository's own trylast wrappers of a phase: registered after this plugin, they run
        inside its account and could hide what the phase raised."""
        config, root = place.get("config"), os.path.join(place["started_in"], "")
        for name in ("pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown") if config else ():
            for impl in getattr(config.pluginmanager.hook, name).get_hookimpls():
                wraps = getattr(impl, "hookwrapper", False) or getattr(impl, "wrapper", False)
                code = getattr(impl.function, "__code__", None)
                if wraps and impl.trylast and code is not None and os.path.abspath(code.co_filename).startswith(root):
                    yield "a trylast wrapper of %s in %s" % (name, os.path.relpath(code.co_filename, root))

    def repo_nodeid(nodeid):
        """Ours for a collected test; otherwise (a collector) pytest's, moved under the rootdir's folder."""
        if nodeid in repo_ids:
            return repo_ids[nodeid]
        if not place["prefix"]:
            return nodeid
        path, separator, rest = nodeid.partition("::")
        return posixpath.normpath(place["prefix"] + path) + separator + rest

    def outcome_of(when, excinfo, item):
        """What the phase did, from the exception it raised (for a unittest case, the first it stored)."""
        if excinfo is None:
            stored = getattr(item, "_excinfo", None) if when == "call" else None
            if not stored:
                return "passed"
            kind = getattr(stored[0], "type", None)
        else:
            kind = excinfo[0]
        if kind is not None and issubclass(kind, (skip_exception, xfail_exception)):
            return "skipped"
        return "failed"

    def status_of(nodeid, reported):
        by_phase = dict((when, (outcome, wasxfail)) for when, outcome, wasxfail, _ in reported)
        setup, call, teardown = by_phase.get("setup"), by_phase.get("call"), by_phase.get("teardown")
        if (setup is not None and setup[0] == "failed") or (teardown is not None and teardown[0] == "failed"):
            return "ERROR"
        for phase in (setup, call):
            if phase is not None and phase[0] == "skipped":
                return "XFAIL" if phase[1] else "SKIPPED"
        if (call is not None and call[0] == "failed") or nodeid in subtest_failed:
            return "FAILED"
        if call is None:
            return "ERROR"  # set up and torn down, never run (--setup-only, --setup-plan)
        return "PASSED"  # a non-strict unexpected pass included

    def forgery(nodeid, reported):
        """Why the reports of this test are not what happened in it ("" when they are)."""
        seen_phases = happened.pop(nodeid, {})
        item = items.pop(nodeid, None)
        belied = belied_calls.pop(nodeid, "")
        if item is not None and collected_as.get(id(item)) != (item.nodeid, item.__dict__.get("runtest")):
            return "its node id or the way it runs was changed after it was collected"
        codes = collected_codes.get(id(item), ())
        if codes and codes[-1] not in codes_of(item):
            return "its function's code was changed after it was collected"
        if belied and seen_phases.get("call") == "passed":
            return belied + ", though its call passed"
        may_differ = item is not None and (item.get_closest_marker("xfail") is not None or hasattr(item, "_excinfo"))
        for when, outcome, _, _ in reported:
            seen = seen_phases.get(when)
            if seen is None:
                return "a %s report came without the phase running" % when
            if outcome == seen:
                continue
            # xfail turns a failure (of any phase) into a skip and a strict unexpected pass into a
            # failure; a unittest case's unexpected success fails it without an exception.
            if may_differ and ((seen, outcome) == ("failed", "skipped")
                               or (when == "call" and (seen, outcome) == ("passed", "failed"))):
                continue
            return "the %s phase %s but was reported %s" % (when, seen, outcome)
        return ""

    def runs_nothing(config):
        """The options that make pytest go through the motions without running a test, set from
        a config file or by code at import: what such a run reports says nothing."""
        if config is None:
            return
        asked = [name for name in ("setuponly", "setupplan", "collectonly")
                 if getattr(config.option, name, False)]
        if asked:
            write({"event": "tampered", "what": "pytest was told not to run the tests (%s)" % ", ".join(asked)})

    @contextmanager
    def alarm_after_timeout():
        """SIGALRM raises PerTestTimeout in the test; only where signals reach us (POSIX, main thread)."""
        if not (test_timeout > 0 and hasattr(signal, "setitimer")
                and isinstance(threading.current_thread(), threading._MainThread)):  # Python 2 has no main_thread()
            yield
            return

        def on_alarm(signum, frame):
            raise PerTestTimeout("the test ran past its timeout of %g seconds" % test_timeout)

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, test_timeout)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def codes_of(item):
        """The code objects of the test's function and of the functions it wraps, outermost first."""
        found, function = [], getattr(item, "obj", None) if isinstance(item, pytest.Function) else None
        while function is not None and len(found) < 16:
            code = getattr(getattr(function, "__func__", function), "__code__", None)
            if code is not None and code not in found:
                found.append(code)
            function = getattr(function, "__wrapped__", None)
        return found

    def others_call_tests():
        """Whether anything but pytest's own implementation may call (or not call) a test's function."""
        import _pytest.python

        hook = place["config"].pluginmanager.hook.pytest_pyfunc_call
        callers = [impl.function for impl in hook.get_hookimpls()
                   if not (getattr(impl, "hookwrapper", False) or getattr(impl, "wrapper", False))]
        return callers != [_pytest.python.pytest_pyfunc_call]

    @contextmanager
    def frames_watched(codes, seen):
        """Trace only the frames of `codes`: `seen` gets, for each that ran, how it last left: "ran"
        by a return instruction, else "raised <the exception>" (a coroutine's frame leaves at every
        await and is called again; its last exit counts)."""
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

        if not codes:
            yield
            return
        previous = sys.gettrace()
        sys.settrace(on_call)
        try:
            yield
        finally:
            sys.settrace(previous)

    def function_account(excinfo, codes, seen):
        """What the test's function did, where a passing call phase would contradict it ("" otherwise)."""
        if excinfo is not None:  # an outer wrapper of pytest_pyfunc_call may have swallowed it
            return "pytest_pyfunc_call raised " + getattr(excinfo[0], "__name__", "an exception")
        exits = [seen[code] for code in codes if code in seen]
        if codes and not exits:
            return "its function never ran"
        if exits and exits[0].startswith("raised "):
            return "its function " + exits[0]  # the outermost that ran: the one whose exit is the test's
        return ""

    def phase(when):
        # trylast: inside every wrapper but the conftests' own trylast ones, so it sees what the
        # phase raised before the others, any hook or report can change it.
        @pytest.hookimpl(hookwrapper=True, trylast=True)
        def wrapper(self, item):
            items[item.nodeid] = item
            with alarm_after_timeout():
                outcome = yield
            happened.setdefault(item.nodeid, {})[when] = outcome_of(when, outcome.excinfo, item)
        return wrapper

    class Report(object):
        def pytest_configure(self, config):
            place["config"] = config
            invocation = getattr(config, "invocation_params", None)  # pytest 5.1+
            if invocation is not None:
                place["started_in"] = str(invocation.dir)
            rootdir = str(getattr(config, "rootpath", None) or config.rootdir)
            relative = os.path.relpath(rootdir, place["started_in"]).replace(os.sep, "/")
            place["prefix"] = "" if relative == "." or relative.startswith("..") else relative + "/"

        @pytest.hookimpl(tryfirst=True)
        def pytest_itemcollected(self, item):
            """pytest's node ids start at its rootdir, which is below the repository's root when
            the ini file is (and a file outside the rootdir loses its path: "::test_x"); ours
            start at the root: the item's file from there, then the rest of pytest's id."""
            path, separator, rest = item.nodeid.partition("::")
            if separator:
                relative = os.path.relpath(str(getattr(item, "path", None) or item.fspath), place["started_in"])
                if not relative.startswith(".."):
                    repo_ids[item.nodeid] = relative.replace(os.sep, "/") + separator + rest
            collected_as[id(item)] = (item.nodeid, item.__dict__.get("runtest"))
            collected_codes[id(item)] = tuple(codes_of(item))

        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(self, session):
            check_internals()  # every conftest is loaded by now
            config_of[0] = session.config
            runs_nothing(session.config)
            nodeids = [repo_nodeid(item.nodeid) for item in session.items]
            if len(set(nodeids)) != len(nodeids):
                write({"event": "tampered", "what": "a node id was collected twice"})
            write({"event": "collected", "nodeids": nodeids})

        def pytest_collectreport(self, report):
            if report.failed:
                write({"event": "collect_error", "nodeid": repo_nodeid(report.nodeid)})

        def pytest_runtest_logstart(self, nodeid, location):
            phases[nodeid] = []
            write({"event": "start", "nodeid": repo_nodeid(nodeid)})

        def pytest_runtest_logreport(self, report):
            if type(report).__name__ == "SubTestReport":  # pytest-subtests, pytest 9's subtests
                if report.failed:
                    subtest_failed.add(report.nodeid)
                return
            reported = phases.setdefault(report.nodeid, [])
            reported.append((report.when, report.outcome, hasattr(report, "wasxfail"),
                             getattr(report, "duration", 0) or 0))
            if report.when != "teardown":  # teardown is the last phase, run even when setup failed
                return
            del phases[report.nodeid]
            check_internals()
            runs_nothing(config_of[0])
            line = {"event": "result", "nodeid": repo_nodeid(report.nodeid),
                    "status": status_of(report.nodeid, reported),
                    "seconds": round(sum(phase[3] for phase in reported), 6)}
            subtest_failed.discard(report.nodeid)
            forged = forgery(report.nodeid, reported)
            if forged:
                line["forged"] = forged
            results[0] += 1
            write(line)

        def pytest_sessionfinish(self, session, exitstatus):
            check_internals()
            write({"event": "end", "exitstatus": int(exitstatus), "results": results[0]})

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_pyfunc_call(self, pyfuncitem):
            # Python 2's pluggy drops what is not a BaseException (an old-style class raised) without a
            # word: the test's own frames say whether it raised.
            watched = others_call_tests() or PYTHON2
            codes = collected_codes.get(id(pyfuncitem), ()) if watched else ()
            seen = {}
            with frames_watched(codes, seen):
                outcome = yield
            belied = function_account(outcome.excinfo, codes, seen)
            if belied:
                belied_calls[pyfuncitem.nodeid] = belied

        pytest_runtest_setup = phase("setup")
        pytest_runtest_call = phase("call")
        pytest_runtest_teardown = phase("teardown")

    return Report()


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
    write = _channel() or (lambda line: None)
    test_timeout = float(os.environ.pop("COMMITGYM_TEST_TIMEOUT", "0") or 0)
    _site_packages()
    sys.dont_write_bytecode = True
    # The working copy's folders an install put on sys.path (an editable install's, src/) wait until
    # pytest and the plugin are loaded: a module of the repository's named like one pytest tries at
    # import (enum on Python 2, nt, org) would otherwise run before the plugin's account begins.
    repository, every_path = os.path.realpath(os.getcwd()), list(sys.path)
    sys.path[:] = [path for path in every_path if not _inside(path, repository)]
    import pytest  # after the channel and the site folders: nothing of the repository has run yet

    plugin = _plugin(pytest, write, test_timeout)
    options = _legacy_config_options(pytest.__version__) + sys.argv[1:] + _plugin_options()
    sys.path[:] = [os.getcwd()] + every_path
    sys.argv[0] = "pytest"
    sys.exit(pytest.main(options, plugins=[plugin]))


if __name__ == "__main__":
    _main()
