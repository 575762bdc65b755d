"""Registering a repository checks at once what it can: the scheme, that a folder is a git
repository, that an SSH key parses, and (briefly) that the host has the repository and takes the
credentials, against a `git daemon` and an HTTP server on the loopback. A refused location leaves
nothing behind; a host that cannot be asked is let through with a warning."""

import os
import signal
import socket
import subprocess
import time

import pytest
from django.urls import reverse

from apps.datasets.models import Dataset
from apps.jobs.models import Job
from apps.repositories.models import Repository
from apps.repositories.services import RepositoryRefused, repository_register
from tests.conftest import ssh_private_key

pytestmark = pytest.mark.django_db


def nothing_left() -> bool:
    return not Repository.objects.exists() and not Job.objects.exists() and not Dataset.objects.exists()


@pytest.fixture
def git_daemon(tmp_path, git_repo):
    """git:// on the loopback, serving the folder that holds `git_repo` (as `project`)."""
    git_repo.commit("init", {"a.py": "x = 1\n"})
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # A session of its own: `git daemon` runs git-daemon as a child, which must end with it.
    daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={tmp_path}",
                               "--listen=127.0.0.1", f"--port={port}", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                os.killpg(daemon.pid, signal.SIGKILL)
                pytest.fail("git daemon did not start")
            time.sleep(0.05)
    yield f"git://127.0.0.1:{port}"
    os.killpg(daemon.pid, signal.SIGKILL)
    daemon.wait()


@pytest.mark.parametrize("location, why", [
    ("ftp://files.example.com/x.git", "ftp:// is not a way git fetches repositories here"),
    ("gopher://x/y", "gopher:// is not a way git fetches"),
    ("x" * 1001, "A location is at most 1,000 characters; this one has 1,001."),
    ("http://[::1/x", "This is not a URL git can read"),
    ("http://host:port/x.git", "This is not a URL git can read"),
])
def test_a_location_git_cannot_fetch_is_refused_at_once(location, why):
    with pytest.raises(RepositoryRefused, match=why):
        repository_register(location=location)
    assert nothing_left()


def test_a_folder_must_be_a_git_repository_at_its_top(tmp_path, git_repo):
    git_repo.commit("init", {"pkg/a.py": "x = 1\n"})
    (tmp_path / "plain").mkdir()
    (tmp_path / "a-file").write_text("")
    for location, why in [(str(tmp_path / "missing"), "Nothing is at .*missing: give a URL"),
                          ("not a url at all !!", "Nothing is at .*not a url at all !!"),
                          (str(tmp_path / "plain"), "plain is not a git repository"),
                          (str(tmp_path / "a-file"), "a-file is a file, not a repository's folder"),
                          (str(git_repo.path / "pkg"), "pkg is inside a git repository, not its top folder: "
                                                       f"register {git_repo.path}")]:
        with pytest.raises(RepositoryRefused, match=why):
            repository_register(location=location)
    assert nothing_left()
    # A folder whose name holds a space, and a bare clone, are repositories too.
    spaced = tmp_path / "sp ace"
    subprocess.run(["git", "clone", "-q", str(git_repo.path), str(spaced)], check=True)
    assert repository_register(location=str(spaced)).url == str(spaced)
    subprocess.run(["git", "clone", "-q", "--bare", str(git_repo.path), str(tmp_path / "bare.git")], check=True)
    assert repository_register(location=str(tmp_path / "bare.git")).registration_warning == ""


def test_an_ssh_key_must_parse_and_need_no_passphrase(git_daemon):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    locked = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret")).decode()
    for key, why in [("-----BEGIN KEY-----\nk3y\n", "The SSH key cannot be read: paste the whole private key"),
                     ("ssh-ed25519 AAAAC3Nza... me@host", "The SSH key cannot be read"),
                     (locked, "protected by a passphrase")]:
        with pytest.raises(RepositoryRefused, match=why) as refused:
            repository_register(location=f"{git_daemon}/project", ssh_key=key)
        assert refused.value.field == "ssh_key"
    assert nothing_left()
    assert repository_register(location=f"{git_daemon}/project", ssh_key=ssh_private_key()).name == "remote/project"


def test_the_host_is_asked_and_a_definite_no_refuses(git_daemon, refusing_git_server):
    with pytest.raises(RepositoryRefused, match="127.0.0.1 has no repository at this location"):
        repository_register(location=f"{git_daemon}/no-such-repository")
    url, _ = refusing_git_server
    with pytest.raises(RepositoryRefused, match="127.0.0.1 refused the credentials") as refused:
        repository_register(location=url.replace("http://", "http://reader:s3cr3t-token@"))
    assert "s3cr3t-token" not in str(refused.value)
    assert nothing_left()
    found = repository_register(location=f"{git_daemon}/project")
    assert found.registration_warning == "" and found.url == f"{git_daemon}/project"


def test_names_are_bounded_whatever_the_location(tmp_path):
    url = "http://127.0.0.1:9/" + "o" * 300 + "/" + "n" * 600 + ".git"
    first = repository_register(location=url)
    second = repository_register(location=url + "?again")
    assert len(first.name) <= 200 and len(second.name) <= 200 and second.name == f"{first.name}-2"
    assert first.registration_warning  # nothing answers on that port: let through, with why
    with pytest.raises(RepositoryRefused, match="at most 200 characters") as refused:
        repository_register(location="http://127.0.0.1:9/x.git", name="a/" + "b" * 199)
    assert refused.value.field == "name"


def test_the_form_says_which_folders_may_be_registered_and_shows_the_warning(curator_client, settings, tmp_path):
    settings.COMMITGYM_LOCAL_ROOTS = [str(tmp_path / "allowed")]
    page = curator_client.get(reverse("repositories:list")).content.decode()
    assert f"Local folders: only under {tmp_path / 'allowed'} (COMMITGYM_LOCAL_ROOTS" in page
    settings.COMMITGYM_LOCAL_ROOTS = []
    assert "none may be registered here; an administrator allows folders with COMMITGYM_LOCAL_ROOTS" in \
        curator_client.get(reverse("repositories:list")).content.decode()
    response = curator_client.post(reverse("repositories:list"), {"location": "http://127.0.0.1:9/x.git"},
                                   follow=True)
    assert "could not be asked whether the repository is there" in response.content.decode()
    refused = curator_client.post(reverse("repositories:list"), {"location": "ftp://h/x.git"})
    assert refused.status_code == 400 and "ftp:// is not a way git fetches" in refused.content.decode()
    broken = curator_client.post(reverse("repositories:list"), {"location": "http://[::1/x"})
    assert broken.status_code == 400 and "This is not a URL git can read" in broken.content.decode()
    assert Repository.objects.count() == 1


def test_a_long_name_and_location_are_cut_on_the_lists_with_the_whole_in_a_tooltip(curator_client):
    url = "http://127.0.0.1:9/" + "o" * 300 + "/" + "n" * 600 + ".git"
    repository = repository_register(location=url)
    page = curator_client.get(reverse("repositories:list")).content.decode()
    assert f'title="{repository.name}"' in page and f">{repository.name}<" not in page
    assert f'title="{url}"' in page and f">{url}<" not in page
    tasks = curator_client.get(reverse("tasks:all")).content.decode()
    assert repository.name not in tasks.replace(f'title="{repository.name}"', "")
