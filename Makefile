# The project's entry points. `make help` lists them.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/capx-io/capx/internal/version.version=$(VERSION) \
	-X github.com/capx-io/capx/internal/version.commit=$(COMMIT)
BINARIES := manager kubectl-captf kubectl-capvco capvco-gpucheck vcosim
GO_TEST_FLAGS ?=

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: toolchain
toolchain: ## Build (once per machine, then cached) the binaries the default test run needs.
	bash hack/toolchain.sh

.PHONY: toolchain-all
toolchain-all: ## Build every tool, including the node parts, clusterctl and the CAPI core manager.
	bash hack/toolchain.sh all

.PHONY: generate
generate: ## Regenerate deepcopy, CRDs and RBAC (never edit those files by hand).
	bash hack/generate.sh

.PHONY: build
build: ## Build every binary into bin/ (static, version-stamped).
	@for b in $(BINARIES); do \
	  if [[ -d cmd/$$b ]]; then CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/$$b ./cmd/$$b; fi; \
	done

# Packages go test runs at once. Their tests mostly wait on their API servers, Jobs and
# OpenTofu (a package used under half a core), so three share the two cores of CI well.
TEST_PACKAGES_AT_ONCE ?= 3

.PHONY: test
test: toolchain ## Run every test (unit, envtest, real OpenTofu); builds the toolchain first if missing.
	bash hack/gotest.sh -timeout 30m -p $(TEST_PACKAGES_AT_ONCE) $(GO_TEST_FLAGS) ./...

.PHONY: update-golden
update-golden: ## Rewrite every golden file under testdata/ from the code (internal/testenv/golden), then review the diff.
	UPDATE_GOLDEN=1 go test -count=1 $$(grep -rl --include='*_test.go' 'testenv/golden"' . | xargs -n1 dirname | sort -u)

.PHONY: test-race
test-race: toolchain ## The tests with the race detector.
	go test -race $(GO_TEST_FLAGS) ./...

.PHONY: bench
bench: toolchain ## Run the benchmarks (see docs/benchmarks.md for the recorded figures).
	go test -run '^$$' -bench . -benchmem ./...

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 20s).
	bash hack/fuzz.sh $${FUZZTIME:-20s}

.PHONY: lint
lint: ## go vet and gofmt.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [[ -n "$$unformatted" ]]; then echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; fi
	go vet ./...

.PHONY: verify
# Every file generated from the code (hack/generate.sh: api, config, docs/api.md, the condition
# and flag pages; release-generate: completions, the command reference, goreleaser.yaml) must be
# committed as generated: a stale one fails here, before any test runs.
VERIFY_GENERATED = api config go.mod go.sum docs/api.md docs/captf/conditions.md docs/capvco/conditions.md docs/manager.md $(RELEASE_GENERATED)
verify: lint ## Lint, and fail if generated files (code, CRDs, docs, completions, command reference) or go.mod are out of date.
	bash hack/generate.sh
	$(MAKE) --no-print-directory release-generate
	go mod tidy
	@if [[ -n "$$(git status --porcelain -- $(VERIFY_GENERATED))" ]]; then \
	  echo "generated files or go.mod are out of date; run make generate release-generate and go mod tidy, then commit:"; \
	  git status --porcelain -- $(VERIFY_GENERATED); git diff --stat -- $(VERIFY_GENERATED); exit 1; fi

# make e2e runs the e2e packages in two lanes side by side (hack/lanes.sh, a log per lane):
# e2e-suite is test/e2e, on its management clusters e2e-a and e2e-b; e2e-nodes is every other
# package of test/, one after the other (-p 1), on clusters and platforms of their own names
# (pair-a, pair-b, smoke, gpustandin, ptest, pattach, pmgmt, vcoh, vcom, vcoa, csie2e): localcluster.Up
# serialises bring-ups and gives each cluster its own API server port and address ranges, and
# each runs in its own network namespaces. Whatever happens (a timeout kills the test binary
# before its cleanup), test/e2e's clusters are taken down afterwards. See docs/e2e.md.
E2E_CLUSTERS := e2e-a e2e-b
E2E_SUITE := github.com/capx-io/capx/test/e2e
E2E_GO_TEST = bash hack/gotest.sh -tags e2e -count=1 -p 1 -timeout 60m -v $(GO_TEST_FLAGS)

.PHONY: e2e
e2e: node-tools ## Run the end-to-end suites on real local management clusters, two lanes at once (root; builds what is missing).
	bash hack/lanes.sh e2e-suite '$(MAKE) --no-print-directory -o node-tools e2e-suite' \
	  e2e-nodes '$(MAKE) --no-print-directory -o node-tools e2e-nodes'

.PHONY: e2e-tools
e2e-tools: node-tools e2e-late-tools ## Build (once per machine, then cached) what the e2e suites need: every tool, the real CSI sidecars and external-dns.

.PHONY: node-tools
node-tools: ## Build (once per machine, then cached) every toolchain tool, the node binaries and CAPI's manager included.
	bash hack/toolchain.sh all

# What only E2E_LATE's packages need. e2e-nodes builds them beside its other packages, so a cold
# lane waits for them only if they take longer than those.
.PHONY: e2e-late-tools
e2e-late-tools: ## Build (once per machine, then cached) the real CSI sidecars and external-dns.
	bash hack/csi-sidecars.sh
	bash hack/external-dns.sh

.PHONY: e2e-suite
e2e-suite: node-tools ## The e2e lane of test/e2e alone (its clusters e2e-a, e2e-b).
	@rc=0; $(E2E_GO_TEST) $(E2E_SUITE) || rc=$$?; \
	for c in $(E2E_CLUSTERS); do bash hack/cluster down --name $$c >/dev/null 2>&1 || rc=1; done; \
	if [[ $$rc -ne 0 ]]; then echo "e2e failed: artifacts in _artifacts/e2e/<suite>/ (docs/e2e.md)"; fi; exit $$rc

# The packages of test/ that need e2e-late-tools (the CSI sidecars, external-dns): e2e-nodes runs
# them last, after its other packages, while building those tools in the background.
E2E_LATE := github.com/capx-io/capx/test/csi github.com/capx-io/capx/test/externaldns

.PHONY: e2e-nodes
e2e-nodes: node-tools ## The e2e lane of every other package of test/ (real nodes, platforms, CSI, GPU stand-in).
	@mkdir -p _artifacts/lanes; log=_artifacts/lanes/e2e-late-tools.log; \
	$(MAKE) --no-print-directory e2e-late-tools >$$log 2>&1 & tools=$$!; \
	pkgs=$$(go list -tags e2e ./test/... | grep -vx '$(E2E_SUITE)'); \
	early=$$(printf '%s\n' $$pkgs | grep -vxF $(addprefix -e ,$(E2E_LATE))); \
	rc=0; $(E2E_GO_TEST) $$early || rc=$$?; \
	if ! wait $$tools; then cat $$log; echo "e2e-nodes: building the CSI sidecars or external-dns failed (log above, $$log)"; exit 1; fi; \
	echo "e2e-nodes: the CSI sidecars and external-dns are built ($$log); now $(E2E_LATE)"; \
	$(E2E_GO_TEST) $(E2E_LATE) || rc=$$?; exit $$rc

.PHONY: images
images: ## Build the local images (manager, CAPI manager, vcosim, test modules) as tarballs in _artifacts/images.
	bash hack/images.sh

# Release artefacts (docs/release.md). Snapshots take the newest release series of
# config/metadata.yaml, so clusterctl and krew accept them.
SERIES := $(shell awk '/major:/ {m=$$NF} /minor:/ {print m "." $$NF}' config/metadata.yaml | sort -V | tail -n1)
export CAPX_SNAPSHOT_VERSION ?= $(SERIES).0-snapshot.g$(COMMIT)
# goreleaser knows no commit without a tag; the snapshot's SBOMs name it from these.
ifeq ($(origin CAPX_SNAPSHOT_COMMIT),undefined)
CAPX_SNAPSHOT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null)
CAPX_SNAPSHOT_DATE := $(shell TZ=UTC git show -s --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD 2>/dev/null)
endif
export CAPX_SNAPSHOT_COMMIT CAPX_SNAPSHOT_DATE
# Files generated from the binaries and the release; make verify-release fails when they are stale.
RELEASE_GENERATED := goreleaser.yaml completions plugins/krew docs/reference docs/api.md mkdocs.yml
# RELEASE_PLATFORMS=all (default) builds every platform of goreleaser.yaml, as a release does;
# host builds this machine's only and type-checks the others (hack/crosscheck, docs/release.md).
RELEASE_PLATFORMS ?= all
HOST_PLATFORM = $(shell go env GOOS)/$(shell go env GOARCH)
ifeq ($(RELEASE_PLATFORMS),all)
GORELEASER_CONFIG := goreleaser.yaml
KREW_INDEX := plugins/krew
# The module base image is built for every architecture of the manager (linux/amd64, arm64):
# hack/releaseimages refuses fewer.
RELEASE_EXTRA_TOOLS := tofu-arm64
RELEASE_TOFUS := bin/tofu,bin/tofu-arm64
# The CSI driver image's Debian tools for arm64: extracted from Debian's arm64 packages
# (this machine's amd64 ones are installed by hack/install-deps.sh).
RELEASE_DEBIAN_ROOTS := arm64=_artifacts/release/debian-arm64
else ifeq ($(RELEASE_PLATFORMS),host)
# The krew templates list every platform, so a host build writes its own beside the snapshot.
GORELEASER_CONFIG := _artifacts/release/goreleaser-host.yaml
KREW_INDEX := _artifacts/release/krew-host
RELEASE_EXTRA_TOOLS :=
RELEASE_TOFUS := bin/tofu
RELEASE_DEBIAN_ROOTS :=
else
$(error RELEASE_PLATFORMS must be all or host, not "$(RELEASE_PLATFORMS)")
endif

# debian-roots makes each ARCH=DIR root of Debian packages hack/releaseimages takes another
# architecture's add-on tools from (hack/releaseimages/debian-root.sh; reused once made).
debian-roots = $(foreach r,$(1),bash hack/releaseimages/debian-root.sh $(firstword $(subst =, ,$(r))) $(lastword $(subst =, ,$(r)));)

# The key the release's files are signed with (hack/sign): a release's is the project's; a
# snapshot without CAPX_SIGNING_KEY signs with one generated for it, offline.
SIGNING_KEY = $(or $(CAPX_SIGNING_KEY),_artifacts/release/signing/signing.key)

.PHONY: release-tools
release-tools: ## Build goreleaser, krew, kubectl, clusterctl, tofu and cosign (once per machine, then cached).
	bash hack/toolchain.sh release $(RELEASE_EXTRA_TOOLS)

.PHONY: release-generate
release-generate: build ## Regenerate goreleaser.yaml, completions/ and the command reference from the binaries.
	go run ./hack/goreleaserconfig $(BINARIES)
	go run ./hack/completions -bin bin $(BINARIES)
	go run ./hack/clidocs -bin bin $(BINARIES)
	go run ./hack/apidocs config/crd/bases docs/api.md

.PHONY: release-snapshot
release-snapshot: release-tools release-generate ## Every release artefact, locally: archives, krew manifests, images, clusterctl files, docs site (RELEASE_PLATFORMS=host: this platform's only).
	bin/goreleaser check
	go build -o bin/capx-sbom ./hack/sbom
ifeq ($(RELEASE_PLATFORMS),host)
	mkdir -p $(dir $(GORELEASER_CONFIG))
	go run ./hack/goreleaserconfig -only $(HOST_PLATFORM) -o $(GORELEASER_CONFIG) $(BINARIES)
	go run ./hack/crosscheck -skip $(HOST_PLATFORM)
endif
	bin/goreleaser release --snapshot --clean --config $(GORELEASER_CONFIG)
	go run ./hack/krewmanifests -dist dist -index $(KREW_INDEX) $(BINARIES)
	$(call debian-roots,$(RELEASE_DEBIAN_ROOTS))
	go run ./hack/releaseimages -dist dist -o dist/images -tofu $(RELEASE_TOFUS) -debian-root '$(RELEASE_DEBIAN_ROOTS)' \
	  -tofu-version $$(sed -n 's/^OPENTOFU_VERSION=//p' hack/versions.env) -revision $(CAPX_SNAPSHOT_COMMIT) -date $(CAPX_SNAPSHOT_DATE)
ifeq ($(CAPX_SIGNING_KEY),)
	rm -rf $(dir $(SIGNING_KEY)) && go run ./hack/sign -generate-key $(dir $(SIGNING_KEY))
endif
	go run ./hack/sign -key $(SIGNING_KEY) dist/checksums.txt dist/images/images.json dist/krew/*.yaml \
	  _artifacts/release/clusterctl/infrastructure-capx/v$(CAPX_SNAPSHOT_VERSION)/*.yaml
	$(MAKE) --no-print-directory docs
	@echo "release snapshot v$(CAPX_SNAPSHOT_VERSION): dist/ (archives, checksums, SBOMs, krew/, images/), _artifacts/release/clusterctl/, _artifacts/site/"

# A tagged release (docs/release.md): the images are pushed before anything is published, and
# goreleaser's before hook (hack/publishimages) refuses to publish components whose images are
# not in the registry at the digests this release built. Needs GITHUB_TOKEN, CAPX_SIGNING_KEY and
# push access to ghcr.io/capx-io (CAPX_REGISTRY_USERNAME and CAPX_REGISTRY_PASSWORD, or a login).
RELEASE_TAG = $(shell git describe --tags --exact-match 2>/dev/null)
.PHONY: release-publish
release-publish: release-tools ## Publish the tagged HEAD: build, sign, push the images, then goreleaser publishes the rest with the krew manifests and signatures (refused without the images).
	@if [[ -z "$(RELEASE_TAG)" ]]; then echo "release-publish: HEAD has no tag (git tag vX.Y.Z first)"; exit 1; fi
	go build -o bin/capx-sbom ./hack/sbom
	CAPX_RELEASE_BUILD_ONLY=1 bin/goreleaser release --clean --skip=publish
	$(call debian-roots,arm64=_artifacts/release/debian-arm64)
	go run ./hack/releaseimages -dist dist -o dist/images -tofu bin/tofu,bin/tofu-arm64 -debian-root arm64=_artifacts/release/debian-arm64 \
	  -tofu-version $$(sed -n 's/^OPENTOFU_VERSION=//p' hack/versions.env) -revision $$(git rev-parse HEAD) \
	  -date $$(TZ=UTC git show -s --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD)
	go run ./hack/krewmanifests -dist dist $(BINARIES)
	@if [[ -z "$${CAPX_SIGNING_KEY:-}" ]]; then echo "release-publish: CAPX_SIGNING_KEY names the project's signing key"; exit 1; fi
	go run ./hack/sign -key $(CAPX_SIGNING_KEY) dist/checksums.txt dist/images/images.json dist/krew/*.yaml \
	  _artifacts/release/clusterctl/infrastructure-capx/$(RELEASE_TAG)/*.yaml
	go run ./hack/publishimages -push -images dist/images/images.json -save _artifacts/release/published-images.json \
	  _artifacts/release/clusterctl/infrastructure-capx/$(RELEASE_TAG)/infrastructure-components.yaml
	rm -rf _artifacts/release/attach && mkdir -p _artifacts/release/attach
	cp dist/checksums.txt.sig dist/images/images.json dist/images/images.json.sig dist/krew/*.yaml dist/krew/*.yaml.sig \
	  _artifacts/release/clusterctl/infrastructure-capx/$(RELEASE_TAG)/*.sig _artifacts/release/attach/
	bin/goreleaser release --clean

.PHONY: verify-release
verify-release: ## Fail when a file generated from the binaries or the release is stale (after release-snapshot).
	@if [[ -n "$$(git status --porcelain -- $(RELEASE_GENERATED))" ]]; then \
	  echo "stale generated release files; run make release-snapshot and commit:"; \
	  git status --porcelain -- $(RELEASE_GENERATED); exit 1; fi

.PHONY: release-test
release-test: toolchain ## Prove the snapshot's artefacts with the tools that consume them (krew, kubectl, clusterctl; after release-snapshot).
	go test -tags release -count=1 -v $(GO_TEST_FLAGS) ./test/release/...

.PHONY: docs
docs: ## Build the docs site strictly into _artifacts/site (a broken link or a page missing from nav fails).
	mkdocs build --strict

.PHONY: quickstart
quickstart: ## Bring up a local management cluster with both providers, the simulator and samples.
	bash hack/quickstart.sh up

.PHONY: quickstart-down
quickstart-down: ## Remove everything the quickstart created.
	bash hack/quickstart.sh down

.PHONY: clean
clean: ## Remove build outputs (the per-machine toolchain cache stays).
	rm -rf dist _artifacts bin/manager bin/kubectl-captf bin/kubectl-capvco bin/capvco-gpucheck bin/vcosim bin/capx-sbom
