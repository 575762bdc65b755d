"""git as a subprocess: credentials, failures and their reason codes, on loopback only."""

import os
import stat
import time

import pytest

from worker.engine.git.repo import (
    BlobReader,
    GitCredentials,
    GitError,
    default_branch_tip,
    git_environment,
    mirror_sync,
    url_split_credentials,
)
from worker.engine.mine.walk import commits_walk


def test_wrong_token_fails_as_auth_failed_without_showing_it(refusing_git_server, tmp_path):
    url, seen = refusing_git_server
    credentials = GitCredentials(username="reader", token="s3cr3t-token-value")
    with pytest.raises(GitError) as failure:
        mirror_sync(url, tmp_path / "mirror.git", credentials=credentials, timeout=60)
    assert failure.value.code == "auth_failed"
    assert "s3cr3t-token-value" not in str(failure.value)
    assert any(header and header.startswith("Basic ") for header in seen), "git never offered the token"
    assert not (tmp_path / "mirror.git").exists() and not (tmp_path / "mirror.git.partial").exists()


def test_no_credentials_fail_as_auth_failed_without_prompting(refusing_git_server, tmp_path):
    url, _ = refusing_git_server
    with pytest.raises(GitError) as failure:
        mirror_sync(url, tmp_path / "mirror.git", timeout=60)
    assert failure.value.code == "auth_failed"


def test_unreachable_and_not_a_repository(tmp_path):
    with pytest.raises(GitError) as unreachable:
        mirror_sync("http://127.0.0.1:9/x.git", tmp_path / "a.git", timeout=60)
    assert unreachable.value.code == "unreachable"
    with pytest.raises(GitError) as missing:
        mirror_sync(str(tmp_path / "nothing"), tmp_path / "b.git", timeout=60)
    assert missing.value.code == "not_a_repository"


def test_empty_repository(git_repo, tmp_path):
    mirror_sync(str(git_repo.path), tmp_path / "m.git")
    with pytest.raises(GitError) as empty:
        default_branch_tip(tmp_path / "m.git")
    assert empty.value.code == "empty_repository"


def test_mirror_is_fetched_again(git_repo, tmp_path):
    git_repo.commit("one", {"a.py": "x = 1\n"})
    mirror = tmp_path / "m.git"
    mirror_sync(str(git_repo.path), mirror)
    newer = git_repo.commit("two", {"a.py": "x = 2\n"})
    mirror_sync(str(git_repo.path), mirror)
    assert default_branch_tip(mirror) == ("main", newer)


def test_option_like_locations_and_revisions_are_not_options(git_repo, tmp_path):
    git_repo.commit("one", {"a.py": "x = 1\n"})
    with pytest.raises(GitError):
        mirror_sync("--upload-pack=touch /tmp/commitgym-pwned", tmp_path / "m.git", timeout=30)
    mirror_sync(str(git_repo.path), tmp_path / "existing.git")
    with pytest.raises(GitError):
        mirror_sync("--upload-pack=touch /tmp/commitgym-pwned", tmp_path / "existing.git", timeout=30)
    assert not os.path.exists("/tmp/commitgym-pwned")
    with pytest.raises(GitError):
        list(commits_walk(git_repo.path, "--output=/tmp/commitgym-pwned"))
    assert not os.path.exists("/tmp/commitgym-pwned")


def test_ssh_key_goes_to_a_private_file_for_ssh_only():
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----"
    with git_environment(GitCredentials(ssh_key=key)) as env:
        command = env["GIT_SSH_COMMAND"]
        key_path = command.split(" -i ", 1)[1].split(" ", 1)[0]
        assert open(key_path).read().strip() == key
        assert stat.S_IMODE(os.stat(key_path).st_mode) == 0o600
        assert key not in " ".join(env.values())
    assert not os.path.exists(key_path)


def test_credentials_in_urls_are_split_off_and_redacted():
    assert url_split_credentials("https://bot:tok@host/o/r.git") == (
        "https://host/o/r.git", GitCredentials(username="bot", token="tok"))
    assert url_split_credentials("https://tok@host/o/r.git")[1] == GitCredentials(token="tok")
    assert url_split_credentials("git@host:o/r.git") == ("git@host:o/r.git", GitCredentials())
    assert url_split_credentials("/srv/repo") == ("/srv/repo", GitCredentials())
    creds = GitCredentials(token="tok-123")
    assert creds.redact("fatal: https://x:tok-123@h/ failed tok-123") == "fatal: https://***@h/ failed ***"
    assert GitCredentials().redact("from https://tok-456@h/r.git") == "from https://***@h/r.git"
    # A token in the query string is a credential too, whatever the parameter's case.
    assert url_split_credentials("https://host/o/r.git?ref=main&access_token=tok-789") == (
        "https://host/o/r.git?ref=main", GitCredentials(token="tok-789"))
    assert url_split_credentials("https://host/o/r.git?Private_Token=tok-7") == (
        "https://host/o/r.git", GitCredentials(token="tok-7"))
    assert url_split_credentials("https://host/o/r.git?ref=main") == ("https://host/o/r.git?ref=main", GitCredentials())
    assert GitCredentials().redact("see https://h/r.git?ref=1&access_token=tok-789 and ?sig=abc") == \
        "see https://h/r.git?ref=1&access_token=*** and ?sig=***"


def test_blob_reader_reads_many_objects_and_misses(git_repo):
    sha = git_repo.commit("one", {"a.py": "x = 1\n", "b.py": ""})
    blob = git_repo.git("rev-parse", f"{sha}:a.py")
    names = [f"{sha}:a.py", f"{sha}:missing.py", f"{sha}:b.py", blob, "0" * 40, f"{sha}:no such file.py",
             f"{sha}:", blob[:3]]  # a tree and a name too short: no blob either
    with BlobReader(git_repo.path) as blobs:
        assert blobs.read_objects(names) == [b"x = 1\n", None, b"", b"x = 1\n", None, None, None, None]
        many = blobs.read_objects([f"{sha}:a.py"] * 250 + [blob] * 250)
    assert many == [b"x = 1\n"] * 500


def test_blob_reader_skips_objects_over_its_size_limit_and_reads_on(git_repo):
    sha = git_repo.commit("one", {"big.py": "x" * 5000 + "\n", "small.py": "y = 1\n"})
    with BlobReader(git_repo.path, max_blob_bytes=4096) as blobs:
        assert blobs.read_objects([f"{sha}:big.py", f"{sha}:small.py", f"{sha}:big.py"]) == [None, b"y = 1\n", None]


def test_blob_reader_keeps_recent_blobs_within_its_budget(git_repo):
    sha = git_repo.commit("one", {"a.py": "a" * 1000, "b.py": "b" * 1000})
    ids = [git_repo.git("rev-parse", f"{sha}:{name}") for name in ("a.py", "b.py")]
    with BlobReader(git_repo.path, cache_bytes=1500) as blobs:
        blobs.read_objects(ids)
        assert list(blobs._cache) == [ids[1]] and blobs._cache_bytes == 1000


def test_the_operators_git_configuration_and_credential_helpers_stay_out(git_repo, tmp_path, monkeypatch):
    helper_log = tmp_path / "helper.log"
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[credential]\n\thelper = \"!f() {{ cat >> {helper_log}; }}; f\"\n")
    monkeypatch.setenv("HOME", str(home))
    with git_environment(GitCredentials(token="tok")) as env:
        assert env["GIT_CONFIG_GLOBAL"] == os.devnull and env["GIT_CONFIG_NOSYSTEM"] == "1"
    with pytest.raises(GitError):
        mirror_sync("http://127.0.0.1:9/x.git", tmp_path / "m.git", credentials=GitCredentials(token="tok"),
                    timeout=30)
    assert not helper_log.exists()


def test_a_renamed_default_branch_is_followed(git_repo, tmp_path):
    git_repo.commit("one", {"a.py": "x = 1\n"})
    mirror = tmp_path / "m.git"
    mirror_sync(str(git_repo.path), mirror)
    git_repo.git("branch", "-m", "main", "trunk")
    newer = git_repo.commit("two", {"a.py": "x = 2\n"})
    mirror_sync(str(git_repo.path), mirror)
    assert default_branch_tip(mirror) == ("trunk", newer)


def test_percent_encoded_credentials_are_decoded():
    assert url_split_credentials("https://me%40corp.com:p%40ss%2Fw@host/r.git")[1] == GitCredentials(
        username="me@corp.com", token="p@ss/w")


def test_a_reader_closed_with_answers_still_owed_stops_at_once(git_repo):
    """A job that stops early leaves git writing answers nobody reads: closing must not wait for it."""
    sha = git_repo.commit("one", {"big.py": "x = 1\n" * 500_000})
    started = time.monotonic()
    with BlobReader(git_repo.path) as blobs:
        blobs.ask([git_repo.git("rev-parse", f"{sha}:big.py"), f"{sha}:big.py"])
        time.sleep(0.2)  # git fills the pipe and waits
    assert time.monotonic() - started < 5
