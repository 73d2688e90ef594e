# egs-hub from a checkout.
#   make up     install egs-hub and configurable-http-proxy, then start the embedded default
#   make test   install what the tests need, then run them (the command CI runs)
# Options: ARGS="--port 8001 ..." for `make up`; PYTEST_ARGS="-k walkthrough" for `make test`.

PYTHON ?= python3
VENV := .venv
NODE_PREFIX := .cache/node
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(CURDIR)/$(NODE_PREFIX)/node_modules/.bin:$(PATH)

.PHONY: install install-test up test lint

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(NODE_PREFIX)/node_modules/.bin/configurable-http-proxy:
	npm install --silent --no-fund --no-audit --prefix $(NODE_PREFIX) configurable-http-proxy@^4.6

install: $(VENV)/bin/python $(NODE_PREFIX)/node_modules/.bin/configurable-http-proxy
	$(BIN)/pip install --quiet -e .

install-test: install
	$(BIN)/pip install --quiet -e '.[test]'
	@missing=""; for tool in chromium prometheus; do command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian's$$missing for the tests (browser test, Prometheus metric source)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq $$missing >/dev/null; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq $$missing >/dev/null; fi; fi

up: install
	egs-hub up $(ARGS)

test: install-test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install-test
	$(BIN)/ruff check egs_hub tests
	$(BIN)/ruff format --check egs_hub tests
