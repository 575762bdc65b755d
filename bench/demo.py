"""`make demo` after `make install`: how long until the dataset page shows all five selectors' best@k
(target: 3 minutes on 2 cores), and until the first page is served; against the time to build the
embedded model's runtime (llama-cpp-python, from source, with make install's flags), measured in the
same run: the other wait a newcomer has on a fresh machine, on the same cores under the same load.

The demo runs as make demo runs it (a fresh COMMITGYM_VAR_DIR, SQLite, the filesystem broker, its own
workers), serving on a free port; this logs in as its printed user and reads the pages over HTTP.
"""

import importlib.metadata
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _report import report  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
SELECTORS = ["random", "execution", "judge", "hybrid", "oracle"]
DEADLINE = 1800  # seconds: a demo this slow has failed
LLAMA_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_OPENMP=OFF"  # the Makefile's


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def login_line(demo: subprocess.Popen, deadline: float) -> str:
    """The demo's password, from the line it prints once it serves."""
    while time.monotonic() < deadline:
        if select.select([demo.stdout], [], [], 1.0)[0]:
            line = demo.stdout.readline()
            found = re.search(r"log in as \S+ / (\S+)", line)
            if found:
                return found.group(1)
        if demo.poll() is not None:
            raise SystemExit(f"the demo ended with {demo.returncode} before serving")
    raise SystemExit("the demo did not start serving")


def logged_in(base: str, password: str, deadline: float) -> requests.Session:
    session = requests.Session()
    while True:
        try:
            page = session.get(base + "/", timeout=30)
            break
        except requests.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    done = session.post(page.url, data={"csrfmiddlewaretoken": token, "username": "demo", "password": password},
                        headers={"Referer": page.url}, timeout=30)
    assert "Log out" in done.text, "the demo's login was refused"
    return session


def five_figures(session: requests.Session, base: str) -> bool:
    """Whether the demo's dataset page shows best@k for all five selectors, none greyed out."""
    listed = session.get(base + "/datasets/", timeout=60).text
    found = re.search(r'href="/datasets/(\d+)/" title="demo/textkit"', listed)
    if not found:
        return False
    page = session.get(f"{base}/datasets/{found.group(1)}/", timeout=60).text
    table = re.search(r'<table class="table measures">(.*?)</table>', page, re.S)
    if not table:
        return False
    header = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<th[^>]*>(.*?)</th>", table.group(1))]
    rows = re.findall(r"<tr>(.*?)</tr>", table.group(1).split("</thead>")[-1], re.S)
    return header == ["k", *SELECTORS] and bool(rows) and all(
        len(re.findall(r">\s*[01]\.\d{3}\s*<", row)) == len(SELECTORS) for row in rows)


def demo_seconds() -> tuple[float, float]:
    """(seconds from the end of make install to the first page served, to all five selectors' figures)."""
    var = Path(tempfile.mkdtemp(prefix="commitgym-bench-demo-"))
    var.chmod(0o755)  # the sandbox's users walk through it to their working copies, as through make demo's var/
    env = {**{name: value for name, value in os.environ.items() if name not in ("DATABASE_URL", "CELERY_BROKER_URL")},
           "COMMITGYM_VAR_DIR": str(var)}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    deadline = started + DEADLINE
    subprocess.run([PYTHON, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, env=env, check=True)
    with open(var / "demo.log", "w") as log:
        demo = subprocess.Popen([PYTHON, "manage.py", "demo", "--addrport", f"127.0.0.1:{port}"], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
    try:
        session = logged_in(base, login_line(demo, deadline), deadline)
        served = time.monotonic() - started
        while not five_figures(session, base):
            said = (var / "demo.log").read_text(errors="replace")
            if time.monotonic() > deadline or demo.poll() is not None or "preparation stopped" in said:
                raise SystemExit("the dataset page never showed the five selectors' figures:\n" + said[-2000:])
            time.sleep(2)
        return served, time.monotonic() - started
    finally:
        demo.send_signal(signal.SIGTERM)  # the demo stops its workers
        try:
            demo.wait(timeout=150)  # its workers end their running jobs first
        except subprocess.TimeoutExpired:
            os.killpg(demo.pid, signal.SIGKILL)
        shutil.rmtree(var, ignore_errors=True)


def llama_build_seconds() -> float:
    """Building the installed llama-cpp-python's source distribution into a wheel, as make install does the first
    time (its flags, no cache; the source downloaded beforehand is not counted)."""
    version = importlib.metadata.version("llama-cpp-python")
    work = Path(tempfile.mkdtemp(prefix="commitgym-bench-llama-"))
    try:
        subprocess.run([PYTHON, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(work),
                        f"llama-cpp-python=={version}"], check=True)
        (source,) = work.glob("llama_cpp_python-*.tar.gz")
        uv = Path(PYTHON).with_name("uv")
        started = time.monotonic()
        subprocess.run([str(uv), "build", "--wheel", "--no-cache", "-q", "--out-dir", str(work / "wheel"), str(source)],
                       env={**os.environ, "CMAKE_ARGS": LLAMA_CMAKE_ARGS}, check=True)
        return time.monotonic() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    served, ready = demo_seconds()
    build = llama_build_seconds()
    report("demo.first_page_after_install", served, "s", build, "s building llama-cpp-python")
    report("demo.five_selectors_figures_after_install (target 180 s on 2 cores)", ready, "s", build,
           "s building llama-cpp-python")


if __name__ == "__main__":
    main()
