# The Debian packages, made by CPack (scripts/package runs it): one .deb per install component.
#   idemwatch-exporter    the exporter, its hardened unit (started on install), /etc/default file
#   idemwatch-admin       the Qt console, its desktop entry and icon
#   idemwatch-proxy       the Idempotency-Key proxy, its hardened unit (enabled by the admin once
#                         routes exist), /etc/default file and an example of routes
#   idemwatch-tools       idemctl, the reconcile / expire-leases timers and the statement
#                         drop folder's path unit (off until enabled)
#   idemwatch-monitoring  rules, dashboards, provisioning, runbooks under /usr/share/idemwatch/
# Shared-library dependencies come from dpkg-shlibdeps, never typed here.
include(${CMAKE_CURRENT_LIST_DIR}/Install.cmake)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME idemwatch)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "idemwatch")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
# A tree configured without the exporter or the admin app packages what it has.
set(CPACK_COMPONENTS_ALL tools monitoring)
if(TARGET idemwatch-admin)
  list(PREPEND CPACK_COMPONENTS_ALL admin)
endif()
if(TARGET idemwatch-proxy)
  list(PREPEND CPACK_COMPONENTS_ALL proxy)
endif()
if(TARGET idemwatch-exporter)
  list(PREPEND CPACK_COMPONENTS_ALL exporter)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${IDEMWATCH_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${IDEMWATCH_HOMEPAGE}")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The maintainer scripts and conffiles keep the modes dpkg expects (0755, 0644).
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# Every file under /etc is a conffile (as dh_installdeb makes it): an edited /etc/default file
# survives an upgrade.
function(idem_conffiles component)
  list(JOIN ARGN "\n" lines)
  file(WRITE ${idem_packaging_out}/${component}/conffiles "${lines}\n")
endfunction()

set(CPACK_DEBIAN_EXPORTER_PACKAGE_NAME idemwatch-exporter)
set(CPACK_DEBIAN_EXPORTER_PACKAGE_SECTION net)
set(CPACK_COMPONENT_EXPORTER_DESCRIPTION
    "Prometheus exporter for the idem idempotency schema
Publishes the idem schema's figures (hit ratio, duplicate fund flows, retry
triggers by source, unsettled records, reconciliation mismatches) for
Prometheus, reading only new rows; /metrics never waits on the database.
The service starts on install as a hardened systemd unit with a dynamic user;
its flags and the database go in /etc/default/idemwatch-exporter.")
idem_conffiles(exporter /etc/default/idemwatch-exporter /etc/idemwatch/web-config.yml.example)
set(CPACK_DEBIAN_EXPORTER_PACKAGE_CONTROL_EXTRA
    ${idem_packaging_out}/exporter/conffiles ${idem_packaging}/exporter/debian/postinst
    ${idem_packaging}/exporter/debian/prerm ${idem_packaging}/exporter/debian/postrm)

set(CPACK_DEBIAN_PROXY_PACKAGE_NAME idemwatch-proxy)
set(CPACK_DEBIAN_PROXY_PACKAGE_SECTION net)
set(CPACK_COMPONENT_PROXY_DESCRIPTION
    "Idempotency-Key reverse proxy for HTTP and MCP tools
Puts the idem protocol in front of any HTTP tool or Streamable HTTP MCP
server without changing it: each request of a configured route is claimed by
its Idempotency-Key (or an MCP tool call by the key in its _meta) before it
goes upstream, a repeat is answered from the record, and a request whose
outcome is unknown is never sent again. A hardened systemd unit, installed
but not enabled until /etc/idemwatch/proxy.yml names the routes.")
set(CPACK_DEBIAN_PROXY_PACKAGE_SUGGESTS "postgresql")
idem_conffiles(proxy /etc/default/idemwatch-proxy /etc/idemwatch/proxy.yml.example)
set(CPACK_DEBIAN_PROXY_PACKAGE_CONTROL_EXTRA
    ${idem_packaging_out}/proxy/conffiles ${idem_packaging}/proxy/debian/postinst
    ${idem_packaging}/proxy/debian/prerm ${idem_packaging}/proxy/debian/postrm)

set(CPACK_DEBIAN_ADMIN_PACKAGE_NAME idemwatch-admin)
set(CPACK_COMPONENT_ADMIN_DESCRIPTION
    "operators' console for stuck idempotency records
A Qt application to browse tens of millions of idem records, work the
needs-attention queue, read each record's timeline, attempts and fund
flows, and settle stuck records with a reason and evidence.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME idemwatch-tools)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
    "command-line tool and timers for the idem idempotency schema
idemctl migrates the idem schema, simulates agent traffic, settles records,
reconciles fund flows, imports gateways' statements and callbacks, and expires
claim leases. Two systemd timers run idemctl reconcile and idemctl
expire-leases, and a path unit imports the statements that land in
/var/lib/idemwatch/statements; they are installed but not enabled.")
idem_conffiles(tools /etc/default/idemwatch-tools /etc/default/idemwatch-statements)
set(CPACK_DEBIAN_TOOLS_PACKAGE_CONTROL_EXTRA
    ${idem_packaging_out}/tools/conffiles ${idem_packaging}/tools/debian/postinst
    ${idem_packaging}/tools/debian/prerm ${idem_packaging}/tools/debian/postrm)

set(CPACK_DEBIAN_MONITORING_PACKAGE_NAME idemwatch-monitoring)
set(CPACK_DEBIAN_MONITORING_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_MONITORING_PACKAGE_SECTION net)
set(CPACK_COMPONENT_MONITORING_DESCRIPTION
    "Prometheus rules and Grafana dashboards for idemwatch
Recording rules and alerts for the idemwatch exporter's figures, an example
Prometheus configuration, three Grafana dashboards with provisioning files, and
the runbooks the alerts link to, under /usr/share/idemwatch/.")
set(CPACK_DEBIAN_MONITORING_PACKAGE_SUGGESTS "prometheus, grafana")

include(CPack)

# What the packages hold and must be built before CPack runs (scripts/package builds this target,
# not the tests and benchmarks, and configures with CMAKE_SKIP_INSTALL_ALL_DEPENDENCY).
add_custom_target(idemwatch-package-contents)
add_dependencies(idemwatch-package-contents idemwatch-manpages idemctl)
foreach(target idemwatch-exporter idemwatch-admin idemwatch-proxy)
  if(TARGET ${target})
    add_dependencies(idemwatch-package-contents ${target})
  endif()
endforeach()
