# Finds the DLPack header (>= 1.1, for the float8 type codes) without ever vendoring it.
# Looks, in order, at:
#   1. -DDLPACK_INCLUDE_DIR=<folder holding dlpack/dlpack.h>
#   2. an installed dlpack CMake package (find_package(dlpack CONFIG))
#   3. the apache-tvm-ffi Python package: python -m tvm_ffi.config --dlpack-includedir
#   4. the usual system include folders
# Defines the INTERFACE target dlpack::dlpack and dlpack_VERSION.
set(_dlpack_min_version 1.1)

if(NOT DLPACK_INCLUDE_DIR)
  find_package(dlpack CONFIG QUIET)
  if(TARGET dlpack::dlpack)
    get_target_property(_dlpack_dirs dlpack::dlpack INTERFACE_INCLUDE_DIRECTORIES)
    find_path(DLPACK_INCLUDE_DIR dlpack/dlpack.h PATHS ${_dlpack_dirs} NO_DEFAULT_PATH)
  endif()
endif()
if(NOT DLPACK_INCLUDE_DIR)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -m tvm_ffi.config --dlpack-includedir
      OUTPUT_VARIABLE _dlpack_tvm_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _dlpack_tvm_rc)
    if(_dlpack_tvm_rc EQUAL 0 AND EXISTS "${_dlpack_tvm_dir}/dlpack/dlpack.h")
      set(DLPACK_INCLUDE_DIR "${_dlpack_tvm_dir}" CACHE PATH "Folder holding dlpack/dlpack.h")
    endif()
  endif()
endif()
find_path(DLPACK_INCLUDE_DIR dlpack/dlpack.h)

if(DLPACK_INCLUDE_DIR AND EXISTS "${DLPACK_INCLUDE_DIR}/dlpack/dlpack.h")
  file(STRINGS "${DLPACK_INCLUDE_DIR}/dlpack/dlpack.h" _dlpack_lines REGEX "^#define DLPACK_(MAJOR|MINOR)_VERSION ")
  foreach(_line IN LISTS _dlpack_lines)
    string(REGEX MATCH "DLPACK_([A-Z]+)_VERSION ([0-9]+)" _ "${_line}")
    set(_dlpack_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
  endforeach()
  set(dlpack_VERSION "${_dlpack_MAJOR}.${_dlpack_MINOR}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(dlpack
  REQUIRED_VARS DLPACK_INCLUDE_DIR
  VERSION_VAR dlpack_VERSION
  REASON_FAILURE_MESSAGE "install dlpack >= ${_dlpack_min_version} (e.g. `pip install apache-tvm-ffi`) or pass -DDLPACK_INCLUDE_DIR=<folder with dlpack/dlpack.h>")
if(dlpack_FOUND AND dlpack_VERSION VERSION_LESS _dlpack_min_version)
  message(FATAL_ERROR "dlpack ${dlpack_VERSION} at ${DLPACK_INCLUDE_DIR} is older than ${_dlpack_min_version}, which mxfp8 needs for the float8 type codes")
endif()
if(dlpack_FOUND AND NOT TARGET dlpack::dlpack)
  add_library(dlpack::dlpack INTERFACE IMPORTED)
  set_target_properties(dlpack::dlpack PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${DLPACK_INCLUDE_DIR}")
endif()
