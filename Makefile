# Racksmith — the two commands: `make up` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
IRONIC_VENV := .ironic-venv
IRONIC_STAMP := $(IRONIC_VENV)/.installed
IRONIC_PKGS := ironic==39.0.0 sushy-tools==2.2.0
IRONIC_PLUGIN := ironic_plugin/pyproject.toml ironic_plugin/racksmith_ironic_fake/__init__.py
# What running needs (make up) and what only the tests add (make test).
DEBS := xfsprogs genisoimage ipmitool etcd-server etcd-client haproxy
DEV_DEBS := chromium keepalived
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# setuptools warns on every editable install that a folder named like the
# package could shadow it; the checkout's own racksmith/ is the package, so
# that one known warning is silenced (only it: other warnings still show).
EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

.PHONY: install install-dev up test test-quick test-unit test-integration test-e2e \
        console-screenshots bench bench-scale lint clean debs dev-debs

# The suite runs on TEST_WORKERS pytest-xdist workers: one work unit per test
# module, one for the demo session the e2e cluster/volume/update/console tests
# share, longest first (tests/conftest.py). 3 on this project's 2-core CI:
# the end-to-end tests spend much of their time waiting on their processes,
# and a third worker fills it (docs/testing.md, "Where the time goes").
TEST_WORKERS ?= 3
PYTEST := $(BIN)/pytest -q -p no:cacheprovider
XDIST := -n $(TEST_WORKERS) --dist loadscope

# `make up`: the package and what it imports, Ironic's env, the Debian tools
# running needs. `make test` adds the test tools (pytest, mypy, playwright,
# the official client...) and the browser.
install: debs $(STAMP) $(IRONIC_STAMP)

install-dev: install dev-debs $(DEV_STAMP)

# Ironic and the Redfish emulator run as their own processes, from their own
# virtual env: their pins (oslo.*, Flask, ...) stay out of ours. Our Ironic
# hardware type for the fake BMCs (ironic_plugin/) goes into the same env.
$(IRONIC_STAMP): Makefile $(IRONIC_PLUGIN)
	@$(call ensure_venv,$(IRONIC_VENV))
	$(IRONIC_VENV)/bin/python -m pip install -q --upgrade pip
	$(IRONIC_VENV)/bin/python -m pip install -q $(IRONIC_PKGS)
	$(IRONIC_VENV)/bin/python -m pip install -q --no-deps ./ironic_plugin
	touch $(IRONIC_STAMP)

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory debs
	@$(call ensure_venv,$(VENV))
	$(BIN)/python -m pip install -q --upgrade pip
	$(EDITABLE) $(BIN)/python -m pip install -q -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	@$(MAKE) --no-print-directory dev-debs
	$(EDITABLE) $(BIN)/python -m pip install -q -e '.[dev]'
	touch $(DEV_STAMP)

debs:
	@$(call install_debs,$(DEBS))

dev-debs:
	@$(call install_debs,$(DEV_DEBS))

# A virtual env is usable only with its pip: one left half-made by an
# interrupted first `make up` (Ctrl-C during `python3 -m venv`) is made again.
define ensure_venv
$(1)/bin/python -m pip --version >/dev/null 2>&1 || { rm -rf $(1); $(PY) -m venv $(1); }
endef

define install_debs
missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
if [ -n "$$missing" ]; then \
  echo "installing Debian packages:$$missing"; \
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null; \
fi
endef

up: install
	$(BIN)/racksmith up --progress --emulate-hosts 6 --apply-emulated-hosts --apply examples/cluster $(ARGS)

lint: install-dev
	$(BIN)/ruff check racksmith tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# The one command: lint and every test (what .ci/run calls).
test: install-dev lint
	$(PYTEST) $(XDIST) --durations=25 tests

# The inner loop: unit and integration tests, no lint, no e2e.
test-quick: install-dev
	$(PYTEST) $(XDIST) --durations=10 tests/unit tests/integration

test-unit: install-dev
	$(PYTEST) $(XDIST) tests/unit

test-integration: install-dev
	$(PYTEST) $(XDIST) --durations=10 tests/integration

test-e2e: install-dev
	$(PYTEST) $(XDIST) --durations=25 tests/e2e

# Refresh the pictures of docs/console.md (make test writes them to .artifacts/).
console-screenshots: install-dev
	RACKSMITH_SCREENSHOTS=$(CURDIR)/docs/console $(PYTEST) tests/e2e/test_webconsole.py

# Every benchmark of record, in turn (about an hour on 2 cores); each run's
# results land in bench/results/NAME.json and bench/report.py writes the
# figures tables of docs/benchmarks.md from them. A failed run is recorded as
# failed and the rest still run; report exits 1 if any is.
RECORD := $(BIN)/python bench/record.py
bench: install-dev
	-$(RECORD) backup -- $(BIN)/python bench/backup.py
	-$(RECORD) apiserver -- $(BIN)/python bench/apiserver.py
	-$(RECORD) apiserver-etcd -- $(BIN)/python bench/apiserver.py --store etcd
	-$(RECORD) etcd-clients -- $(BIN)/python bench/etcd_clients.py
	-$(RECORD) hardening -- $(BIN)/python bench/hardening.py
	-$(RECORD) ipam -- $(BIN)/python bench/ipam.py
	-$(RECORD) controlplane -- $(BIN)/python bench/controlplane.py
	-$(RECORD) idle -- $(BIN)/python bench/idle.py --workers 24
	-$(RECORD) console -- $(BIN)/python bench/console.py
	-$(RECORD) volumes -- $(BIN)/python bench/volumes.py
	-$(RECORD) update -- $(BIN)/python bench/update.py
	-$(RECORD) provisioning -- $(BIN)/python bench/provisioning.py
	-$(RECORD) cluster -- $(BIN)/python bench/cluster.py
	$(BIN)/python bench/report.py

# One Racksmith process at 1,000 hosts (about 25 minutes): not in `bench`.
bench-scale: install-dev
	-$(RECORD) scale -- $(BIN)/python bench/scale.py --skip-console
	$(BIN)/python bench/report.py

clean:
	rm -rf $(VENV) $(IRONIC_VENV) .mypy_cache .ruff_cache
