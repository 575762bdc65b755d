"""Code older than every Python a sandbox has: Python 2 code, and code using what a later Python
removed from the standard library, where no Python from before the removal is there to run it."""

import ast
import operator
import posixpath
import re
from dataclasses import replace
from pathlib import Path
from typing import Optional, Sequence

from worker.engine.env.recipes import REPO, declared_python
from worker.engine.env.resolve import release_tuple
from worker.engine.env.runtimes import is_python2

# What Python 3 says of Python 2 code.
PYTHON2 = re.compile(r"Missing parentheses in call to '(print|exec)'|multiple exception types must be parenthesized"
                     r"|leading zeros in decimal integer literals are not permitted"
                     r"|cannot import name '(izip|izip_longest|imap|ifilter|ifilterfalse)' from 'itertools'"
                     r"|No module named '(urllib2|urlparse|StringIO|cStringIO|ConfigParser|Queue|cPickle|httplib|"
                     r"__builtin__|exceptions|HTMLParser|Cookie|cookielib|SocketServer|Tkinter)'"
                     r"|name '(xrange|basestring|unicode|unichr|raw_input|execfile|reduce|long|file)' is not defined"
                     # Python 2's lists where Python 3 gives views and iterators: `range(3) * 2`, `d.keys()[0]`.
                     r"|unsupported operand type\(s\) for [*+]: '(range|map|filter|zip|dict_keys|dict_values|dict_items)'"
                     r"|'(map|filter|zip|dict_keys|dict_values|dict_items)' object is not subscriptable")
SCAN_CHARS = 256 << 10  # of a step's output, the end is read: the error that ended it is there
# Python 2 statements, as a traceback shows the line of a SyntaxError (Pythons before 3.10 say only
# "invalid syntax" of them): `except E, e:`, `print x`, `print >>f, x`, `raise E, "why"`, `exec code`.
# [ \t], never \s: a pattern that could cross lines would rescan a hostile run of blank lines.
_PYTHON2_STATEMENT = (r"E?[ \t]+(?:except[ \t]+[\w.]+[ \t]*,[ \t]*\w+[ \t]*:|print[ \t]*>>[^\n]*"
                      r"|print[ \t]+[\"'\w%][^\n]*|raise[ \t]+[\w.]+[ \t]*,[^\n]+|exec[ \t]+[\"'\w][^\n]*)$")
_PYTHON2_LINE = re.compile(rf"^{_PYTHON2_STATEMENT}", re.MULTILINE)
# The same line under the frame it is in: a file of the repository's, or setup.py as setuptools runs it.
_PYTHON2_FRAME_LINE = re.compile(rf'File "([^"\n]+)", line \d+\n{_PYTHON2_STATEMENT}', re.MULTILINE)
# A traceback's frame, as pytest shows it ("path.py:12: in <module>") or as Python does.
_FRAME = re.compile(r'^E?[ \t]*(?:File "([^"\n]+)", line \d+|([^\s:]+\.py):\d+: in )', re.MULTILINE)
_NO_MODULE = re.compile(r"No module named '([A-Za-z_][A-Za-z0-9_]*)'")
_SITE_PACKAGES = re.compile(r"site-packages/([A-Za-z_][A-Za-z0-9_]*)")
_RUNNER_MODULES = {"_pytest", "pytest", "pluggy", "py"}
_OWN_BUILD_FAILED = f"@ file://{REPO}`"  # uv: "Failed to build `name @ file:///workspace/repo`"
_FILE_FRAME = re.compile(r'File "([^"\n]+)", line \d+')


def _tail(output: str) -> str:
    return output[-SCAN_CHARS:]


def dependency_of(output: str) -> str:
    """The top-level module of an installed distribution the failure happened in (the traceback's
    innermost frame is in site-packages), or ""."""
    frames = _FRAME.findall(_tail(output))
    innermost = _SITE_PACKAGES.search("".join(frames[-1])) if frames else None
    if not innermost or innermost.group(1) in _RUNNER_MODULES:
        return ""  # the floor answers for pytest and what it needs
    return innermost.group(1)


def own_top_level_modules(files: frozenset[str]) -> frozenset[str]:
    """The modules and packages a working copy's files (working_copy_files) give it at its root or in src/."""
    own = set()
    for path in files:
        parts = Path(path).parts
        if parts[0] == "src" and len(parts) > 1:
            parts = parts[1:]
        if len(parts) > 1 or parts[0].endswith(".py"):
            own.add(parts[0].removesuffix(".py"))
    return frozenset(own)


def _implicit_relative_import(output: str, files: frozenset[str]) -> bool:
    """Python 2's `import sibling` in a package's module: Python 3 looks for `sibling` at the top level
    only, and says it has no such module although the importing file's folder holds it."""
    missing, frames = _NO_MODULE.findall(output), _FRAME.findall(output)
    if not missing or not frames:
        return False
    folder = posixpath.dirname("".join(frames[-1]).removeprefix(f"{REPO}/"))
    name = missing[-1]
    return bool(folder) and not folder.startswith(("/", "..")) and name not in own_top_level_modules(files) and (
        f"{folder}/{name}.py" in files or f"{folder}/{name}/__init__.py" in files)


def _own_line(output: str) -> bool:
    """A Python 2 line shown under a frame of the repository's own: its files, or its setup.py where
    the build that failed was the repository's (setuptools runs setup.py as "<string>")."""
    own_build = _OWN_BUILD_FAILED in output
    return any(found.group(1).startswith(f"{REPO}/") or (found.group(1) == "<string>" and own_build)
               for found in _PYTHON2_FRAME_LINE.finditer(output))


def python2_code(output: str, *, installing: bool = False, files: frozenset[str] = frozenset()) -> bool:
    """Whether what Python 3 printed shows the repository's code is Python 2: the line of a
    SyntaxError in its own files, or an implicit relative import between its `files` (the working
    copy's paths); collecting, also what Python said of code that is not a dependency's (whose old
    release is lifted instead)."""
    output = _tail(output)
    if ("SyntaxError" in output and _own_line(output)) or _implicit_relative_import(output, files):
        return True
    if installing or dependency_of(output):
        return False
    return bool(PYTHON2.search(output) or ("SyntaxError" in output and _PYTHON2_LINE.search(output)))


# Run by a Python 2 and each Python 3 in their sandboxes, on files of the working copy: whether each
# parses ("ok"), is refused by the parser ("syntax"), or could not be read ("other"). compile() only
# parses and compiles: nothing of the file runs. Written for both Pythons.
PARSE_SCRIPT = """
import sys
for path in sys.argv[1:]:
    try:
        with open(path, "rb") as source_file:
            source = source_file.read(%d + 1)
        if len(source) > %d:
            raise ValueError("too large")
        compile(source, path, "exec", 0, True)
        print("ok")
    except SyntaxError:
        print("syntax")
    except Exception:
        print("other")
""" % ((1 << 20,) * 2)
PARSED_AT_MOST = 10  # files a failed step's SyntaxErrors name, asked of the parsers at most


def syntax_error_files(output: str, files: frozenset[str], *, installing: bool = False) -> list[str]:
    """The working copy's files (its paths: `files`) a SyntaxError in the output is in: the frame
    shown last before it; setup.py where the repository's own build ran it as "<string>"."""
    named, frame = [], ""
    own_build = installing and _OWN_BUILD_FAILED in output
    for line in _tail(output).splitlines():
        found = _FILE_FRAME.search(line)
        if found:
            frame = found.group(1)
        elif "SyntaxError" in line and frame:
            own_setup = frame == "<string>" and own_build
            path = "setup.py" if own_setup else posixpath.normpath(frame.removeprefix(f"{REPO}/"))
            if path in files and path not in named:
                named.append(path)
            frame = ""
    return named[:PARSED_AT_MOST]


def parse_answers(output: str, count: int) -> list[str]:
    """What PARSE_SCRIPT printed for `count` files, one answer a file; [] where it did not say."""
    answers = output.split()
    return answers if len(answers) == count and set(answers) <= {"ok", "syntax", "other"} else []


# setup.py stopping on this Python: what stops it, and the tests of the Python's version it reads.
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge}


def setup_refuses(setup_py: str, version: str) -> bool:
    """Whether setup.py stops at module level on this Python ("3.9") where Python 2.7 would go on:
    a raise, sys.exit() or a failed assert, under tests of the Python's version (sys.version_info,
    sys.version, six.PY3, a name bound to such a test) that hold here and fail on Python 2.7; read,
    never run. "Python 3 support en route" is Python 2 code."""
    try:
        module = ast.parse(setup_py[:1 << 20])
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    names = {target.id: node.value for node in module.body if isinstance(node, ast.Assign)
             for target in node.targets if isinstance(target, ast.Name)}
    here, python2 = (*release_tuple(version), 0, 0)[:3], (2, 7, 18)
    for stop, path in _stops(module.body, ()):
        tests = [*path, (stop.test, False)] if isinstance(stop, ast.Assert) else path
        if tests and all(_version_test(test, here, names) is holds for test, holds in tests) and any(
                _version_test(test, python2, names) is (not holds) for test, holds in tests):
            return True
    return False


def _stops(body: list, path: tuple) -> list:
    """(statement, the tests on its way and whether each holds there) for each statement at module
    level that stops the module: raise, assert, a call of exit()."""
    found = []
    for node in body:
        if isinstance(node, (ast.Raise, ast.Assert)) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                                                         and _called(node.value.func) in ("exit", "quit", "_exit")):
            found.append((node, path))
        elif isinstance(node, ast.If):
            found += _stops(node.body, (*path, (node.test, True))) + _stops(node.orelse, (*path, (node.test, False)))
        elif isinstance(node, (ast.Try, ast.With)):
            found += _stops(node.body, path)
    return found


def _called(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _version_test(node: ast.expr, version: tuple, names: dict, depth: int = 0) -> Optional[bool]:
    """Whether a test of the Python's version holds on `version`; None where it is not only that."""
    value = _version_value(node, version, names, depth)
    return None if value is None else bool(value)


def _version_value(node: ast.expr, version: tuple, names: dict, depth: int):
    """The value of an expression made of the Python's version and literals; None otherwise (or
    past 20 levels deep: a name bound to itself, a hostile `not not not ...`)."""
    if depth > 20:
        return None

    def value(child):
        return _version_value(child, version, names, depth + 1)

    sys_attribute = node.attr if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) else ""
    owner = node.value.id if sys_attribute else ""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, str)):
        return node.value
    if isinstance(node, ast.Tuple):
        items = [value(item) for item in node.elts]
        return None if None in items else tuple(items)
    if (owner, sys_attribute) == ("sys", "version_info") or (isinstance(node, ast.Name) and node.id == "version_info"):
        return (*version, "final", 0)
    if (owner, sys_attribute) == ("sys", "version"):
        return "%d.%d.%d" % version
    if (owner, sys_attribute) == ("sys", "hexversion"):
        return version[0] << 24 | version[1] << 16 | version[2] << 8 | 0xF0
    if owner == "six" and sys_attribute in ("PY2", "PY3"):
        return version[0] == int(sys_attribute[-1])
    if isinstance(node, ast.Attribute) and node.attr in ("major", "minor", "micro"):
        of = value(node.value)
        return of[("major", "minor", "micro").index(node.attr)] if isinstance(of, tuple) else None
    if isinstance(node, ast.Name) and node.id in names:
        return value(names[node.id])
    if isinstance(node, ast.Subscript):
        of, index = value(node.value), node.slice
        if isinstance(index, ast.Slice):
            bounds = [value(bound) if bound is not None else None for bound in (index.lower, index.upper)]
            part = slice(*bounds) if all(bound is None or isinstance(bound, int) for bound in bounds) else None
        else:
            part = value(index)
        try:
            return of[part] if isinstance(of, (tuple, str)) and isinstance(part, (int, slice)) else None
        except IndexError:
            return None
    if isinstance(node, ast.Compare):
        values = [value(node.left), *(value(right) for right in node.comparators)]
        if None in values or any(type(op) not in _COMPARE for op in node.ops):
            return None
        try:
            return all(_COMPARE[type(op)](left, right) for op, left, right in zip(node.ops, values, values[1:]))
        except TypeError:
            return None
    if isinstance(node, ast.BoolOp):
        tests = [_version_test(item, version, names, depth + 1) for item in node.values]
        decided = isinstance(node.op, ast.Or)  # what settles an `or` (True) or an `and` (False)
        return decided if decided in tests else None if None in tests else not decided
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        test = _version_test(node.operand, version, names, depth + 1)
        return None if test is None else not test
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith" \
            and len(node.args) == 1 and not node.keywords:
        of, prefix = value(node.func.value), value(node.args[0])
        return of.startswith(prefix) if isinstance(of, str) and isinstance(prefix, (str, tuple)) else None
    return None


_ABCS = ("Awaitable Coroutine AsyncIterable AsyncIterator AsyncGenerator Hashable Iterable Iterator Generator "
         "Reversible Sized Container Callable Collection Set MutableSet Mapping MutableMapping MappingView KeysView "
         "ItemsView ValuesView Sequence MutableSequence ByteString").split()
# (module, names) a Python removed, by the Python that removed them: what the code imports or reads
# from the module there fails as ImportError or AttributeError.
STDLIB_REMOVALS: dict[str, dict[str, tuple[str, ...]]] = {
    "3.8": {"time": ("clock",), "platform": ("linux_distribution", "dist"), "cgi": ("escape",)},
    "3.9": {"base64": ("encodestring", "decodestring"), "fractions": ("gcd",),
            "xml.etree.ElementTree": ("Element.getchildren", "Element.getiterator")},
    "3.10": {"collections": tuple(_ABCS), "formatter": ("*",), "parser": ("*",), "symbol": ("*",)},
    "3.11": {"asyncio": ("coroutine",), "inspect": ("getargspec", "formatargspec"), "binhex": ("*",),
             "gettext": ("lgettext", "ldgettext", "lngettext", "ldngettext", "bind_textdomain_codeset")},
    "3.12": {"imp": ("*",), "distutils": ("*",), "asynchat": ("*",), "asyncore": ("*",), "smtpd": ("*",),
             "unittest": ("findTestCases", "makeSuite", "getTestCaseNames"), "configparser": ("SafeConfigParser",),
             "pkgutil": ("ImpImporter", "ImpLoader")},
    "3.13": {module: ("*",) for module in ("cgi", "cgitb", "crypt", "imghdr", "mailcap", "nntplib", "pipes", "sndhdr",
                                           "spwd", "sunau", "telnetlib", "uu", "xdrlib", "aifc", "audioop", "chunk",
                                           "msilib", "nis", "ossaudiodev", "lib2to3")},
}


# Syntax a Python stopped accepting, by what it says and the Python that stopped.
SYNTAX_REMOVALS = {"Generator expression must be parenthesized": "3.7"}


def _removal_patterns() -> list[tuple[str, str, re.Pattern]]:
    """(Python, the module whose name the code could also give its own, or "", pattern)."""
    patterns = [(version, "", re.compile(re.escape(said))) for said, version in SYNTAX_REMOVALS.items()]
    for version, modules in STDLIB_REMOVALS.items():
        for module, names in modules.items():
            quoted = re.escape(module)
            if names == ("*",):
                said = rf"No module named '{quoted}'"
            else:
                alternatives = "|".join(re.escape(name.split(".")[-1]) for name in names)
                said = (rf"cannot import name '({alternatives})' from '{quoted}'"
                        rf"|module '{quoted}' has no attribute '({alternatives})'")
            patterns.append((version, module if names == ("*",) else "", re.compile(said)))
    return patterns


_REMOVALS = _removal_patterns()


def removed_in(output: str, files: frozenset[str] = frozenset()) -> str:
    """The earliest Python that removed something the output says was reached for ("" if none); a
    module the working copy (its paths: `files`) has of its own is not the standard library's."""
    output, own_modules = _tail(output), own_top_level_modules(files)
    found = [version for version, module, pattern in _REMOVALS
             if module not in own_modules and pattern.search(output)]
    return min(found, key=release_tuple) if found else ""


def removed_by_code(output: str, *, installing: bool = False, files: frozenset[str] = frozenset()) -> str:
    """`removed_in`, where the repository's own code reached for it: installing, in its own build;
    collecting, not in a dependency (whose old release is lifted instead)."""
    output = _tail(output)
    if installing and f'File "{REPO}/' not in output and _OWN_BUILD_FAILED not in output:
        return ""
    if not installing and dependency_of(output):
        return ""
    return removed_in(output, files)


def dependency_too_old(output: str) -> str:
    """The top-level module of an installed distribution that failed on what this Python removed, or
    on Python 2 code: a release older than the Python ("" if the failure is not that)."""
    module = dependency_of(output)
    return module if module and (removed_in(output) or PYTHON2.search(_tail(output))) else ""


def with_era_reason(attempts: list, recipe: dict[str, str], runtimes: Sequence,
                    files: frozenset[str] = frozenset(), python2: bool = False) -> list:
    """Attempts that failed because the code is older than the Python they ran on say so: Python 2
    code (or a setup.py refusing Python 3), a declared Python none of the runtimes satisfies, or what
    the code reached for was removed from the standard library before every Python 3 here. Where a
    Python 2 is here, its own attempts keep their reasons (the verdict is then theirs: failure_reason
    prefers them). `files`: the working copy's paths; `python2`: the parsers found Python 2 code."""
    declared = declared_python(recipe)
    too_new = declared is not None and not any(
        declared.contains(f"{runtime.version}.{patch}") for runtime in runtimes for patch in (0, 99)) and any(
        declared.contains(older) for older in ("2.7.18", "3.5.10", "3.6.15", "3.7.17", "3.8.20"))
    failed = [attempt for attempt in attempts if attempt.step in ("install", "collect")]
    python2 = python2 or any(
        python2_code(attempt.said, installing=attempt.step == "install", files=files) or (
            attempt.reason == "build_failed" and setup_refuses(recipe.get("setup.py", ""), _attempt_python(attempt)))
        for attempt in failed if not is_python2(_attempt_python(attempt)))
    oldest = min((release_tuple(runtime.version) for runtime in runtimes if not runtime.python2), default=None)
    removed = [removed_by_code(attempt.said, installing=attempt.step == "install", files=files)
               for attempt in failed]
    gone = oldest is not None and any(version and release_tuple(version) <= oldest for version in removed)
    if not (too_new or python2 or gone):
        return attempts
    return [replace(a, reason="no_python_for_era") if a.status != "ok" and not is_python2(_attempt_python(a)) else a
            for a in attempts]


def _attempt_python(attempt) -> str:
    """The Python version an attempt ran on, from its name ("python3.9 editable ...", "reuse (python2.7 ...)")."""
    found = re.search(r"\bpython(\d+\.\d+)\b", attempt.strategy)
    return found.group(1) if found else ""
