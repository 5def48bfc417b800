# FlareInstall.cmake: what `cmake --install <build> [--prefix P]` puts where,
# included by the top-level CMakeLists.txt once its targets exist.
#
#   bin/flare, bin/flare-demo                  (component Runtime)
#   <libdir>/libflare.so.0.1.0, libflare.so.0  (Runtime; SONAME libflare.so.0)
#   <libdir>/libflare.so                       (Development: the link-time name)
#   include/flare/*.h                          (Development: every header there is public)
#   <libdir>/pkgconfig/flare.pc                (Development)
#   <libdir>/cmake/flare/flare*.cmake          (Development: find_package(flare), flare::flare)
#
# <libdir> is GNUInstallDirs' CMAKE_INSTALL_LIBDIR (lib; lib64 or
# lib/<multiarch> on some systems). The installed tree is relocatable: the
# prefix may change at install time (--prefix) or by moving the tree, since
# nothing installed records it (flare-demo's RUNPATH is $ORIGIN-relative,
# flare.pc is ${pcfiledir}-relative, the CMake files find their own prefix).
# It must never install the static flare_internal library, the tests or the
# benchmarks. The Python module is not installed here: `pip install ./python`
# installs it (docs/api.md).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The same name inside this build, for projects that add flare with add_subdirectory.
add_library(flare::flare ALIAS flare)

set(FLARE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/flare)
file(RELATIVE_PATH flare_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
if(flare_bin_to_lib STREQUAL "")
  set(flare_bin_to_lib .)
endif()

# The flare command injects libflare into the programs it runs and looks for
# it beside itself: ../lib/libflare.so (the build tree), then this path
# (src/cli/launch.c). The installed flare-demo finds it through its RUNPATH.
target_compile_definitions(flare_cli PRIVATE
  "FLARE_INSTALLED_LIBRARY=\"${flare_bin_to_lib}/$<TARGET_SONAME_FILE_NAME:flare>\"")
set_target_properties(flare-demo PROPERTIES INSTALL_RPATH "$ORIGIN/${flare_bin_to_lib}")

install(TARGETS flare EXPORT flareTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime NAMELINK_COMPONENT Development
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS flare_cli flare-demo RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/flare DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT Development FILES_MATCHING PATTERN "*.h")

# flare.pc, relative to its own directory unless a directory was given as
# an absolute path.
file(RELATIVE_PATH FLARE_PC_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" FLARE_PC_PREFIX "${FLARE_PC_PREFIX}")
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(FLARE_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(FLARE_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/flare.pc.in ${PROJECT_BINARY_DIR}/cmake/flare.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cmake/flare.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT Development)

install(EXPORT flareTargets NAMESPACE flare:: DESTINATION ${FLARE_INSTALL_CMAKEDIR}
  COMPONENT Development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/flareConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/flareConfig.cmake INSTALL_DESTINATION ${FLARE_INSTALL_CMAKEDIR})
# Same major version, as the SONAME says.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/flareConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/flareConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/flareConfigVersion.cmake
  DESTINATION ${FLARE_INSTALL_CMAKEDIR} COMPONENT Development)
