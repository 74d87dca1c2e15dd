# Regenerates the bad-input table and fails when docs/errors.md differs from it.
# Usage: cmake -DTEST=<test_bad_input> -DGENERATED=<out.md> -DCOMMITTED=<docs/errors.md> -P check_errors_doc.cmake
execute_process(COMMAND ${CMAKE_COMMAND} -E env MXFP8_ERRORS_MD=${GENERATED} ${TEST} OUTPUT_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TEST} failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${GENERATED} ${COMMITTED} RESULT_VARIABLE differ)
if(differ)
  message(FATAL_ERROR "docs/errors.md is out of date: copy ${GENERATED} over it")
endif()
