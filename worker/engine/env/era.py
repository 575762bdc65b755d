"""Code older than every Python a sandbox has: Python 2 code, and code using what a later Python
removed from the standard library, where no Python from before the removal is there to run it."""

import re
from dataclasses import replace
from typing import Sequence

from worker.engine.env.recipes import REPO, declared_python
from worker.engine.env.resolve import release_tuple

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
# Python 2 statements, as a traceback shows the line of a SyntaxError (Pythons before 3.10 say only
# "invalid syntax" of them): `except E, e:`, `print x`, `raise E, "why"`, `exec "code"`.
_PYTHON2_STATEMENT = (r"(E)?\s+(except\s+[\w.]+\s*,\s*\w+\s*:|print\s+[\"'\w%][^\n]*|raise\s+[\w.]+\s*,\s*[^\n]+"
                      r"|exec\s+[\"'][^\n]*)$")
_PYTHON2_LINE = re.compile(rf"^{_PYTHON2_STATEMENT}", re.MULTILINE)
# The same line in a file of the repository's own (an install's output also shows its dependencies' builds).
_PYTHON2_OWN_LINE = re.compile(rf'File "{re.escape(REPO)}/[^"\n]+", line \d+\n{_PYTHON2_STATEMENT}', re.MULTILINE)


def python2_code(output: str, *, installing: bool = False) -> bool:
    """Whether what Python 3 printed shows Python 2 code: collecting the tests, by what it said of
    the code or the line it showed; installing, by a line of the repository's own files."""
    if "SyntaxError" in output and _PYTHON2_OWN_LINE.search(output):
        return True
    return not installing and bool(PYTHON2.search(output) or ("SyntaxError" in output and _PYTHON2_LINE.search(output)))


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


def _removal_patterns() -> list[tuple[str, re.Pattern]]:
    patterns = [(version, re.compile(re.escape(said))) for said, version in SYNTAX_REMOVALS.items()]
    for version, modules in STDLIB_REMOVALS.items():
        for module, names in modules.items():
            quoted = re.escape(module)
            if names == ("*",):
                said = rf"No module named '{quoted}'"
            else:
                alternatives = "|".join(re.escape(name.split(".")[-1]) for name in names)
                said = (rf"cannot import name '({alternatives})' from '{quoted}'"
                        rf"|module '{quoted}' has no attribute '({alternatives})'")
            patterns.append((version, re.compile(said)))
    return patterns


_REMOVALS = _removal_patterns()


def removed_in(output: str, *, installing: bool = False) -> str:
    """The earliest Python that removed something the output says the code reached for ("" if none);
    installing, only where the output shows a file of the repository's own."""
    if installing and f'File "{REPO}/' not in output:
        return ""
    found = [version for version, pattern in _REMOVALS if pattern.search(output)]
    return min(found, key=release_tuple) if found else ""


def last_step_output(output: str) -> str:
    """What the last step of an attempt printed (an attempt's output is its steps', each after "$ argv")."""
    return output[output.rfind("\n$ ") + 1:]


def with_era_reason(attempts: list, recipe: dict[str, str], runtimes: Sequence) -> list:
    """Attempts that failed because the code is older than every Python here say so: Python 2 code,
    a declared Python none of the runtimes satisfies, or what the code reached for was removed from the
    standard library before the oldest Python here."""
    declared = declared_python(recipe)
    too_new = declared is not None and not any(
        declared.contains(f"{runtime.version}.{patch}") for runtime in runtimes for patch in (0, 99)) and any(
        declared.contains(older) for older in ("2.7.18", "3.5.10", "3.6.15", "3.7.17", "3.8.20"))
    failed = [attempt for attempt in attempts if attempt.step in ("install", "collect")]
    python2 = any(python2_code(last_step_output(attempt.output), installing=attempt.step == "install")
                  for attempt in failed)
    oldest = min((release_tuple(runtime.version) for runtime in runtimes), default=None)
    removed = [removed_in(last_step_output(attempt.output), installing=attempt.step == "install") for attempt in failed]
    gone = oldest is not None and any(version and release_tuple(version) <= oldest for version in removed)
    if not (too_new or python2 or gone):
        return attempts
    return [replace(a, reason="no_python_for_era") if a.status != "ok" else a for a in attempts]
