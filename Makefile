# kubectl-kamaji / kubectl-capi: developer entry points. `make help` lists them.
SHELL := /bin/bash
SANDBOX_DIR ?= $(CURDIR)/.sandbox
CARGO ?= cargo
PROFILE ?= full

.PHONY: help build release dist image provider-assets testbed test lint hooks chaos fuzz sandbox sandbox-down demo bench clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

build: ## build the plugins, the reconciler and the testbed runner (debug)
	$(CARGO) build --workspace --bins

release: ## build small, fast release binaries into target/release
	$(CARGO) build --release -p kubectl-kamaji -p kubectl-capi -p kamaji-reconciler

dist: ## release archives for this platform, their sha256 files and filled krew manifests, in dist/
	bash scripts/dist.sh

image: ## the reconciler's OCI image, reproducible, no container daemon: target/image/ (layout, .oci.tar, .digest)
	CARGO=$(CARGO) bash scripts/image.sh

PROVIDER_ASSETS ?= $(CURDIR)/target/provider-assets
provider-assets: ## the reconciler's clusterctl release assets (components.yaml, metadata.yaml), as a clusterctl local repository
	$(CARGO) run -q -p kamaji-reconciler -- manifests --output-dir $(PROVIDER_ASSETS)

testbed: ## build (once) the upstream kube-apiserver, kube-controller-manager, etcd, CAPI manager and clusterctl
	bash testbed/build-bins.sh all

TEST_JOBS ?= 3
test: testbed image ## run every test against the real testbed (test binaries TEST_JOBS at a time; times in target/test-logs)
	CARGO=$(CARGO) TEST_JOBS=$(TEST_JOBS) bash scripts/test.sh

lint: ## rustfmt, clippy and unused dependencies (cargo-machete, installed on first use), as CI expects them
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	@command -v cargo-machete >/dev/null || $(CARGO) install --locked cargo-machete@0.9.2
	$(CARGO) machete

hooks: ## check commit subjects (at most 72 characters, a blank line before the body) as you commit
	git config core.hooksPath scripts/git-hooks

CHAOS_CYCLES ?= 100
chaos: testbed ## only the chaos test: the reconciler killed at random over CHAOS_CYCLES cycles (make test runs 100)
	CHAOS_CYCLES=$(CHAOS_CYCLES) $(CARGO) test -p kamaji-reconciler --test chaos -- --nocapture

FUZZ_SECONDS ?= 60
fuzz: ## fuzz the parsers, the template engine and the kubeconfig merge (needs nightly and cargo-fuzz)
	cd fuzz && for t in parsers template kubeconfig; do \
	  cargo +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) -max_len=4096 || exit 1; \
	done

# REAL=1: a bare cluster, then day 0 as a site runs it (scripts/day0.sh: kubectl capi init from a
# bundle, every controller from its image). REAL=processes: the controllers as processes instead
# (Kamaji's validating webhook not registered, so tenants may run the newer releases built here).
SANDBOX_MODE = $(if $(filter processes,$(REAL)),--real,$(if $(REAL),--day0))
sandbox: testbed ## start a fresh management-cluster API in the background (no data from an earlier one); prints the KUBECONFIG to use
	@$(CARGO) build -q -p capi-kamaji-testbed --bin capi-testbed
	@if [ "$(SANDBOX_MODE)" = --day0 ]; then $(CARGO) build -q --workspace --bins && bash scripts/image.sh >/dev/null; fi
	@if [ -f "$(SANDBOX_DIR)/ready" ] && [ -f "$(SANDBOX_DIR)/pid" ] && kill -0 $$(cat "$(SANDBOX_DIR)/pid") 2>/dev/null; then \
	  echo "sandbox already running at $$(cat $(SANDBOX_DIR)/ready)"; \
	else \
	  mkdir -p "$(SANDBOX_DIR)"; rm -f "$(SANDBOX_DIR)/ready" "$(SANDBOX_DIR)/failed"; \
	  nohup target/debug/capi-testbed up --dir "$(SANDBOX_DIR)" --profile $(PROFILE) $(if $(CAPI),--capi) $(SANDBOX_MODE) \
	    > "$(SANDBOX_DIR)/sandbox.log" 2>&1 < /dev/null & \
	  for i in $$(seq 1 600); do \
	    [ -f "$(SANDBOX_DIR)/ready" ] && break; \
	    if [ -f "$(SANDBOX_DIR)/failed" ]; then cat "$(SANDBOX_DIR)/sandbox.log" >&2; exit 1; fi; \
	    sleep 0.2; \
	  done; \
	  [ -f "$(SANDBOX_DIR)/ready" ] || { echo "sandbox did not start; see $(SANDBOX_DIR)/sandbox.log" >&2; exit 1; }; \
	  if [ "$(SANDBOX_MODE)" = --day0 ]; then bash scripts/day0.sh "$(SANDBOX_DIR)" || exit 1; fi; \
	  echo "sandbox running at $$(cat $(SANDBOX_DIR)/ready); logs in $(SANDBOX_DIR); stop it with: make sandbox-down"; \
	fi
	@echo "export KUBECONFIG=$(SANDBOX_DIR)/kubeconfig"

sandbox-down: ## stop the sandbox and every process it started
	@if [ -x target/debug/capi-testbed ]; then target/debug/capi-testbed down --dir "$(SANDBOX_DIR)"; \
	 elif [ -f "$(SANDBOX_DIR)/pid" ]; then kill $$(cat "$(SANDBOX_DIR)/pid") 2>/dev/null || true; fi

demo: ## the whole story on the local sandbox (KEEP=1 leaves it running)
	KEEP=$(KEEP) bash scripts/demo.sh

bench: testbed ## every benchmark, side by side with kubectl and clusterctl, as one table of ratios (BENCH_QUICK=1: a small version, minutes)
	python3 bench/bench.py

clean: sandbox-down ## remove build output (the testbed cache in ~/.cache stays)
	$(CARGO) clean
	rm -rf "$(SANDBOX_DIR)"
