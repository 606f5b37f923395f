//! `mcp-demo-server`: agcore's demo MCP server over stdio (see the library docs).

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    mcp_demo_server::serve(std::env::args().skip(1).collect()).await
}
