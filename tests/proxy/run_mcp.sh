#!/usr/bin/env bash
# idemwatch-proxy in front of a real Streamable HTTP MCP server: a private PostgreSQL, migrated,
# then tests/proxy/mcp/mcp_test.mjs with the official MCP TypeScript SDK (server and client),
# installed by npm ci into WORK_DIR (the build tree), never into the checkout.
#   run_mcp.sh PROXY IDEMCTL WORK_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../scripts/lib/pg.sh
source "$here/../../scripts/lib/pg.sh"
# shellcheck source=../../scripts/lib/node.sh
source "$here/../../scripts/lib/node.sh"
proxy=${1:?usage: run_mcp.sh PROXY IDEMCTL WORK_DIR}
idemctl=${2:?usage: run_mcp.sh PROXY IDEMCTL WORK_DIR}
work=${3:?usage: run_mcp.sh PROXY IDEMCTL WORK_DIR}
mkdir -p "$work/mcp"
cp "$here/mcp/package.json" "$here/mcp/package-lock.json" "$here/mcp/mcp_test.mjs" "$work/mcp/"
node_install "$work/mcp"
pg_scratch proxy_mcp
dsn=$(pg_migrated_database proxy_mcp "$idemctl")
node "$work/mcp/mcp_test.mjs" --proxy "$proxy" --dsn "$dsn" --psql "$PG_BIN/psql"
