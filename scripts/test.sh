#!/usr/bin/env bash
# The test suite: installs the real MCP servers the tests talk to (npm, PyPI — into .ci/),
# builds the demo MCP server, then runs every test of the workspace with a private PostgreSQL
# server for the session-store tests (scripts/with-postgres.sh; installs Debian's postgresql
# when missing). Needs: cargo, node >= 20 with npm, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-mcp-servers.sh
cargo build --locked -p mcp-demo-server
scripts/with-postgres.sh cargo test --workspace --locked "$@"
