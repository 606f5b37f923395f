#!/usr/bin/env bash
# Install the real MCP servers that tests/mcp_servers.rs and tests/mcp_conformance.rs run
# (located by tests/mcp_support/mod.rs: .ci/npm/node_modules and .ci/venv, or the env vars
# AGCORE_TEST_NODE_MODULES / AGCORE_TEST_VENV). With CI set, a missing server fails its test.
set -euo pipefail
cd "$(dirname "$0")"
npm install --no-audit --no-fund --prefix npm \
  @modelcontextprotocol/server-everything@2026.8.31 \
  @modelcontextprotocol/server-filesystem@2026.8.31 \
  @modelcontextprotocol/conformance@0.1.13
[ -x venv/bin/python ] || python3 -m venv venv
venv/bin/pip install --quiet --disable-pip-version-check mcp-server-time==2026.10.19
