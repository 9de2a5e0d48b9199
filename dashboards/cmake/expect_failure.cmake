# Runs PROGRAM with ARGS (separated by |) and passes only if it exits non-zero and its output (stdout and
# stderr) matches the regular expression EXPECT. ctest's PASS_REGULAR_EXPRESSION alone would
# ignore the exit code.
string(REPLACE "|" ";" ARGS "${ARGS}")  # the caller separates the arguments with |
execute_process(COMMAND ${PROGRAM} ${ARGS}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(result EQUAL 0)
  message(FATAL_ERROR "expected a failure, but the command succeeded")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match: ${EXPECT}")
endif()
