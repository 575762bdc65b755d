"""What can be checked of a repository's location before it is registered: its scheme, that a local
folder is a git repository, that an SSH key parses, and a quick `git ls-remote` that refuses only
on a definite answer (no such repository, credentials refused) and lets anything else through with
a warning: a host that cannot be reached now may be reachable by the workers later."""

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from worker.engine.git.repo import GitCredentials, GitError, git_run

SCHEMES = ("https", "http", "ssh", "git", "file")
PROBE_SECONDS = 8.0
MAX_LOCATION_CHARS = 1000


@dataclass(frozen=True)
class LocationCheck:
    refusal: str = ""  # why the location cannot be registered ("" when it can)
    warning: str = ""  # what could not be checked


def scheme_refusal(location: str) -> str:
    if len(location) > MAX_LOCATION_CHARS:
        return f"A location is at most {MAX_LOCATION_CHARS:,} characters; this one has {len(location):,}."
    if "://" not in location:
        return ""
    try:
        scheme = urlsplit(location).scheme.lower()
        urlsplit(location).port  # noqa: B018 - a port that is not a number raises here
    except ValueError as error:
        return f"This is not a URL git can read: {error}."
    if scheme not in SCHEMES:
        return (f"{scheme or 'This'}:// is not a way git fetches repositories here: use https://, ssh://, git://, "
                "user@host:path, or a folder's path.")
    return ""


def local_repository_refusal(path: Path) -> str:
    """Why a local folder is not a repository to register ("" when it is one, bare or not)."""
    if not path.exists():
        return (f"Nothing is at {path}: give a URL (https://host/owner/name.git) or the absolute path of a clone on "
                "this server.")
    if not path.is_dir():
        return f"{path} is a file, not a repository's folder."
    try:
        bare = git_run(["rev-parse", "--is-bare-repository"], cwd=path, timeout=30).strip() == "true"
        # One path a line: a folder's name may hold spaces. A worktree's .git may be a file.
        top = git_run(["rev-parse", "--absolute-git-dir" if bare else "--show-toplevel"], cwd=path,
                      timeout=30).splitlines()[0]
    except (GitError, IndexError):
        return f"{path} is not a git repository."
    if Path(top) != path.resolve():
        return f"{path} is inside a git repository, not its top folder: register {top}."
    return ""


def ssh_key_refusal(key: str) -> str:
    """Why an SSH private key cannot be used ("" when it parses, in OpenSSH's or PEM's format)."""
    if not key.strip():
        return ""
    from cryptography.hazmat.primitives import serialization

    data = key.strip().encode() + b"\n"
    for load in (serialization.load_ssh_private_key, serialization.load_pem_private_key):
        try:
            load(data, password=None)
            return ""
        except TypeError:  # the key is encrypted
            return "This SSH key is protected by a passphrase, which the workers cannot type: use a key without one."
        except Exception:  # noqa: BLE001 - whatever the parser says, a person reads the same sentence
            continue
    return ("The SSH key cannot be read: paste the whole private key, from its -----BEGIN ... PRIVATE KEY----- line "
            "to its END line.")


def remote_probe(location: str, credentials: GitCredentials, *, timeout: float = PROBE_SECONDS) -> LocationCheck:
    """Ask the host for the repository's branches. Refused: the host says there is no such
    repository, or refuses the credentials given. Anything else (no answer in time, a host that
    cannot be resolved or reached, an SSH host refusing this server's own keys when none was given:
    the workers' may differ) is a warning."""
    try:
        git_run(["ls-remote", "--heads", "--", location], credentials=credentials, timeout=timeout)
    except GitError as error:
        host = urlsplit(location).hostname if "://" in location else re.sub(r"^[^@]*@", "", location).split(":")[0]
        if error.code == "not_a_repository":
            return LocationCheck(refusal=f"{host} has no repository at this location ({error}).")
        if error.code == "auth_failed" and credentials.secrets():
            return LocationCheck(refusal=f"{host} refused the credentials ({error}).")
        return LocationCheck(warning=f"{host} could not be asked whether the repository is there ({error}); it is "
                                     "registered anyway, and mining will say if the workers cannot fetch it.")
    except (OSError, subprocess.SubprocessError) as error:
        return LocationCheck(warning=f"The location could not be checked ({error}); it is registered anyway.")
    return LocationCheck()
