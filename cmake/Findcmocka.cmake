# Finds cmocka (Debian: libcmocka-dev). Defines the target cmocka::cmocka.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_CMOCKA QUIET cmocka)
endif()
find_path(CMOCKA_INCLUDE_DIR cmocka.h HINTS ${PC_CMOCKA_INCLUDE_DIRS})
find_library(CMOCKA_LIBRARY cmocka HINTS ${PC_CMOCKA_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(cmocka REQUIRED_VARS CMOCKA_LIBRARY CMOCKA_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "install cmocka (Debian: apt-get install libcmocka-dev)")
if(cmocka_FOUND AND NOT TARGET cmocka::cmocka)
  add_library(cmocka::cmocka UNKNOWN IMPORTED)
  set_target_properties(cmocka::cmocka PROPERTIES IMPORTED_LOCATION "${CMOCKA_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CMOCKA_INCLUDE_DIR}")
endif()
