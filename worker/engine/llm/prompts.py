"""Prompt templates: files in worker/prompts named `<name>.v<version>.txt`.

A file holds a `=== system ===` part and one or more `=== user ===` parts (each its own message, in
order: a part every call of a task shares comes first, so a model reads it once), with `$variables` filled in by
string.Template (so text in the variables, braces and dollars included, is never interpreted).
The highest version of a name is the one in use; its version and a digest of its text go into
every call's record.
"""

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

PROMPT_DIR = Path(__file__).resolve().parents[2] / "prompts"
_FILE = re.compile(r"(?P<name>[a-z_]+)\.v(?P<version>\d+)\.txt")
_PART = re.compile(r"^=== (system|user) ===\n", re.M)
# What a writer is shown of the commit, at most (the embedded model's context is 8k tokens).
MESSAGE_CHARS = 2_000
PATCH_CHARS = 6_000


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    system: str
    user: str
    more_user: tuple[str, ...] = ()  # the user parts after the first, each a message of its own

    @property
    def digest(self) -> str:
        users = "\0".join((self.user, *self.more_user))
        return hashlib.sha256(f"{self.system}\0{users}".encode()).hexdigest()[:12]

    def messages(self, **variables: str) -> list[dict[str, str]]:
        """The chat messages, with every $variable of the template filled in (a missing one raises KeyError)."""
        return [{"role": "system", "content": Template(self.system).substitute(variables).strip()}] + [
            {"role": "user", "content": Template(part).substitute(variables).strip()}
            for part in (self.user, *self.more_user)]


def prompt_load(name: str, directory: Path = PROMPT_DIR) -> Prompt:
    """The newest version of the prompt `name`."""
    versions = [(int(m["version"]), path) for path in directory.glob(f"{name}.v*.txt")
                if (m := _FILE.fullmatch(path.name)) and m["name"] == name]
    if not versions:
        raise FileNotFoundError(f"no prompt named {name!r} in {directory}")
    version, path = max(versions)
    parts = _PART.split(path.read_text(encoding="utf-8"))
    sections = list(zip(parts[1::2], parts[2::2]))
    roles = [role for role, _ in sections]
    if parts[0].strip() or roles[:1] != ["system"] or roles.count("system") != 1 or "user" not in roles:
        raise ValueError(f"{path.name} needs a '=== system ===' part, then one or more '=== user ===' parts")
    users = [text for role, text in sections if role == "user"]
    return Prompt(name=name, version=version, system=sections[0][1], user=users[0], more_user=tuple(users[1:]))


def clip_head(text: str, limit: int) -> str:
    """The start of `text`, marked where it was cut."""
    return text if len(text) <= limit else text[:limit] + "\n[... cut ...]"


def clip_tail(text: str, limit: int) -> str:
    """The end of `text` (pytest prints the failures' summary last), marked where it was cut."""
    return text if len(text) <= limit else "[... cut ...]\n" + text[-limit:]
