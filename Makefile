# commitgym: `make demo` to try it, `make test` for the whole suite, `make bench` for figures.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
TIMED := deploy/dev/timed.sh

# The test suite runs against real services.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/commitgym
TEST_BROKER_URL ?= redis://127.0.0.1:6379/14
# Test processes side by side (pytest-xdist), each with its own test database and Redis database (from
# the one above, downward). The engine's tests keep a module's built environments in one process; the
# rest are spread test by test. The embedded model runs on one thread beside them: its threads spin
# while they wait for each other, and the cores are busy.
TEST_PROCESSES ?= 2
# The apps' and browser tests wait on workers, servers and browsers more than they compute: a third
# process fills the cores.
APPS_TEST_PROCESSES ?= 3
PYTEST_ARGS := -q -p no:cacheprovider --durations=10

# The embedded model runs on llama-cpp-python, which builds from source (a few minutes): with
# the default flags it crashes on these machines' CPUs. uv's cache of built wheels ignores
# CMAKE_ARGS, so the cache is keyed by the flags: a build with other flags is never reused.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_OPENMP=OFF
UV_CACHE := $(HOME)/.cache/uv-commitgym-$(shell printf '%s' '$(LLAMA_CMAKE_ARGS)' | md5sum | cut -c1-8)
# Offline first, from the cache: online, uv builds llama-cpp-python again whenever the index's answer
# for its source is refreshed (287 s of a clean clone's install with a warm cache; 4 s offline).
UV_SYNC := CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" UV_CACHE_DIR=$(UV_CACHE) \
  $(VENV)/bin/uv sync --frozen --inexact --extra test --extra swebench --python $(PY) -q

.PHONY: demo test bench install services worker serve clean

$(VENV)/.installed: pyproject.toml uv.lock
	deploy/dev/require.sh /usr/bin/g++ g++ /usr/bin/cmake cmake
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q uv
	$(UV_SYNC) --offline 2>/dev/null || $(UV_SYNC)
	touch $@

install: $(VENV)/.installed

DEMO_ADDRPORT ?= 127.0.0.1:8000

demo: install
	$(PY) manage.py migrate --verbosity 0
	$(PY) manage.py demo --addrport $(DEMO_ADDRPORT)

test:
	@$(TIMED) install $(MAKE) --no-print-directory install
	@$(TIMED) services deploy/dev/services.sh
	@$(TIMED) programs deploy/dev/require.sh /usr/bin/chromium chromium /usr/bin/bwrap bubblewrap /usr/bin/python3 python3 \
		/usr/sbin/mkfs.ext4 e2fsprogs
	@$(TIMED) docker deploy/dev/docker.sh
	@$(TIMED) "import layers" $(VENV)/bin/lint-imports --no-cache
	@DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) \
	  $(TIMED) "suite: engine" $(PY) -m pytest tests/worker $(PYTEST_ARGS) -n $(TEST_PROCESSES) --dist loadfile
	@DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) COMMITGYM_LLM_THREADS=1 \
	  $(TIMED) "suite: apps, browser" $(PY) -m pytest tests/apps tests/browser $(PYTEST_ARGS) -n $(APPS_TEST_PROCESSES) \
	  --dist worksteal

# Each bench/<name>.py prints "name: value unit (baseline: value unit, ratio: r)" lines;
# files starting with "_" are their helpers.
bench: install
	@deploy/dev/services.sh  # bench/web.py serves its pages from PostgreSQL
	@for b in bench/[!_]*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf var
