# Install rules: `cmake --install build/release [--prefix DIR]` (or
# `make install PREFIX=DIR`). Included from the top-level CMakeLists.txt
# when UMEMCG_INSTALL is on (the default when umemcg is the top-level
# project). What goes where (GNUInstallDirs):
#
#   include/umemcg/           the public headers
#   lib/libumemcg.so.0.2.0    libumemcg.so.0.2 (SONAME), libumemcg.so, .a
#   lib/libumemcg-metrics.*   component "metrics" (shared and static)
#   lib/libumemcg-fuse.*      component "fuse" (shared and static; when
#                             libfuse3 was found)
#   lib/libumemcg-cluster.*   component "cluster" (shared and static; when
#                             hiredis was found)
#   lib/libumemcg-jemalloc.* component "jemalloc" (shared and static; when
#                             libjemalloc-dev was found)
#   lib/libumemcg-profile.*   component "profile" (shared and static: heap
#                             profiles as pprof; when protobuf was found)
#   lib/libumemcg-preload.so  the LD_PRELOAD interposer (unsanitized builds)
#   lib/cmake/umemcg/         the CMake package (find_package(umemcg))
#   lib/pkgconfig/            umemcg.pc, umemcg-metrics.pc, umemcg-fuse.pc,
#                             umemcg-cluster.pc, umemcg-jemalloc.pc,
#                             umemcg-profile.pc
#   bin/                      umemcg, umemcg-bench (when built)
#   share/man/man1/           umemcg.1, umemcg-bench.1
#   share/doc/umemcg/         README.md and docs/

include(CMakePackageConfigHelpers)

set(UMEMCG_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/umemcg)
set(UMEMCG_INSTALL_PKGCONFIGDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---- Headers. A component's header only with its component.
set(_umemcg_header_excludes)
if(NOT TARGET umemcg_fuse)
  list(APPEND _umemcg_header_excludes PATTERN "fuse.h" EXCLUDE)
endif()
if(NOT TARGET umemcg_cluster)
  list(APPEND _umemcg_header_excludes PATTERN "cluster.h" EXCLUDE)
endif()
if(NOT TARGET umemcg_jemalloc)
  list(APPEND _umemcg_header_excludes PATTERN "jemalloc.h" EXCLUDE)
endif()
if(NOT TARGET umemcg_profile)
  list(APPEND _umemcg_header_excludes PATTERN "heap_profile_pprof.h" EXCLUDE)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/umemcg
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.def"
        ${_umemcg_header_excludes})

# ---- Libraries and their export sets: the core (with the preload, which
# programs do not link but may name: umemcg::preload), then one per
# component so that a component's dependencies are looked for only when it
# is asked for.
set(_umemcg_core umemcg_shared umemcg)
if(TARGET umemcg_preload)
  list(APPEND _umemcg_core umemcg_preload)
endif()
install(TARGETS ${_umemcg_core} EXPORT umemcg-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT umemcg-targets NAMESPACE umemcg::
        DESTINATION ${UMEMCG_INSTALL_CMAKEDIR})

# The preload's operations module (mount, metrics), opened with dlopen by
# the preload when UMEMCG_MOUNT or UMEMCG_METRICS is set; installed beside
# it, never linked by programs.
if(TARGET umemcg_preload_ops)
  install(TARGETS umemcg_preload_ops
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

set(UMEMCG_COMPONENTS)
foreach(_component metrics fuse cluster jemalloc profile)
  if(TARGET umemcg_${_component})
    list(APPEND UMEMCG_COMPONENTS ${_component})
    install(TARGETS umemcg_${_component}_shared umemcg_${_component}
            EXPORT umemcg-${_component}-targets
            LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
    install(EXPORT umemcg-${_component}-targets NAMESPACE umemcg::
            DESTINATION ${UMEMCG_INSTALL_CMAKEDIR})
  endif()
endforeach()

# ---- The CMake package. The version file accepts requests for the same
# MAJOR.MINOR (the SONAME's promise): find_package(umemcg 0.2) finds 0.2.x.
# The config needs to know which pkg-config modules the static component
# libraries were linked with.
set(UMEMCG_METRICS_PKG "")
if(HTTPLIB_FOUND)
  set(UMEMCG_METRICS_PKG "cpp-httplib")
endif()
set(UMEMCG_FUSE_PKG "fuse3")
set(UMEMCG_CLUSTER_PKG "hiredis")
set(UMEMCG_JEMALLOC_PKG "jemalloc")
set(UMEMCG_PROFILE_PKG "protobuf")
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/umemcgConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/umemcgConfig.cmake
  INSTALL_DESTINATION ${UMEMCG_INSTALL_CMAKEDIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/umemcgConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/umemcgConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/umemcgConfigVersion.cmake
        DESTINATION ${UMEMCG_INSTALL_CMAKEDIR})

# ---- pkg-config. The files locate the prefix from their own directory
# (${pcfiledir}), so `cmake --install --prefix` anywhere gives working
# files.
file(RELATIVE_PATH UMEMCG_PC_TO_PREFIX
     /umemcg-prefix/${UMEMCG_INSTALL_PKGCONFIGDIR} /umemcg-prefix)
string(REGEX REPLACE "/$" "" UMEMCG_PC_TO_PREFIX "${UMEMCG_PC_TO_PREFIX}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(UMEMCG_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(UMEMCG_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(UMEMCG_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(UMEMCG_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(_umemcg_pc_files umemcg)
foreach(_component IN LISTS UMEMCG_COMPONENTS)
  list(APPEND _umemcg_pc_files umemcg-${_component})
endforeach()
foreach(_pc IN LISTS _umemcg_pc_files)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${_pc}.pc.in
                 ${PROJECT_BINARY_DIR}/pkgconfig/${_pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${_pc}.pc
          DESTINATION ${UMEMCG_INSTALL_PKGCONFIGDIR})
endforeach()

# ---- Programs and their manual pages.
if(TARGET umemcg_tool)
  install(TARGETS umemcg_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/docs/man/umemcg.1
          DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()
if(TARGET umemcg-bench)
  install(TARGETS umemcg-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/docs/man/umemcg-bench.1
          DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()

# ---- Documentation.
install(FILES ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/
        DESTINATION ${CMAKE_INSTALL_DOCDIR}
        FILES_MATCHING PATTERN "*.md" PATTERN "man" EXCLUDE)
