# The two commands of the README: `make demo` (the main job) and `make test`.
# Both work on a fresh clone with only Python 3.11: they bootstrap uv if it is
# missing and build .venv/ from uv.lock.
PYTHON ?= python3
UV := $(PYTHON) -m uv
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install bench bench-smoke lint sandbox clean browser

# The bytecode of the dependencies (uv) and of the project's own modules (compileall):
# where Python may not write it (PYTHONDONTWRITEBYTECODE), every process would compile
# them again (the modules a sync imports: 0.2 s of CPU each time).
$(BIN)/diligence: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --disable-pip-version-check uv
	$(UV) sync --frozen --compile-bytecode
	$(BIN)/python -m compileall -q diligence pipelines flows sandbox entry.py
	@touch $@

install: $(BIN)/diligence

demo: install
	$(BIN)/diligence demo

# Three pytest workers (pytest-xdist), a test file each at a time (a whole folder for the
# folders that share costly fixtures: tests/conftest.py): most tests wait on a server or
# a subprocess, so three keep both cores busy; the slowest are listed.
test: install browser postgres
	$(BIN)/pytest -n 3 --dist loadgroup --durations=20

# Headless Chromium for the report's browser test (tests/report): Debian's package,
# installed when missing (as root, or through sudo).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

# PostgreSQL server binaries for the DuckLake tests (tests/lake start a throwaway
# cluster on 127.0.0.1): Debian's postgresql-15, installed when missing.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql-15; }

# The main benchmark, then the side-by-side sections of benchmarks/RESULTS.md: a hostile
# service (ours and dlt's rest_api under the same faults), the shared rate budget's cost,
# resuming an interrupted sync, and a lake namespace's fixed cost.
bench: install postgres
	$(BIN)/python -m benchmarks.run
	$(BIN)/python -m benchmarks.hostile
	$(BIN)/python -m benchmarks.budget_cost
	$(BIN)/python -m benchmarks.resume
	$(BIN)/python -m benchmarks.lake --fixed-cost --scale small --latency-ms 0

# The benchmark's end-to-end smoke test, kept out of `make test` (marker `bench`).
bench-smoke: install
	$(BIN)/pytest -m bench tests/benchmarks

sandbox: install
	$(BIN)/diligence sandbox --port 8765

lint: install
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) data reports .pytest_cache
