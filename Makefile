PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench soak clean llama

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The real-model test needs llama.cpp's server (a cached wheel, or a 5-30 min build that prints its
# progress every 30 s) and a small model; when that cannot be installed the test is skipped with
# the printed reason.
llama: $(STAMP)
	scripts/install-llama.sh $(VENV) || echo "make: llama.cpp server unavailable; the real-model test will skip"

test: $(STAMP) llama
	$(BIN)/python -m pytest -q

demo: $(STAMP)
	$(BIN)/python -m tilth.cli.demo

bench: $(STAMP)
	$(BIN)/python -m bench

# The random kill -9 test, long: 200 sessions killed at random instants (about 10 minutes).
soak: $(STAMP)
	TILTH_KILL_TRIALS=$${TILTH_KILL_TRIALS:-200} $(BIN)/python -m pytest -q tests/test_random_kills.py

clean:
	rm -rf $(VENV) .demo
