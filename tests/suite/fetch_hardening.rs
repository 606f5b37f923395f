//! `fetch_url` against hostile pages and failing networks: deeply nested HTML converts in
//! bounded time off the async threads, the tool's timeout covers download and conversion, the
//! text of ordinary pages stays right, and every failure says why (DNS, refused, TLS, blocked
//! address, timeout, redirects, status).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use agcore::tools::builtin::{FetchUrl, FetchUrlInput, FetchUrlOutput, HostLookup, LoopbackOnly};
use agcore::tools::{Tool, ToolError};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// `<div>` opened `depth` times around a line of text (closing tags are not needed to nest).
fn nested_divs(depth: usize) -> String {
    format!(
        "<html><body>{}deep text</body></html>",
        "<div>".repeat(depth)
    )
}

/// One start tag with `count` distinct attributes: html5ever's tokenizer (0.40) checks each new
/// attribute against all earlier ones, so this is slow to convert (quadratic) — minutes for
/// 250,000 in a debug build. Should html5ever make that linear, the timeout test below needs
/// another slow page.
fn attribute_bomb(count: usize) -> String {
    let attrs: String = (0..count).map(|i| format!(" a{i:x}")).collect();
    format!("<html><body><p{attrs}>x</p></body></html>")
}

/// A wiremock server (it runs on its own thread and runtime) answering `GET /page` with `html`.
async fn serving_html(html: String) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/page"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(html, "text/html; charset=utf-8"))
        .mount(&server)
        .await;
    server
}

/// Allowed to reach local servers, and nothing beyond loopback.
fn local() -> FetchUrl {
    FetchUrl::new()
        .allow_private_network(true)
        .with_dial_check(LoopbackOnly::new())
}

/// Host names of these tests, resolved without a DNS query: `internal.test` is a private
/// address (which the dial check must stop when the guard is off), `localhost` loopback;
/// anything else does not exist.
#[derive(Debug)]
struct TestNames;

impl HostLookup for TestNames {
    fn lookup(&self, host: &str) -> std::io::Result<Vec<SocketAddr>> {
        match host {
            "internal.test" => Ok(vec!["10.0.0.1:0".parse().unwrap()]),
            "localhost" => Ok(vec!["127.0.0.1:0".parse().unwrap()]),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such test host",
            )),
        }
    }
}

async fn fetch(tool: &FetchUrl, url: String) -> Result<FetchUrlOutput, ToolError> {
    tokio::time::timeout(Duration::from_secs(60), tool.run(FetchUrlInput { url }))
        .await
        .expect("fetch_url did not return within 60 s")
}

fn failure_text(error: &ToolError) -> &str {
    match error {
        ToolError::ExecutionFailed(tool, why) | ToolError::PermissionDenied(tool, why) => {
            assert_eq!(tool, "fetch_url");
            eprintln!("fetch_url said: {why}");
            why
        }
        other => panic!("expected ExecutionFailed or PermissionDenied, got {other:?}"),
    }
}

// ---------------------------------------------------------------- item 2: nested HTML

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_thousand_nested_divs_convert_within_bounded_time() {
    let server = serving_html(nested_divs(200_000)).await;
    let started = Instant::now();
    let output = tokio::time::timeout(
        Duration::from_secs(20),
        local().run(FetchUrlInput {
            url: format!("{}/page", server.uri()),
        }),
    )
    .await
    .expect("200k nested divs must convert within 20 s")
    .unwrap();
    assert!(output.content.contains("deep text"), "{}", output.content);
    eprintln!("200k nested divs: {:?}", started.elapsed());
}

#[test]
fn parallel_deep_pages_leave_the_async_threads_free() {
    // A runtime of our own, watched from this (non-runtime) thread: if conversions block the
    // workers, the heartbeat stops and the test fails instead of hanging.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(serving_html(nested_divs(200_000)));
    let url = format!("{}/page", server.uri());
    let (beat, beats) = mpsc::channel::<()>();
    let (done, finished) = mpsc::channel::<Result<FetchUrlOutput, ToolError>>();
    for _ in 0..10 {
        let (url, done) = (url.clone(), done.clone());
        runtime.spawn(async move {
            let _ = done.send(local().run(FetchUrlInput { url }).await);
        });
    }
    runtime.spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if beat.send(()).is_err() {
                break;
            }
        }
    });
    // Ten heartbeats (about 0.5 s of progress) while ten conversions are under way.
    for n in 0..10 {
        if beats.recv_timeout(Duration::from_secs(10)).is_err() {
            // Dropping the runtime would wait for the blocked workers: leave them.
            std::mem::forget(runtime);
            panic!("the other task made no progress (heartbeat {n})");
        }
    }
    for n in 0..10 {
        let output = finished
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("fetch {n} did not finish within 120 s"))
            .unwrap();
        assert!(output.content.contains("deep text"));
    }
    runtime.shutdown_timeout(Duration::from_millis(100));
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeout_covers_a_slow_conversion() {
    let server = serving_html(attribute_bomb(250_000)).await;
    let tool = local().with_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(20),
        tool.run(FetchUrlInput {
            url: format!("{}/page", server.uri()),
        }),
    )
    .await
    .expect("the 1 s timeout must end the call long before 20 s");
    let elapsed = started.elapsed();
    match result {
        Err(ToolError::Timeout { tool, limit }) => {
            assert_eq!(tool, "fetch_url");
            assert_eq!(limit, Duration::from_secs(1));
        }
        other => panic!("expected ToolError::Timeout, got {other:?}"),
    }
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
}

#[tokio::test]
async fn an_ordinary_page_keeps_headings_links_and_lists() {
    let page = r#"<!doctype html>
<html><head><title>Docs</title><style>body { color: red }</style>
<script>document.write("<h1>not text</h1>")</script></head>
<body>
  <nav><a href="/">Home</a></nav>
  <h1>Getting started</h1>
  <p>Install the <code>agcore</code> crate, then read
     <a href="guide/intro.html">the guide</a>.</p>
  <h2>Steps</h2>
  <ol><li>Add it to <b>Cargo.toml</b></li><li>Build</li></ol>
  <ul><li>fast</li><li>small<ul><li>really</li></ul></li></ul>
  <pre>cargo add agcore
cargo build</pre>
</body></html>"#;
    let server = serving_html(page.to_owned()).await;
    let base = server.uri();
    let output = fetch(&local(), format!("{base}/page")).await.unwrap();
    assert_eq!(
        output.content,
        format!(
            "[Home]({base}/)\n\n\
             # Getting started\n\n\
             Install the `agcore` crate, then read [the guide]({base}/guide/intro.html).\n\n\
             ## Steps\n\n\
             1. Add it to **Cargo.toml**\n\
             2. Build\n\n\
             * fast\n\
             * small\n  \
             * really\n\n\
             ```\ncargo add agcore\ncargo build\n```"
        )
    );
    assert!(!output.truncated);
}

#[tokio::test]
async fn huge_text_from_html_is_cut_with_a_marker() {
    let page = format!("<p>{}</p>", "word ".repeat(400_000));
    let server = serving_html(page).await;
    let output = fetch(&local(), format!("{}/page", server.uri()))
        .await
        .unwrap();
    assert!(output.truncated);
    assert!(
        output.content.len() < 200 * 1024,
        "{}",
        output.content.len()
    );
    assert!(output.content.contains("cut"), "a marker says text was cut");
}

// ---------------------------------------------------------------- item 18: errors say why

#[tokio::test]
async fn a_closed_port_is_reported_as_connection_refused() {
    let port = {
        let listener = StdListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let error = fetch(&local(), format!("http://127.0.0.1:{port}/"))
        .await
        .unwrap_err();
    let why = failure_text(&error);
    assert!(why.contains("connection refused"), "{why}");
    assert!(why.contains(&format!("127.0.0.1:{port}")), "{why}");
    assert!(!why.contains("error sending request"), "{why}");
}

#[tokio::test]
async fn an_unresolvable_name_is_reported_as_a_dns_failure() {
    // The test's own names: no DNS query leaves the machine.
    let names: Arc<dyn HostLookup> = Arc::new(TestNames);
    for tool in [FetchUrl::new(), local()] {
        let tool = tool.with_lookup(names.clone());
        let error = fetch(&tool, "http://no-such-host.invalid/".to_owned())
            .await
            .unwrap_err();
        let why = failure_text(&error);
        assert!(
            why.contains("could not resolve") && why.contains("'no-such-host.invalid'"),
            "{why}"
        );
        assert!(!why.contains("error sending request"), "{why}");
    }
}

#[tokio::test]
async fn tls_to_a_plain_http_server_is_reported_as_a_tls_failure() {
    let server = serving_html("<p>plain</p>".to_owned()).await;
    let url = format!("https://127.0.0.1:{}/page", server.address().port());
    let error = fetch(&local(), url).await.unwrap_err();
    let why = failure_text(&error);
    assert!(why.contains("TLS"), "{why}");
    assert!(!why.contains("error sending request"), "{why}");
}

#[tokio::test]
async fn a_server_that_never_answers_hits_the_timeout() {
    let listener = StdListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accept (so the connect succeeds) and then say nothing, for a bounded time.
    let silent = std::thread::spawn(move || {
        let held = listener.accept();
        std::thread::sleep(Duration::from_secs(5));
        drop(held);
    });
    let started = Instant::now();
    let error = fetch(
        &local().with_timeout(Duration::from_secs(1)),
        format!("http://127.0.0.1:{port}/"),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&error, ToolError::Timeout { tool, limit } if tool == "fetch_url" && *limit == Duration::from_secs(1)),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(error.to_string().contains("1s"), "{error}");
    silent.join().unwrap();
}

#[tokio::test]
async fn a_redirect_loop_names_the_limit() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/loop"))
        .respond_with(ResponseTemplate::new(302).insert_header("location", "/loop"))
        .mount(&server)
        .await;
    let error = fetch(&local(), format!("{}/loop", server.uri()))
        .await
        .unwrap_err();
    let why = failure_text(&error);
    assert!(why.contains("redirect") && why.contains('5'), "{why}");
    assert!(!why.contains("error sending request"), "{why}");
}

#[tokio::test]
async fn a_bad_status_names_the_status() {
    let server = MockServer::start().await;
    let error = fetch(&local(), format!("{}/missing", server.uri()))
        .await
        .unwrap_err();
    let why = failure_text(&error);
    assert!(why.contains("HTTP 404"), "{why}");
}

#[tokio::test]
async fn ipv6_forms_embedding_a_private_ipv4_are_blocked_with_the_rule() {
    let dials = LoopbackOnly::new();
    let tool = FetchUrl::new().with_dial_check(dials.clone());
    for (url, expected) in [
        ("http://[64:ff9b::7f00:1]/", "loopback"),
        ("http://[64:ff9b::a9fe:a9fe]/", "link-local"),
        ("http://[2002:a00:1::]/", "private (RFC 1918)"),
        ("http://[::ffff:10.0.0.1]/", "private (RFC 1918)"),
        ("http://[::ffff:169.254.169.254]/", "link-local"),
    ] {
        let error = fetch(&tool, url.to_owned()).await.unwrap_err();
        assert!(
            matches!(&error, ToolError::PermissionDenied(..)),
            "{url}: {error:?}"
        );
        let why = failure_text(&error);
        assert!(why.contains(expected), "{url}: {why}");
    }
    assert_eq!(dials.refused(), Vec::new(), "a dial beyond loopback");
}

#[tokio::test]
async fn a_long_page_fits_the_loop_limit_so_the_loop_never_cuts_its_middle() {
    // Short lines with quotes: JSON escaping makes the model's text longer than the page text.
    let lines: String = (0..20_000)
        .map(|i| format!("<p>line {i} says \"hi\"</p>\n"))
        .collect();
    let server = serving_html(format!("<html><body>{lines}</body></html>")).await;
    let output = fetch(&local(), format!("{}/page", server.uri()))
        .await
        .unwrap();
    assert!(output.truncated);
    let for_model = <FetchUrl as Tool>::model_content(&output);
    assert!(
        for_model.len() <= agcore::run::config::DEFAULT_TOOL_OUTPUT_LIMIT,
        "{} bytes for the model",
        for_model.len()
    );
    assert!(output.content.contains("line 0 says"), "the head is kept");
}

// ------------------------------------------- tests never reach beyond loopback (the seam)

#[tokio::test]
async fn the_dial_check_stops_every_connection_beyond_loopback_even_with_the_guard_off() {
    // The guard off, as if it had regressed: the dial check still sees every destination,
    // literal or resolved, before a connection is made — and refuses all but loopback.
    let dials = LoopbackOnly::new();
    let tool = FetchUrl::new()
        .allow_private_network(true)
        .with_lookup(Arc::new(TestNames))
        .with_dial_check(dials.clone());
    for url in [
        "http://10.0.0.1/",
        "http://[fd00::1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://internal.test/",
    ] {
        let error = fetch(&tool, url.to_owned()).await.unwrap_err();
        eprintln!("{url}: {error}");
    }
    let refused: Vec<(String, String)> = dials
        .refused()
        .into_iter()
        .map(|(host, ip)| (host, ip.to_string()))
        .collect();
    let expected = [
        ("10.0.0.1", "10.0.0.1"),
        ("[fd00::1]", "fd00::1"),
        ("169.254.169.254", "169.254.169.254"),
        ("internal.test", "10.0.0.1"),
    ];
    for (host, ip) in expected {
        assert!(
            refused.contains(&(host.to_owned(), ip.to_owned())),
            "{host} ({ip}) was not stopped: {refused:?}"
        );
    }
    let error = fetch(&tool, "http://internal.test/".to_owned())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ToolError::PermissionDenied(_, why) if why.contains("dial check")),
        "{error:?}"
    );
    // Loopback still passes, literal or by name.
    let server = serving_html("<p>local</p>".to_owned()).await;
    let port = server.address().port();
    for url in [
        format!("http://127.0.0.1:{port}/page"),
        format!("http://localhost:{port}/page"),
    ] {
        let output = fetch(&tool, url.clone()).await.unwrap();
        assert_eq!(output.content.trim(), "local", "{url}");
    }
}
