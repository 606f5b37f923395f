//! `mcp-demo-server`: a small MCP server over stdio, built on rmcp's server side.
//!
//! Normal tools (for `agcore demo` and examples): `get_weather {city}` (read-only, structured
//! content), `echo {message}` → `Echo: <message>`, `add {a, b}`.
//!
//! For agcore's test suite it can misbehave on purpose:
//! - `--test-tools` adds tools that fail on call: `crash` (exits mid-call), `hang` (never
//!   answers), `big {bytes}` (a huge text), `fail` (an `isError` result), `image` (image content),
//!   `multi_text` (two text blocks), `change_tools {quiet}` (adds a tool, changes its own description and
//!   sends `tools/list_changed` unless `quiet`),
//!   `slow {ms}` (answers after a delay), `open_world` (annotated `openWorldHint: true`), `env
//!   {name}` (structured `{"name", "value"}`: the server's environment variable, `null` when
//!   unset — to check what a client withholds), `numbers {bad}` (structured content `[1, 2, 3]`
//!   under an array outputSchema; with `bad`, `[1, "two", 3]`, which breaks it).
//! - `--echo-meta`: adds `meta` (idempotent, read-only), which answers with the `_meta` object of
//!   its own `tools/call` request as structured content (`{"meta": {...}}`) — to check what a
//!   client sends there.
//! - `--page-size N`: `tools/list` answers in pages of N tools.
//! - `--tools-file FILE`: also offers the tools FILE lists (a JSON array of MCP `Tool`s: `name`,
//!   `description`, `inputSchema`, `annotations`); a call of one answers with
//!   `{"tool": name, "arguments": {...}}` as text — a large catalog for tool search tests.
//! - `--image-resource`: offers resources: `demo://pixel.png`, a PNG blob.
//! - `--ended-file FILE`: when the client closes stdin (a graceful close), take 300 ms (a
//!   server saving its state) and write `stdin closed` to FILE before exiting; a server killed
//!   instead writes nothing.
//! - `--http ADDR` (e.g. `127.0.0.1:0`): serve streamable HTTP on ADDR instead of stdio
//!   (rmcp's service: a 2026-07-28 client is served statelessly, an earlier one in a session)
//!   and print `listening on http://HOST:PORT/mcp` on stdout.
//! - `--max-protocol VERSION`: speak no protocol newer than VERSION (`2025-11-25`: a server of
//!   the previous generation, which answers `server/discover` with an error).
//! - `--ttl-ms N`: `tools/list` says it stays fresh N ms (`ttlMs`, `cacheScope: public`).
//! - `--fault MODE` (or env `MCP_DEMO_FAULT`): `exit-during-init` (exits with code 7 when the
//!   `initialize` request arrives), `hang-init` (never answers `initialize`), `slow-init=MS`
//!   (sleeps before serving), `garbage` (writes non-JSON lines to stdout before serving),
//!   `stderr-flood` (writes stderr lines without pause for as long as it runs),
//!   `fail-starts=N@FILE` (counts its starts in FILE; the first N exit like `exit-during-init`,
//!   later ones serve — a server that fails at startup until it does not).

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};

#[derive(Clone)]
struct Demo {
    test_tools: bool,
    page_size: usize,
    extra_tool: Arc<AtomicBool>,
    /// `--image-resource`: offer resources, one of them a PNG blob.
    image_resource: bool,
    /// `--max-protocol`: the newest protocol version spoken (none: every version rmcp knows).
    max_protocol: Option<rmcp::model::ProtocolVersion>,
    /// `--ttl-ms`: the `tools/list` cache hint.
    ttl_ms: Option<u64>,
    /// `--echo-meta`: offer `meta`, which answers with its request's `_meta`.
    echo_meta: bool,
    /// `--tools-file`: extra tools read from a JSON file, answered with their arguments.
    file_tools: Arc<Vec<Tool>>,
}

/// The URI of the `--image-resource` resource.
const PIXEL_URI: &str = "demo://pixel.png";

fn schema(value: Value) -> Arc<Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(Map::new()),
    }
}

fn object_schema(properties: Value, required: &[&str]) -> Arc<Map<String, Value>> {
    schema(json!({"type": "object", "properties": properties, "required": required}))
}

impl Demo {
    fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            Tool::new(
                "get_weather",
                "Current weather for a city (demo data)",
                object_schema(
                    json!({"city": {"type": "string", "description": "City name"}}),
                    &["city"],
                ),
            )
            .with_title("Get weather")
            .with_raw_output_schema(object_schema(
                json!({"city": {"type": "string"}, "temperature_c": {"type": "number"}, "conditions": {"type": "string"}}),
                &["city", "temperature_c", "conditions"],
            ))
            .with_annotations(
                ToolAnnotations::with_title("Get weather")
                    .read_only(true)
                    .open_world(false),
            ),
            Tool::new(
                "echo",
                "Echo the message back as text",
                object_schema(
                    json!({"message": {"type": "string", "description": "Text to echo back"}}),
                    &["message"],
                ),
            )
            .with_annotations(ToolAnnotations::new().read_only(true)),
            Tool::new(
                "add",
                "Add two numbers",
                object_schema(
                    json!({"a": {"type": "number"}, "b": {"type": "number"}}),
                    &["a", "b"],
                ),
            ),
        ];
        if self.test_tools {
            let empty = || object_schema(json!({}), &[]);
            tools.extend([
                Tool::new("crash", "Exit the server process mid-call", empty())
                    .with_annotations(ToolAnnotations::new().destructive(true)),
                Tool::new("hang", "Never answer", empty()),
                Tool::new(
                    "big",
                    "Return a large text",
                    object_schema(json!({"bytes": {"type": "integer"}}), &["bytes"]),
                ),
                Tool::new("fail", "Return an isError result", empty()),
                Tool::new("image", "Return an image and a text", empty()),
                Tool::new("multi_text", "Return two text blocks", empty()),
                Tool::new(
                    "change_tools",
                    // The description changes too, for clients that refresh descriptions.
                    if self.extra_tool.load(Ordering::SeqCst) {
                        "Already added the tool `extra`"
                    } else {
                        "Add the tool `extra` and send tools/list_changed"
                    },
                    object_schema(json!({"quiet": {"type": "boolean"}}), &[]),
                ),
                Tool::new(
                    "slow",
                    "Answer after a delay",
                    object_schema(json!({"ms": {"type": "integer"}}), &["ms"]),
                ),
                Tool::new(
                    "numbers",
                    "Structured content that is an array of integers (`bad`: with a string in it)",
                    object_schema(json!({"bad": {"type": "boolean"}}), &[]),
                )
                .with_raw_output_schema(schema(
                    json!({"type": "array", "items": {"type": "integer"}}),
                )),
                Tool::new("open_world", "A tool that reaches the internet", empty())
                    .with_annotations(ToolAnnotations::new().open_world(true)),
                Tool::new(
                    "env",
                    "The server's environment variable `name`, or null when unset",
                    object_schema(json!({"name": {"type": "string"}}), &["name"]),
                )
                .with_annotations(ToolAnnotations::new().read_only(true).open_world(false)),
            ]);
            if self.extra_tool.load(Ordering::SeqCst) {
                tools.push(Tool::new("extra", "Appeared after change_tools", empty()));
            }
        }
        if self.echo_meta {
            tools.push(
                Tool::new(
                    "meta",
                    "Answer with the _meta of this tools/call request",
                    object_schema(json!({}), &[]),
                )
                .with_annotations(ToolAnnotations::new().read_only(true).idempotent(true)),
            );
        }
        tools.extend(self.file_tools.iter().cloned());
        tools
    }
}

fn text(value: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResponse::Complete(CallToolResult::success(vec![
        ContentBlock::text(value),
    ])))
}

fn arg<'a>(args: &'a Option<Map<String, Value>>, key: &str) -> Option<&'a Value> {
    args.as_ref().and_then(|map| map.get(key))
}

/// A 1×1 transparent PNG.
const PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

impl ServerHandler for Demo {
    fn supported_protocol_versions(
        &self,
    ) -> std::borrow::Cow<'static, [rmcp::model::ProtocolVersion]> {
        match &self.max_protocol {
            Some(max) => std::borrow::Cow::Borrowed(rmcp::model::ProtocolVersion::known_up_to(max)),
            None => std::borrow::Cow::Borrowed(rmcp::model::ProtocolVersion::KNOWN_VERSIONS),
        }
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed();
        let capabilities = if self.image_resource {
            capabilities.enable_resources().build()
        } else {
            capabilities.build()
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("mcp-demo-server", "0.1.0"))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        if !self.image_resource {
            return Err(ErrorData::method_not_found::<
                rmcp::model::ListResourcesRequestMethod,
            >());
        }
        let mut pixel = Resource::new(PIXEL_URI, "pixel");
        pixel.mime_type = Some("image/png".into());
        Ok(ListResourcesResult::with_all_items(vec![pixel]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if !self.image_resource || request.uri != PIXEL_URI {
            return Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        }
        Ok(ReadResourceResponse::Complete(ReadResourceResult::new(
            vec![ResourceContents::blob(PIXEL_PNG, PIXEL_URI).with_mime_type("image/png")],
        )))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.tools();
        let hinted = |mut page: ListToolsResult| {
            if let Some(ttl_ms) = self.ttl_ms {
                page = page
                    .with_ttl_ms(ttl_ms)
                    .with_cache_scope(rmcp::model::CacheScope::Public);
            }
            page
        };
        if self.page_size == 0 {
            return Ok(hinted(ListToolsResult::with_all_items(tools)));
        }
        let start: usize = request
            .and_then(|params| params.cursor)
            .and_then(|cursor| cursor.parse().ok())
            .unwrap_or(0);
        let end = (start + self.page_size).min(tools.len());
        let mut page = ListToolsResult::with_all_items(tools[start.min(end)..end].to_vec());
        if end < tools.len() {
            page.next_cursor = Some(end.to_string());
        }
        Ok(hinted(page))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = &request.arguments;
        match request.name.as_ref() {
            "get_weather" => {
                let city = arg(args, "city").and_then(Value::as_str).unwrap_or("Paris");
                let weather = json!({"city": city, "temperature_c": 21.5, "conditions": "sunny"});
                Ok(CallToolResponse::Complete(CallToolResult::structured(
                    weather,
                )))
            }
            "numbers" if self.test_tools => {
                let bad = arg(args, "bad").and_then(Value::as_bool).unwrap_or(false);
                let numbers = if bad {
                    json!([1, "two", 3])
                } else {
                    json!([1, 2, 3])
                };
                Ok(CallToolResponse::Complete(CallToolResult::structured(
                    numbers,
                )))
            }
            "echo" => {
                let message = arg(args, "message").and_then(Value::as_str).unwrap_or("");
                text(format!("Echo: {message}"))
            }
            "add" => {
                let a = arg(args, "a").and_then(Value::as_f64).unwrap_or(0.0);
                let b = arg(args, "b").and_then(Value::as_f64).unwrap_or(0.0);
                text(format!("{}", a + b))
            }
            "crash" if self.test_tools => {
                eprintln!("demo server: crashing on purpose");
                std::process::exit(3);
            }
            "hang" if self.test_tools => {
                // Never answers; says on stderr when the client cancels the request.
                context.ct.cancelled().await;
                eprintln!("demo server: hang was cancelled by the client");
                text("cancelled")
            }
            "big" if self.test_tools => {
                let bytes = arg(args, "bytes").and_then(Value::as_u64).unwrap_or(0);
                text("x".repeat(usize::try_from(bytes).unwrap_or(0)))
            }
            "fail" if self.test_tools => {
                Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                    ContentBlock::text("the demo tool failed on purpose"),
                ])))
            }
            "image" if self.test_tools => {
                Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                    ContentBlock::text("a pixel"),
                    ContentBlock::image(PIXEL_PNG, "image/png"),
                ])))
            }
            "multi_text" if self.test_tools => {
                Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                    ContentBlock::text("first"),
                    ContentBlock::text("second"),
                ])))
            }
            "change_tools" if self.test_tools => {
                self.extra_tool.store(true, Ordering::SeqCst);
                // `quiet`: change without telling (only a cache hint's expiry shows it).
                if arg(args, "quiet").and_then(Value::as_bool) != Some(true) {
                    let _ = context.peer.notify_tool_list_changed().await;
                }
                text("tools changed")
            }
            "slow" if self.test_tools => {
                let ms = arg(args, "ms").and_then(Value::as_u64).unwrap_or(100);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                text("done")
            }
            "env" if self.test_tools => {
                let name = arg(args, "name").and_then(Value::as_str).unwrap_or("");
                let value = std::env::var(name).ok();
                Ok(CallToolResponse::Complete(CallToolResult::structured(
                    json!({"name": name, "value": value}),
                )))
            }
            "open_world" | "extra" if self.test_tools => text("ok"),
            "meta" if self.echo_meta => {
                // rmcp may move the request's `_meta` into the context: both, merged.
                let mut meta = context.meta.0.0.clone();
                if let Some(own) = &request.meta {
                    meta.extend(own.0.0.clone());
                }
                Ok(CallToolResponse::Complete(CallToolResult::structured(
                    json!({ "meta": meta }),
                )))
            }
            other if self.file_tools.iter().any(|tool| tool.name == other) => {
                text(json!({"tool": other, "arguments": args}).to_string())
            }
            other => Err(ErrorData::invalid_params(
                format!("unknown tool '{other}'"),
                None,
            )),
        }
    }
}

/// How the demo server was asked to run.
struct Options {
    demo: Demo,
    fault: Option<String>,
    ended_file: Option<String>,
    /// `--http ADDR`: serve streamable HTTP there instead of stdio.
    http: Option<String>,
}

fn parse_args(cli_args: Vec<String>) -> Result<Options, String> {
    let mut demo = Demo {
        test_tools: false,
        page_size: 0,
        extra_tool: Arc::new(AtomicBool::new(false)),
        image_resource: false,
        max_protocol: None,
        ttl_ms: None,
        echo_meta: false,
        file_tools: Arc::new(Vec::new()),
    };
    let mut http = None;
    let mut fault = std::env::var("MCP_DEMO_FAULT").ok();
    let mut ended_file = None;
    let mut args = cli_args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--test-tools" => demo.test_tools = true,
            "--image-resource" => demo.image_resource = true,
            "--echo-meta" => demo.echo_meta = true,
            "--tools-file" => {
                let file = args.next().ok_or("--tools-file needs a path")?;
                let text = std::fs::read_to_string(&file)
                    .map_err(|error| format!("--tools-file {file}: {error}"))?;
                let tools: Vec<Tool> = serde_json::from_str(&text)
                    .map_err(|error| format!("--tools-file {file}: {error}"))?;
                demo.file_tools = Arc::new(tools);
            }
            "--page-size" => {
                demo.page_size = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or("--page-size needs a number")?;
            }
            "--fault" => fault = Some(args.next().ok_or("--fault needs a mode")?),
            "--http" => http = Some(args.next().ok_or("--http needs an address")?),
            "--max-protocol" => {
                let version = args.next().ok_or("--max-protocol needs a version")?;
                demo.max_protocol = Some(
                    serde_json::from_value(Value::String(version)).map_err(|e| e.to_string())?,
                );
            }
            "--ttl-ms" => {
                demo.ttl_ms = Some(
                    args.next()
                        .and_then(|n| n.parse().ok())
                        .ok_or("--ttl-ms needs a number")?,
                );
            }
            "--ended-file" => {
                ended_file = Some(args.next().ok_or("--ended-file needs a path")?);
            }
            "-h" | "--help" => {
                return Err(
                    "usage: mcp-demo-server [--test-tools] [--image-resource] [--echo-meta] [--tools-file FILE] [--page-size N] [--fault MODE] [--ended-file FILE] [--http ADDR] [--max-protocol VERSION] [--ttl-ms N]"
                        .into(),
                );
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Options {
        demo,
        fault,
        ended_file,
        http,
    })
}

/// Read stdin until the first line (the `initialize` request), then exit with code 7.
fn exit_during_init() -> ! {
    eprintln!("demo server: exiting during initialize");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    eprintln!("demo server: got {} bytes, exiting", line.len());
    std::process::exit(7);
}

/// Serve the demo server on stdin/stdout with these command-line arguments (program name
/// excluded): `[--test-tools] [--page-size N] [--fault MODE] [--ended-file FILE]`. Returns when
/// the client goes away.
pub async fn serve(cli_args: Vec<String>) -> anyhow::Result<()> {
    let Options {
        demo,
        fault,
        ended_file,
        http,
    } = match parse_args(cli_args) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    match fault.as_deref() {
        Some("exit-during-init") => exit_during_init(),
        Some("hang-init") => {
            eprintln!("demo server: will never answer initialize");
            std::future::pending::<()>().await;
        }
        Some(mode) if mode.starts_with("fail-starts=") => {
            let spec = &mode["fail-starts=".len()..];
            let (count, file) = spec
                .split_once('@')
                .ok_or("fail-starts=N@FILE")
                .map_err(anyhow::Error::msg)?;
            let failing: u64 = count.parse()?;
            let started: u64 = std::fs::read_to_string(file)
                .ok()
                .and_then(|text| text.trim().parse().ok())
                .unwrap_or(0)
                + 1;
            std::fs::write(file, started.to_string())?;
            if started <= failing {
                exit_during_init();
            }
        }
        Some(mode) if mode.starts_with("slow-init=") => {
            let ms = mode["slow-init=".len()..].parse().unwrap_or(1000);
            eprintln!("demo server: sleeping {ms} ms before serving");
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        Some("garbage") => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "this is not JSON")?;
            writeln!(out, "{{\"neither\": is this")?;
            writeln!(out, "\u{1b}[31mcolour codes\u{1b}[0m")?;
            out.flush()?;
        }
        Some("stderr-flood") => {
            std::thread::spawn(|| {
                let mut err = std::io::stderr().lock();
                let mut i: u64 = 0;
                loop {
                    i += 1;
                    if writeln!(err, "flood line {i} {}", "#".repeat(100)).is_err() {
                        return;
                    }
                }
            });
        }
        _ => {}
    }
    if let Some(addr) = http {
        return serve_http(demo, &addr).await;
    }
    let service = demo.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    if let Some(file) = ended_file {
        tokio::time::sleep(Duration::from_millis(300)).await;
        std::fs::write(file, "stdin closed")?;
    }
    Ok(())
}

/// Serve rmcp's streamable HTTP service at `addr` (`/mcp`) until killed: each connection on
/// its own task, one `Demo` per session (stateless requests get a fresh one each).
async fn serve_http(demo: Demo, addr: &str) -> anyhow::Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let service = StreamableHttpService::new(
        move || Ok(demo.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    println!("listening on http://{local}/mcp");
    std::io::stdout().flush()?;
    loop {
        let (stream, _) = listener.accept().await?;
        let service = hyper_util::service::TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(error) = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await
            {
                eprintln!("demo server: connection error: {error}");
            }
        });
    }
}
