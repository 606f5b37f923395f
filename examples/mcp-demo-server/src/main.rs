//! Placeholder (the MCP issue fills it).
fn main() {}
