// The TypeScript SDK's MCP client on the same bench as examples/mcp_bench.rs (same JSON fields),
// for a same-run comparison. Needs @modelcontextprotocol/sdk (installed with server-everything
// in .ci/npm):
//   NODE_PATH=.ci/npm/node_modules node examples/mcp_bench_ts.mjs [--calls 2000] [--conc 32]
//       (--url http://127.0.0.1:PORT/mcp | -- SERVER_CMD...)
import { createRequire } from "node:module";
import path from "node:path";
const require = createRequire(path.resolve(process.env.NODE_PATH ?? ".", "x.js"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

const argv = process.argv.slice(2);
let calls = 2000, conc = 32, label = "", url = "";
const sep = argv.indexOf("--");
for (let i = 0; i < (sep < 0 ? argv.length : sep); i += 2) {
  if (argv[i] === "--calls") calls = Number(argv[i + 1]);
  else if (argv[i] === "--conc") conc = Number(argv[i + 1]);
  else if (argv[i] === "--label") label = argv[i + 1];
  else if (argv[i] === "--url") url = argv[i + 1];
}
const server = sep < 0 ? [] : argv.slice(sep + 1);
label ||= url || server.join(" ");
const t0 = performance.now();
const client = new Client({ name: "bench-ts", version: "0.1.0" });
await client.connect(url
  ? new StreamableHTTPClientTransport(new URL(url))
  : new StdioClientTransport({ command: server[0], args: server.slice(1), stderr: "ignore" }));
const initMs = performance.now() - t0;
const echo = async (i) => {
  const t = performance.now();
  const r = await client.callTool({ name: "echo", arguments: { message: `m${i}` } });
  if (r.content[0].text !== `Echo: m${i}`) throw new Error(`bad reply ${JSON.stringify(r)}`);
  return (performance.now() - t) * 1000;
};
for (let i = 0; i < 50; i++) await echo(0);
const report = (mode, c, el, cpu, lat) => {
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(Math.floor(p * lat.length), lat.length - 1)];
  console.log(JSON.stringify({ impl: "ts-sdk", transport: url ? "http" : "stdio", runtime: "node", server: label, mode, conc: c, calls,
    elapsed_s: +el.toFixed(3), calls_per_s: Math.round(calls / el), p50_us: +q(0.5).toFixed(1),
    p99_us: +q(0.99).toFixed(1), cpu_us_per_call: +(cpu / calls).toFixed(1), server_cpu_us_per_call: 0,
    init_ms: +initMs.toFixed(2) }));
};
for (const mode of ["seq", "join_all"]) {
  const c0 = process.cpuUsage(), t = performance.now();
  const lat = [];
  if (mode === "seq") { for (let i = 0; i < calls; i++) lat.push(await echo(i)); }
  else {
    let next = 0;
    await Promise.all(Array.from({ length: conc }, async () => {
      for (let i = next++; i < calls; i = next++) lat.push(await echo(i));
    }));
  }
  const el = (performance.now() - t) / 1000, cu = process.cpuUsage(c0);
  report(mode, mode === "seq" ? 1 : conc, el, cu.user + cu.system, lat);
}
await client.close();
