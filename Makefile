# umemcg quick start:
#   make bench   install what is missing, configure `release` and build
#                umemcg-bench, run the main job:
#                `umemcg-bench all --quick --plots out/plots` (< 5 minutes
#                on 2 cores; the seed-claim report, plots in out/plots/)
#   make bench-micro   the Google Benchmark programs with their ratio reports
#   make bench-static  a fully static umemcg-bench (build/release-static/bin/)
#                for bench/scaling-sweep.sh on a bigger machine
#   make test    install what is missing, build and run every test suite in
#                the release, asan (ASan+UBSan) and tsan presets, then each
#                fuzzer (fuzz preset, clang) for FUZZ_SECONDS (default 60)
#   make install PREFIX=/opt/umemcg   build `release` and install the
#                headers, libraries, CMake package, pkg-config files,
#                binaries and man pages under PREFIX (default /usr/local)
#   make build-<preset>   configure and build one preset (release, debug,
#                asan, tsan, fuzz, release-static)
#
# Debian packages are installed with apt-get only when missing. Every
# target that runs something it needs built configures and builds it first,
# so each works on a fresh clone.

DEB_PACKAGES := cmake ninja-build g++ make clang libclang-rt-14-dev libgtest-dev libgmock-dev \
                libbenchmark-dev nlohmann-json3-dev python3 sqlite3 xz-utils
# Operator interfaces: FUSE mount, metrics server (+ curl for its tests), CLI.
DEB_PACKAGES += pkg-config fuse3 libfuse3-dev libcpp-httplib-dev libcli11-dev curl
# umemcg-bench: command line parsing (CLI11, above) and SVG plots.
DEB_PACKAGES += gnuplot-nox
# The cluster quota (libumemcg-cluster): the Redis client library, and the
# server its tests and `umemcg-bench cluster` start on loopback, and the
# sentinel its failover tests start.
DEB_PACKAGES += libhiredis-dev redis-server redis-sentinel
# Tests: a seccomp filter denying membarrier after start-up; promtool
# (package prometheus) linting a real scrape.
DEB_PACKAGES += libseccomp-dev prometheus
# Tests: `umemcg top` on a terminal of a fixed size (a tmux pane).
DEB_PACKAGES += tmux
# libumemcg-jemalloc: per-group arenas (jemalloc 5.3).
DEB_PACKAGES += libjemalloc-dev
# Heap profiles (libumemcg-profile): the pprof encoder (libprotobuf, protoc)
# and the real clients its tests read them with (go tool pprof,
# google-pprof); libunwind, loaded at run time for fast stack capture and
# linked by the comparison benchmark.
DEB_PACKAGES += libprotobuf-dev protobuf-compiler golang-go google-perftools libunwind-dev
TEST_PRESETS := release asan tsan fuzz
BUILD_PRESETS := release debug asan tsan fuzz release-static
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PREFIX ?= /usr/local

.PHONY: all deps build test bench bench-micro bench-static install format clean \
        $(addprefix build-,$(BUILD_PRESETS))

all: build

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# configure-build(preset, targets): configure the preset (a no-op when
# already configured) and build the targets (everything when empty).
define configure-build
cmake --preset $(1) >/dev/null
cmake --build --preset $(1) $(if $(2),--target $(2))
endef

# A static pattern rule: unlike a plain `build-%` pattern rule, it applies
# to the phony targets it lists (make never searches implicit rules for a
# phony target, so `bench: build-release` used to build nothing).
$(addprefix build-,$(BUILD_PRESETS)): build-%: deps
	$(call configure-build,$*)

build: build-release

test: deps
	@bash scripts/run_tests.sh $(TEST_PRESETS)

# The main job: every seed experiment briefly, one report, SVG plots.
PLOTS_DIR := out/plots

bench: deps
	$(call configure-build,release,umemcg-bench)
	@mkdir -p $(PLOTS_DIR)
	./build/release/bin/umemcg-bench all --quick --plots $(PLOTS_DIR)
	@echo "plots: $(abspath $(PLOTS_DIR))/*.svg"

# The micro-benchmark programs, each ending in a ratio report (JSON copies
# under build/release/).
BENCHMARKS := charge_benchmark obj_benchmark stats_benchmark

bench-micro: deps
	$(call configure-build,release,$(BENCHMARKS))
	@set -e; for b in $(BENCHMARKS); do \
	  echo "==== $$b"; ./build/release/bin/$$b --json=build/release/$$b.json; \
	done

# A fully static umemcg-bench for bench/scaling-sweep.sh.
bench-static: build-release-static
	@echo "static binary: build/release-static/bin/umemcg-bench"

# Installs what `release` builds (cmake --install; see README, Installing).
install: build-release
	cmake --install build/release --prefix "$(PREFIX)"

format:
	clang-format -i $$(git ls-files '*.h' '*.cc' '*.c')

clean:
	rm -rf build
