# mxfp8_adapter_library(TARGET MAP SOURCES...): a library that translates another framework's calls into
# the C API (bindings/tvm_ffi, bindings/jax). It links libmxfp8, shares bindings/common, exports only what
# the version script MAP lists (every other symbol hidden, so two adapters built against different
# framework headers never bind to each other's inline copies), finds libmxfp8 next to itself, and is
# installed there: in the wheel's mxfp8/ folder (SKBUILD) or the library folder.
function(mxfp8_adapter_library target map)
  add_library(${target} SHARED ${ARGN})
  target_link_libraries(${target} PRIVATE mxfp8::mxfp8)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/bindings/common)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    INSTALL_RPATH "$ORIGIN"
    LINK_DEPENDS ${map})
  target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
  if(NOT MXFP8_SANITIZE)
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  if(SKBUILD)
    install(TARGETS ${target} LIBRARY DESTINATION mxfp8)
  else()
    install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
endfunction()
