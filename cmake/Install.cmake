# Where each file goes when installed, one install component per Debian package (see
# cmake/Packaging.cmake): exporter, admin, proxy, tools, monitoring. The programs' own install(TARGETS)
# rules sit beside their targets (exporter/, gui/, tools/idemctl/); this file adds everything else:
# systemd units, /etc/default files, the desktop entry and icon, the man pages, the monitoring
# files, and each package's copyright, changelog and lintian overrides.
#
# Units go to /usr/lib/systemd/system (found by systemd on every Debian since /usr was merged);
# configuration to /etc, absolute, as Debian's exporter packages have it.
include(GNUInstallDirs)

set(IDEMWATCH_PACKAGE_MAINTAINER "idemwatch maintainers <maintainers@idemwatch.example>"
    CACHE STRING "Maintainer field of the .debs and their changelog")
set(IDEMWATCH_HOMEPAGE "https://idemwatch.example/" CACHE STRING "Homepage field of the .debs")

set(idem_packaging ${PROJECT_SOURCE_DIR}/packaging)
set(idem_packaging_out ${PROJECT_BINARY_DIR}/packaging)
set(idem_units lib/systemd/system)
set(idem_share ${CMAKE_INSTALL_DATADIR}/idemwatch)
file(MAKE_DIRECTORY ${idem_packaging_out})

# --- man pages: help2man from each program's live --help, at build time (target idemwatch-manpages;
# scripts/package builds it; tests/packaging checks every flag of --help is in the page).
find_program(IDEMWATCH_HELP2MAN help2man)
set(idem_manpages)
foreach(entry "idemwatch-exporter|Prometheus exporter for the idem idempotency schema"
              "idemctl|migrate, simulate, settle, reconcile and maintain the idem schema"
              "idemwatch-admin|operators' console for stuck idempotency records"
              "idemwatch-proxy|Idempotency-Key reverse proxy for HTTP and MCP tools")
  string(REPLACE "|" ";" entry "${entry}")
  list(GET entry 0 program)
  list(GET entry 1 summary)
  if(NOT TARGET ${program})
    continue()
  endif()
  set(page ${idem_packaging_out}/man/${program}.1.gz)
  add_custom_command(OUTPUT ${page}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${idem_packaging_out}/man
    COMMAND ${idem_packaging}/man/make-manpage $<TARGET_FILE:${program}> ${program} "${summary}" ${page}
    DEPENDS ${program} ${idem_packaging}/man/make-manpage ${idem_packaging}/man/help_text.sh
            ${idem_packaging}/man/${program}.h2m
    COMMENT "help2man: ${program}.1"
    VERBATIM)
  list(APPEND idem_manpages ${page})
endforeach()
add_custom_target(idemwatch-manpages DEPENDS ${idem_manpages})

# --- per package: copyright, changelog.gz (Debian's format; the version is the project's),
# lintian overrides, and the man page of its program. OPTIONAL: a plain `cmake --install` of a
# tree where idemwatch-manpages was not built still works (the packaging tests fail instead).
string(TIMESTAMP IDEMWATCH_PACKAGE_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
configure_file(${idem_packaging}/debian/changelog.in ${idem_packaging_out}/changelog @ONLY)
configure_file(${idem_packaging}/debian/copyright ${idem_packaging_out}/copyright @ONLY)
execute_process(COMMAND gzip -9n -c ${idem_packaging_out}/changelog
                OUTPUT_FILE ${idem_packaging_out}/changelog.gz COMMAND_ERROR_IS_FATAL ANY)

# idem_package_docs(COMPONENT PACKAGE [PROGRAM]): the files lintian expects in every package.
function(idem_package_docs component package)
  set(doc ${CMAKE_INSTALL_DATADIR}/doc/${package})
  install(FILES ${idem_packaging_out}/copyright ${idem_packaging_out}/changelog.gz
          DESTINATION ${doc} COMPONENT ${component})
  if(EXISTS ${idem_packaging}/lintian/${package})
    install(FILES ${idem_packaging}/lintian/${package}
            DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides COMPONENT ${component})
  endif()
  foreach(program IN LISTS ARGN)
    install(FILES ${idem_packaging_out}/man/${program}.1.gz OPTIONAL
            DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT ${component})
  endforeach()
endfunction()

# idem_service(COMPONENT EXAMPLE [DOC...]): a daemon's package, packaging/COMPONENT/ holding
# idemwatch-COMPONENT.service, its /etc/default file, EXAMPLE (to /etc/idemwatch) and README.Debian;
# DOC: more files for its /usr/share/doc folder. The program and its man page come too.
function(idem_service component example)
  set(package idemwatch-${component})
  set(dir ${idem_packaging}/${component})
  install(FILES ${dir}/${package}.service DESTINATION ${idem_units} COMPONENT ${component})
  # Root's alone: it may hold a password (systemd reads it before the service starts).
  install(FILES ${dir}/${package}.default DESTINATION /etc/default RENAME ${package}
          PERMISSIONS OWNER_READ OWNER_WRITE COMPONENT ${component})
  install(FILES ${dir}/${example} DESTINATION /etc/idemwatch COMPONENT ${component})
  install(FILES ${dir}/README.Debian ${ARGN}
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package} COMPONENT ${component})
  idem_package_docs(${component} ${package} ${package})
endfunction()

# --- idemwatch-exporter: started on install
if(TARGET idemwatch-exporter)
  idem_service(exporter web-config.yml.example)
endif()

# --- idemwatch-proxy: its unit installed but not enabled (it needs routes first)
if(TARGET idemwatch-proxy)
  idem_service(proxy proxy.yml.example ${PROJECT_SOURCE_DIR}/proxy/README.md)
endif()

# --- idemwatch-admin
if(TARGET idemwatch-admin)
  install(FILES ${idem_packaging}/admin/idemwatch-admin.desktop
          DESTINATION ${CMAKE_INSTALL_DATADIR}/applications COMPONENT admin)
  install(FILES ${idem_packaging}/admin/idemwatch-admin.svg
          DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps COMPONENT admin)
  idem_package_docs(admin idemwatch-admin idemwatch-admin)
endif()

# --- idemwatch-tools: idemctl and two timers, installed but not enabled
install(FILES ${idem_packaging}/tools/idemwatch-reconcile.service
              ${idem_packaging}/tools/idemwatch-reconcile.timer
              ${idem_packaging}/tools/idemwatch-expire-leases.service
              ${idem_packaging}/tools/idemwatch-expire-leases.timer
              ${idem_packaging}/tools/idemwatch-import-statements.service
              ${idem_packaging}/tools/idemwatch-import-statements.path
        DESTINATION ${idem_units} COMPONENT tools)
install(FILES ${idem_packaging}/tools/idemwatch-tools.default
        DESTINATION /etc/default RENAME idemwatch-tools
        PERMISSIONS OWNER_READ OWNER_WRITE COMPONENT tools)
install(FILES ${idem_packaging}/tools/idemwatch-statements.default
        DESTINATION /etc/default RENAME idemwatch-statements
        PERMISSIONS OWNER_READ OWNER_WRITE COMPONENT tools)
# The gateway's drop folder: its files land here (as NAME.partial, renamed when complete).
install(DIRECTORY DESTINATION /var/lib/idemwatch/statements COMPONENT tools
        DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                              WORLD_READ WORLD_EXECUTE)
idem_package_docs(tools idemwatch-tools idemctl)

# --- idemwatch-monitoring: the dashboards/ folder's rules, Prometheus example, Grafana dashboards
# and provisioning, and runbooks, under /usr/share/idemwatch/ in the same layout (so that the
# example prometheus.yml's ../rules paths hold). The dashboard provider is pointed at the
# installed dashboards instead of the path a checkout's copy suggests.
set(idem_dashboards ${PROJECT_SOURCE_DIR}/dashboards)
file(GLOB idem_rule_files ${idem_dashboards}/rules/*.yml)
file(GLOB idem_dashboard_files ${idem_dashboards}/grafana/dashboards/*.json)
install(FILES ${idem_rule_files} DESTINATION ${idem_share}/rules COMPONENT monitoring)
install(FILES ${idem_dashboards}/prometheus/prometheus.yml
        DESTINATION ${idem_share}/prometheus COMPONENT monitoring)
install(FILES ${idem_dashboard_files} DESTINATION ${idem_share}/grafana/dashboards COMPONENT monitoring)
install(FILES ${idem_dashboards}/grafana/provisioning/datasources/idemwatch.yml
        DESTINATION ${idem_share}/grafana/provisioning/datasources COMPONENT monitoring)
file(READ ${idem_dashboards}/grafana/provisioning/dashboards/idemwatch.yml idem_provider)
string(REPLACE "path: /var/lib/grafana/dashboards/idemwatch"
               "path: /usr/share/idemwatch/grafana/dashboards" idem_installed_provider "${idem_provider}")
if(idem_installed_provider STREQUAL idem_provider)
  message(FATAL_ERROR "dashboards/grafana/provisioning/dashboards/idemwatch.yml: its path changed; "
                      "update the replacement in cmake/Install.cmake")
endif()
file(WRITE ${idem_packaging_out}/grafana-dashboards.yml "${idem_installed_provider}")
install(FILES ${idem_packaging_out}/grafana-dashboards.yml RENAME idemwatch.yml
        DESTINATION ${idem_share}/grafana/provisioning/dashboards COMPONENT monitoring)
install(FILES ${idem_dashboards}/runbooks.md DESTINATION ${idem_share} COMPONENT monitoring)
idem_package_docs(monitoring idemwatch-monitoring)
