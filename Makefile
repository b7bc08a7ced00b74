# umemcg quick start:
#   make bench   install what is missing, build `release`, run the main job
#                (for now the charge, object and statistics benchmarks)
#   make test    install what is missing, build and run every test suite in
#                the release, asan (ASan+UBSan) and tsan presets, then each
#                fuzzer (fuzz preset, clang) for FUZZ_SECONDS (default 60)
#
# Debian packages are installed with apt-get only when missing.

DEB_PACKAGES := cmake ninja-build g++ make clang libclang-rt-14-dev libgtest-dev libgmock-dev \
                libbenchmark-dev nlohmann-json3-dev python3 sqlite3
# Operator interfaces: FUSE mount, metrics server (+ curl for its tests), CLI.
DEB_PACKAGES += pkg-config fuse3 libfuse3-dev libcpp-httplib-dev libcli11-dev curl
TEST_PRESETS := release asan tsan fuzz
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build test bench format clean $(addprefix build-,$(TEST_PRESETS) debug)

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

build-%: deps
	cmake --preset $* >/dev/null
	cmake --build --preset $*

build: build-release

test: deps
	@bash scripts/run_tests.sh $(TEST_PRESETS)

# Until umemcg-bench lands: the micro-benchmark programs, each ending in a
# ratio report (JSON copies under build/release/).
BENCHMARKS := charge_benchmark obj_benchmark stats_benchmark

bench: build-release
	@set -e; for b in $(BENCHMARKS); do \
	  echo "==== $$b"; ./build/release/bin/$$b --json=build/release/$$b.json; \
	done

format:
	clang-format -i $$(git ls-files '*.h' '*.cc' '*.c')

clean:
	rm -rf build
