# Parses every dashboard query with promtool, offline: the queries (variables filled in by
# idemwatch-dashboard-lint --print-exprs) become recording rules of a throwaway rule file, which
# `promtool check rules` parses as PromQL.
# -DLINT=… -DPROMTOOL=… -DWORK_DIR=… -DDASHBOARDS=a.json|b.json
string(REPLACE "|" ";" DASHBOARDS "${DASHBOARDS}")
execute_process(
  COMMAND ${LINT} --print-exprs --set job=idemwatch --set instance=localhost:9477
          --set __rate_interval=1m ${DASHBOARDS}
  RESULT_VARIABLE result OUTPUT_VARIABLE exprs ERROR_VARIABLE err)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "--print-exprs failed: ${err}")
endif()
string(REPLACE ";" "\\;" exprs "${exprs}")
string(REPLACE "\n" ";" exprs "${exprs}")
set(rules "groups:\n  - name: dashboard-queries\n    rules:\n")
set(n 0)
foreach(expr IN LISTS exprs)
  if(expr STREQUAL "")
    continue()
  endif()
  math(EXPR n "${n} + 1")
  string(APPEND rules "      - record: dashboard:query_${n}\n        expr: |\n          ${expr}\n")
endforeach()
if(n EQUAL 0)
  message(FATAL_ERROR "no dashboard query found")
endif()
file(WRITE ${WORK_DIR}/dashboard_queries.rules.yml "${rules}")
execute_process(COMMAND ${PROMTOOL} check rules ${WORK_DIR}/dashboard_queries.rules.yml
                RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "promtool cannot parse a dashboard query: see ${WORK_DIR}/dashboard_queries.rules.yml")
endif()
message("${n} dashboard queries parse")
