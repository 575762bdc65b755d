"""An environment's files in a release, from plain data: the lock as released, the Dockerfile's
stages for each way the project was installed, and Python 2's tools. The build itself is checked
end to end (tests/apps/release_rebuild_e2e.py)."""

from worker.engine.env.rebuild import (
    EnvironmentToRelease,
    cutoff_args,
    debian_release,
    default_base,
    dockerfile,
    environment_folder_write,
    release_lock,
)

FROZEN = "iniconfig==2.1.0\ntextkit @ file:///workspace/repo\npluggy==1.6.0\nrequests @ git+https://x/r@abc\n"


def environment(**fields) -> EnvironmentToRelease:
    return EnvironmentToRelease(**{
        "key": "ab12cd34ef56ab78", "python_version": "3.11.2", "lock": FROZEN, "strategy": "python3.11 editable[test] pytest~=8.0",
        "setup_archive": "sources/o__r-aaa.tar.gz", "tasks": (("o__r-1", "sources/o__r-bbb.tar.gz"),),
        "tool_version": "0.13.10", "as_of": "2021-03-01T00:00:00+00:00", "lifted": {"setuptools": "2023-01-01"},
        **fields})


def test_the_lock_pins_every_distribution_but_the_project_installed_from_its_tree():
    assert release_lock(FROZEN) == "iniconfig==2.1.0\npluggy==1.6.0\nrequests @ git+https://x/r@abc\n"
    assert release_lock("-e file:///workspace/repo\nA==1\n\n# a comment\n") == "A==1\n"
    assert release_lock(FROZEN) == release_lock(FROZEN.replace("textkit", "other"))
    hashed = release_lock(FROZEN, {"pluggy==1.6.0": ["aa", "bb"]})
    assert hashed == ("iniconfig==2.1.0\npluggy==1.6.0 \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb\n"
                      "requests @ git+https://x/r@abc\n")


def test_the_dates_a_source_build_resolves_as_of_are_the_builds():
    assert cutoff_args(environment(lifted={"setuptools": "2023-01-01", "pytest": "none"})) == [
        "--exclude-newer", "2021-03-01T00:00:00+00:00", "--exclude-newer-package", "pytest=false",
        "--exclude-newer-package", "setuptools=2023-01-01"]
    assert cutoff_args(environment(as_of="")) == []
    assert cutoff_args(environment(python_version="2.7.18")) == []


def test_the_base_is_the_debian_release_of_the_environments_python():
    assert (debian_release(environment()), default_base(environment())) == ("bookworm", "debian:bookworm-slim")
    assert default_base(environment(python_version="3.9.2", image="commitgym-base:bullseye")) == "debian:bullseye-slim"
    assert default_base(environment(python_version="3.12.4", image="python:3.12-slim")) == "python:3.12-slim"
    text = dockerfile(environment(python_version="3.12.4"), "r")
    assert "test -x /usr/local/bin/python3.12 || dpkg -s python3.12 python3.12-venv >/dev/null 2>&1 || " \
           'wanted="$wanted python3.12 python3.12-venv"' in text
    assert 'if [ -n "$wanted" ]; then apt-get update && apt-get install -y --no-install-recommends $wanted' in text


def test_an_editable_project_is_installed_on_its_setup_tree_and_each_task_gets_a_plain_copy():
    text = dockerfile(environment(), "r")
    assert text.count("FROM ") == 4 and "# syntax" not in text and "--mount" not in text
    assert "ARG BASE=debian:bookworm-slim\nFROM ${BASE} AS base" in text
    assert "&& uv pip install --compile-bytecode --python /workspace/env/bin/python --no-deps --exclude-newer " \
           "2021-03-01T00:00:00+00:00 --exclude-newer-package setuptools=2023-01-01 -r /release/env/requirements.lock" \
           in text
    assert "COPY sources/o__r-aaa.tar.gz /release/setup.tar.gz" in text
    assert "--no-deps --exclude-newer 2021-03-01T00:00:00+00:00 --exclude-newer-package setuptools=2023-01-01 " \
           "-e /workspace/repo" in text
    task_stage = text.split("FROM environment AS task")[1]
    assert "uv pip install" not in task_stage and "COPY --from=source /workspace/repo /workspace/repo" in task_stage


def test_each_strategy_installs_the_project_as_the_build_did():
    compat = dockerfile(environment(strategy="python3.11 editable-compat"), "r")
    assert "--config-settings editable_mode=compat -e /workspace/repo" in compat
    regular = dockerfile(environment(strategy="python3.11 install"), "r")
    assert "-r /release/env/requirements.lock" in regular and " --no-deps --exclude-newer 2021-03-01T00:00:00+00:00" \
        " --exclude-newer-package setuptools=2023-01-01 /workspace/repo)" in regular
    assert "zz_commitgym_working_copy.pth" in regular
    tests_only = dockerfile(environment(strategy="python3.11 tests-only"), "r")
    assert "-e /workspace/repo" not in tests_only and "zz_commitgym_working_copy.pth" in tests_only


def test_without_the_setup_tree_the_project_is_installed_on_the_tasks_tree():
    text = dockerfile(environment(setup_archive=""), "r")
    environment_stage, task_stage = text.split("FROM environment AS task")
    assert "-e /workspace/repo" not in environment_stage and "-e /workspace/repo" in task_stage


def test_python_2_is_built_by_debians_virtualenv_and_pip_on_bullseye():
    text = dockerfile(environment(python_version="2.7.18", strategy="python2.7 editable"), "r")
    assert "ARG BASE=debian:bullseye-slim" in text and 'wanted="$wanted python3-virtualenv"' in text
    assert "python3 -m virtualenv --quiet --no-setuptools --no-wheel --no-periodic-update --python python2.7 " \
           "/workspace/env" in text
    assert "pip install --disable-pip-version-check --no-input --no-deps -r /release/env/build-seed.lock \\\n    && " \
           "/workspace/env/bin/python -m pip install --disable-pip-version-check --no-input --no-deps -r " \
           "/release/env/requirements.lock" in text
    assert "uv" not in text.replace("--no-input", "")


def test_the_folder_holds_what_the_dockerfile_copies(tmp_path):
    written = environment_folder_write(tmp_path, environment(generated=("src/v.py",)), "r@1")
    assert sorted(path.name for path in written) == [
        "Dockerfile", "generated", "requirements.lock", "tasks", "uv_fetch.py", "zz_commitgym_working_copy.pth"]
    folder = tmp_path / "environments" / "ab12cd34ef56ab78"
    assert (folder / "tasks").read_text() == "o__r-1 sources/o__r-bbb.tar.gz\n"
    assert (folder / "generated").read_text() == "src/v.py\n"
    assert "'/workspace/repo/src'" in (folder / "zz_commitgym_working_copy.pth").read_text()


def test_the_index_hashes_are_those_of_the_pinned_versions_files_and_an_unreachable_index_is_asked_once():
    from worker.engine.env.index_hashes import lock_hashes

    pages = {"https://i/simple/pluggy/": {"files": [
        {"filename": "pluggy-1.6.0-py3-none-any.whl", "hashes": {"sha256": "w1"}},
        {"filename": "pluggy-1.6.0.tar.gz", "hashes": {"sha256": "s1"}},
        {"filename": "pluggy-1.5.0-py3-none-any.whl", "hashes": {"sha256": "old"}},
        {"filename": "pluggy-1.6.0-py3-none-any.whl.metadata", "hashes": {"sha256": "meta"}}]},
        "https://i/simple/iniconfig/": {"files": [{"filename": "iniconfig-2.1.0.tar.gz", "hashes": {}}]}}
    asked = []

    def page(url):
        asked.append(url)
        return pages[url]

    hashes, missing = lock_hashes("pluggy==1.6.0\nIniConfig==2.1.0\nx @ git+https://x\n", index="https://i/simple/",
                                  page=page)
    assert hashes == {"pluggy==1.6.0": ["s1", "w1"]}
    assert missing == ["IniConfig==2.1.0: the index lists no file of it with a SHA-256"]

    def unreachable(url):
        asked.append(url)
        raise OSError("connection refused")

    asked.clear()
    hashes, missing = lock_hashes("a==1\nb==2\n", index="https://i/simple/", page=unreachable)
    assert (hashes, len(asked)) == ({}, 1) and "could not be read (connection refused)" in missing[0]


def test_python_2s_setuptools_and_wheel_come_first_from_the_lock(tmp_path):
    lock = "pytest==4.6.11\nsetuptools==44.1.1\nWheel==0.37.1\nsix==1.16.0\n"
    environment_folder_write(tmp_path, environment(python_version="2.7.18", lock=lock,
                                                   hashes={"setuptools==44.1.1": ["cc"]}), "r")
    seed = (tmp_path / "environments" / "ab12cd34ef56ab78" / "build-seed.lock").read_text()
    assert seed == "setuptools==44.1.1 \\\n    --hash=sha256:cc\nWheel==0.37.1\n"
    assert not (tmp_path / "environments" / "ab12cd34ef56ab78" / "uv_fetch.py").exists()


def test_what_the_repositorys_code_could_have_written_never_reaches_a_dockerfile_unchecked():
    from worker.engine.env.rebuild import unreleasable

    assert unreleasable(environment()) == ""
    assert "its Python's version is not a version" in unreleasable(environment(python_version="3.11\nRUN x"))
    assert "a lifted cutoff" in unreleasable(environment(lifted={"setuptools": "2023-01-01 && curl x"}))
    assert "its as-of date" in unreleasable(environment(as_of="2021-01-01 $(x)"))
    assert "a task's id" in unreleasable(environment(tasks=(("a;b", "sources/x.tar.gz"),)))
    assert "generated" in unreleasable(environment(generated=("-rf",))) and "generated" in unreleasable(
        environment(generated=("a\nb",)))
    assert "uv" in unreleasable(environment(tool_version=""))
    assert unreleasable(environment(python_version="2.7.18", tool_version="")) == ""
