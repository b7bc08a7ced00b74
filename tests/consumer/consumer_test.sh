#!/usr/bin/env bash
# Builds and runs tiny projects from outside the tree against umemcg, as
# its users do (ctest: consumer_test):
#   1. installs the build tree into a scratch prefix (cmake --install);
#   2. find_package: a C++ program with find_package(umemcg 0.2 CONFIG
#      REQUIRED COMPONENTS metrics [fuse] [cluster]), linked shared and
#      static; an incompatible version request (0.3) must be refused;
#   3. pkg-config: a C program compiled with a plain compiler line from
#      `pkg-config --cflags --libs umemcg`; the components' modules exist;
#   4. subproject: FetchContent from the source directory; the parent's
#      default build makes only the libraries it links (the library compiles
#      again: ccache is used when installed); its install step must install
#      nothing of umemcg.
#
# usage: consumer_test.sh BUILD_DIR SOURCE_DIR C_COMPILER CXX_COMPILER
#                         WITH_FUSE(ON|OFF) WITH_CLUSTER(ON|OFF)
#                         WITH_JEMALLOC(ON|OFF) WITH_PROFILE(ON|OFF)
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) cc=$3 cxx=$4 with_fuse=$5
with_cluster=${6:-OFF}
with_jemalloc=${7:-OFF}
with_profile=${8:-OFF}
# Scratch space in the build tree, at the same path each run so that
# ccache recognises the subproject's compiles; removed when all passed
# (kept for a look otherwise).
work=${build}/consumer-test
rm -rf "${work}"
mkdir -p "${work}"
prefix=${work}/prefix

step() { echo "=== consumer_test (${SECONDS} s): $*"; }
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="${cc}"
        -DCMAKE_CXX_COMPILER="${cxx}" "${launcher[@]}")

step "install into ${prefix}"
cmake --install "${build}" --prefix "${prefix}" >"${work}/install.log"
pcdir=$(dirname "$(find "${prefix}" -name umemcg.pc | head -n 1)")
libdir=$(dirname "${pcdir}")
for f in "${libdir}"/libumemcg.so "${libdir}"/libumemcg.a \
         "${prefix}"/include/umemcg/umemcg.h "${libdir}"/cmake/umemcg/umemcgConfig.cmake; do
  [ -e "${f}" ] || { echo "not installed: ${f}"; exit 1; }
done
soname=$(readelf -d "${libdir}/libumemcg.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
echo "libumemcg.so SONAME ${soname}"
[ "${soname}" = "libumemcg.so.0.2" ] || { echo "unexpected SONAME"; exit 1; }

step "find_package (C++, components metrics$([ "${with_fuse}" = ON ] && echo ' fuse')$([ "${with_cluster}" = ON ] && echo ' cluster')$([ "${with_jemalloc}" = ON ] && echo ' jemalloc')$([ "${with_profile}" = ON ] && echo ' profile'))"
cmake -S "${src}/tests/consumer/find_package" -B "${work}/fp" "${common[@]}" \
      -DCMAKE_PREFIX_PATH="${prefix}" -DWITH_FUSE="${with_fuse}" \
      -DWITH_CLUSTER="${with_cluster}" -DWITH_JEMALLOC="${with_jemalloc}" \
      -DWITH_PROFILE="${with_profile}" >"${work}/fp.log" \
  || { cat "${work}/fp.log"; exit 1; }
grep "found umemcg" "${work}/fp.log"
cmake --build "${work}/fp" >"${work}/fp-build.log" || { cat "${work}/fp-build.log"; exit 1; }
"${work}/fp/consumer_shared"
"${work}/fp/consumer_static"
if [ "${with_jemalloc}" = ON ]; then
  "${work}/fp/consumer_jemalloc_shared"
  "${work}/fp/consumer_jemalloc_static"
  PKG_CONFIG_PATH="${pcdir}" pkg-config --exists "umemcg-jemalloc = 0.2.0"
fi
if [ "${with_profile}" = ON ]; then
  "${work}/fp/consumer_profile_shared"
  "${work}/fp/consumer_profile_static"
  readelf -d "${work}/fp/consumer_profile_shared" | grep -q "NEEDED.*libumemcg-profile.so.0.2" \
    || { echo "consumer_profile_shared does not use libumemcg-profile.so.0.2"; exit 1; }
  [ -e "${prefix}/include/umemcg/heap_profile_pprof.h" ] \
    || { echo "not installed: heap_profile_pprof.h"; exit 1; }
  # A plain compiler line from pkg-config, shared.
  pflags=$(PKG_CONFIG_PATH="${pcdir}" pkg-config --cflags --libs "umemcg-profile = 0.2.0")
  echo "pkg-config --cflags --libs umemcg-profile: ${pflags}"
  # shellcheck disable=SC2086
  "${cxx}" -std=c++20 -Wall -Wextra -Werror \
    "${src}/tests/consumer/find_package/profile.cc" ${pflags} -o "${work}/consumer_profile_pc"
  LD_LIBRARY_PATH="${libdir}" "${work}/consumer_profile_pc"
  PKG_CONFIG_PATH="${pcdir}" pkg-config --static --libs umemcg-profile | grep -q -- -lprotobuf \
    || { echo "umemcg-profile.pc does not name protobuf"; exit 1; }
fi
readelf -d "${work}/fp/consumer_shared" | grep -q "NEEDED.*libumemcg.so.0.2" \
  || { echo "consumer_shared does not use libumemcg.so.0.2"; exit 1; }
if readelf -d "${work}/fp/consumer_static" | grep -q "NEEDED.*libumemcg"; then
  echo "consumer_static needs a shared umemcg library"; exit 1
fi
if cmake -S "${src}/tests/consumer/find_package" -B "${work}/fp-0.3" "${common[@]}" \
     -DCMAKE_PREFIX_PATH="${prefix}" -DUMEMCG_VERSION_WANTED=0.3 >"${work}/fp-0.3.log" 2>&1; then
  echo "find_package(umemcg 0.3) accepted version 0.2"; exit 1
fi
echo "find_package(umemcg 0.3): refused, as it must be"

step "pkg-config (C, plain compiler line)"
flags=$(PKG_CONFIG_PATH="${pcdir}" pkg-config --cflags --libs umemcg)
echo "pkg-config --cflags --libs umemcg: ${flags}"
# shellcheck disable=SC2086
"${cc}" -std=c99 -Wall -Wextra -Werror -pedantic \
  "${src}/tests/consumer/pkg_config/main.c" ${flags} -o "${work}/consumer_c"
LD_LIBRARY_PATH="${libdir}" "${work}/consumer_c"
PKG_CONFIG_PATH="${pcdir}" pkg-config --exists "umemcg >= 0.2" "umemcg-metrics = 0.2.0"
if [ "${with_cluster}" = ON ]; then
  PKG_CONFIG_PATH="${pcdir}" pkg-config --exists "umemcg-cluster = 0.2.0"
  PKG_CONFIG_PATH="${pcdir}" pkg-config --static --libs umemcg-cluster | grep -q -- -lhiredis \
    || { echo "umemcg-cluster.pc does not name hiredis"; exit 1; }
fi

step "subproject (FetchContent, SOURCE_DIR ${src})"
cmake -S "${src}/tests/consumer/subproject" -B "${work}/sub" "${common[@]}" \
      -DUMEMCG_SOURCE_DIR="${src}" -DCMAKE_INSTALL_PREFIX="${work}/sub-prefix" \
      >"${work}/sub.log" || { cat "${work}/sub.log"; exit 1; }
cmake --build "${work}/sub" >"${work}/sub-build.log" \
  || { cat "${work}/sub-build.log"; exit 1; }
grep -c "Building" "${work}/sub-build.log" | sed 's/^/compiled files: /'
# The parent's default build made only what it links: no preload, no fuse
# component, no static library.
for lib in libumemcg-preload.so libumemcg-fuse.so libumemcg.a; do
  if find "${work}/sub" -name "${lib}" | grep -q .; then
    echo "the subproject's build made ${lib}, which it does not link"; exit 1
  fi
done
"${work}/sub/consumer_subproject"
cmake --install "${work}/sub" >"${work}/sub-install.log"
installed=$(cd "${work}/sub-prefix" && find . -type f -o -type l | sort)
echo "subproject install: ${installed}"
[ "${installed}" = "./bin/consumer_subproject" ] \
  || { echo "the subproject's install step installed more than its program"; exit 1; }
step "all consumers ok"
rm -rf "${work}"
