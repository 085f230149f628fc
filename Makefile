PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: check test demo bench soak clean llama agents browser redis gh install uninstall mutants

# The fast tier: in-process and local subprocesses only, no real CLI agent, browser, redis or llama.cpp,
# nothing marked slow (the markers are in pyproject.toml; AGENTS.md maps each module to its tests).
FAST := not (cli_agents or browser or redis or llama or slow)

$(STAMP): pyproject.toml
	@echo "make: installing tilth and its test tools into $(VENV) (the first time takes a few minutes; pip is quiet meanwhile)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The real-model test needs llama.cpp's server (a cached wheel, or a 5-30 min build that prints its
# progress every 30 s) and a small model; when that cannot be installed the test is skipped with
# the printed reason.
llama: $(STAMP)
	scripts/install-llama.sh $(VENV) || echo "make: llama.cpp server unavailable; the real-model test will skip"

# The real CLI agents (Claude Code and Codex from npm, aider in its own venv) that the integration tests
# run against stub servers, installed once into ~/.cache/tilth (about 2 min, 1.5 GB). When that fails
# the tests needing them skip with the reason, except on CI (TILTH_REQUIRE_CLI_AGENTS=1), where it stops here.
agents:
	scripts/install-cli-agents.sh || { [ "$${TILTH_REQUIRE_CLI_AGENTS:-}" != 1 ] \
		&& echo "make: CLI agents unavailable; the tests that run them will skip"; }

# The dashboard's browser test drives Debian's chromium (apt) through Playwright for Python; Playwright's own
# browser download is never used. When it cannot be installed the test skips, except on CI
# (TILTH_REQUIRE_BROWSER=1), where it stops here.
browser:
	scripts/install-browser.sh || { [ "$${TILTH_REQUIRE_BROWSER:-}" != 1 ] \
		&& echo "make: chromium unavailable; the dashboard's browser test will skip"; }

# The dispatch tests and benchmark run Debian's redis-server (apt) as the broker, each on a loopback port of
# its own. When it cannot be installed the tests skip, except on CI (TILTH_REQUIRE_REDIS=1), where it stops here.
redis:
	scripts/install-redis.sh || { [ "$${TILTH_REQUIRE_REDIS:-}" != 1 ] \
		&& echo "make: redis-server unavailable; the dispatch tests will skip"; }

# The `tilth follow` tests drive Debian's gh (apt) against a local GitHub (tests/fake_github.py). When it cannot
# be installed they skip, except on CI (TILTH_REQUIRE_GH=1), where it stops here.
gh:
	scripts/install-gh.sh || { [ "$${TILTH_REQUIRE_GH:-}" != 1 ] \
		&& echo "make: gh unavailable; the tilth follow tests will skip"; }

# Before every change: lint, types, the fast tier (about 2 min on 2 cores).
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -m "$(FAST)"

test: $(STAMP) llama agents browser redis gh
	$(BIN)/python -m pytest -q

demo: $(STAMP)
	$(BIN)/python -m tilth.cli.demo

bench: $(STAMP) redis
	$(BIN)/python -m bench

# The random kill -9 test, long: 200 sessions killed at random instants (about 10 minutes).
soak: $(STAMP)
	TILTH_KILL_TRIALS=$${TILTH_KILL_TRIALS:-200} $(BIN)/python -m pytest -q tests/test_random_kills.py

# `tilth` on your PATH: the package (not editable, no test tools) in a venv of its own, linked from BINDIR.
# Run it again after pulling to update; `make uninstall` removes both.
INSTALL_VENV ?= $(HOME)/.local/share/tilth/venv
BINDIR ?= $(HOME)/.local/bin

install:
	@echo "make: installing tilth into $(INSTALL_VENV) (a few minutes the first time; pip is quiet meanwhile)"
	$(PYTHON) -m venv $(INSTALL_VENV)
	$(INSTALL_VENV)/bin/pip install --quiet --upgrade pip
	$(INSTALL_VENV)/bin/pip install --quiet --upgrade .
	mkdir -p $(BINDIR)
	ln -sf $(INSTALL_VENV)/bin/tilth $(BINDIR)/tilth
	@$(BINDIR)/tilth --version
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; *) echo "make: $(BINDIR) is not on your PATH; add it: export PATH=\"$(BINDIR):\$$PATH\"";; esac

uninstall:
	rm -f $(BINDIR)/tilth
	rm -rf $(INSTALL_VENV)

# Each deliberate breakage of a README promise (scripts/promise_mutants.toml) applied to a copy of the tree,
# the tests it names run against it: prints which were caught; fails under 90% (22 min measured on 2 busy cores).
mutants: $(STAMP) redis
	$(BIN)/python scripts/promise_mutants.py

clean:
	rm -rf $(VENV) .demo
