//! The real Restate server (`@restatedev/restate-server`, installed by
//! `.ci/install-mcp-servers.sh` into `.ci/restate`) and `agcore restate serve` endpoints, for
//! `suite::restate_server`.
//!
//! Every test runs in a fresh network namespace with only loopback ([`inside_netns`]): the
//! test re-executes itself under `unshare -n`, so the server (which looks up its latest release
//! at every start), the endpoints and the fake model reach nothing but 127.0.0.1. Inside, the
//! ports are fixed: nothing else listens there.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::mcp::repo;
use super::require::require;

/// Set in the re-executed test: it runs inside the namespace.
const INSIDE: &str = "AGCORE_RESTATE_NETNS";

/// The admin API.
pub const ADMIN: &str = "http://127.0.0.1:9070";
/// The ingress.
pub const INGRESS: &str = "http://127.0.0.1:8080";

/// A test-only ed25519 key Restate signs its requests to endpoints with
/// ([`Restate::start_signing`]), and its public half as `--identity-key` takes it.
pub const IDENTITY_PRIVATE_KEY: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIC1dH5CGEPKVaGmUYgAUYGvjkdzfOeb0LJO18fW2TfGD
-----END PRIVATE KEY-----
";
/// The public half of [`IDENTITY_PRIVATE_KEY`].
pub const IDENTITY_PUBLIC_KEY: &str = "publickeyv1_7cNGGP2ELVBwdNy3zZXz8qJSHwo1U6GQEZngMKcVbjaQ";

/// How long a server or endpoint may take to come up, or a run to finish.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The server binary, when installed.
pub fn server_binary() -> Option<PathBuf> {
    let path = repo()
        .join(".ci/restate/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server");
    require(
        "the Restate server (@restatedev/restate-server)",
        "run `.ci/install-mcp-servers.sh` (npm packages into .ci/restate)",
        Some(path).filter(|path| path.exists()),
    )
}

/// Whether the caller runs inside the test's network namespace (then it runs the test's
/// body). Outside, it runs the test `name` (its full path) again inside a fresh namespace
/// with only loopback up, asserts that it passed, and returns `false`.
pub fn inside_netns(name: &str) -> bool {
    if std::env::var_os(INSIDE).is_some() {
        return true;
    }
    let probe = Command::new("unshare")
        .args(["-n", "true"])
        .stderr(Stdio::null())
        .status()
        .ok()
        .filter(|status| status.success());
    if require(
        "a network namespace (unshare -n, as root)",
        "run the tests as root on a machine with util-linux's unshare and iproute2",
        probe,
    )
    .is_none()
    {
        return false;
    }
    let exe = std::env::current_exe().unwrap();
    let output = Command::new("unshare")
        .args([
            "-n",
            "--",
            "sh",
            "-c",
            "ip link set lo up && exec \"$0\" \"$@\"",
        ])
        .arg(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(INSIDE, "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{name} failed in its network namespace ({}):\n{stdout}\n{stderr}",
        output.status
    );
    false
}

/// A Restate server with its base dir under a test directory; killed when dropped.
pub struct Restate {
    child: Child,
}

impl Restate {
    /// Start the server (`binary`) with its data and log in `dir`; returns once the admin API
    /// and the ingress answer.
    pub async fn start(binary: &Path, dir: &Path) -> Restate {
        Restate::start_with(binary, dir, "").await
    }

    /// [`Restate::start`], signing its requests to endpoints with [`IDENTITY_PRIVATE_KEY`].
    pub async fn start_signing(binary: &Path, dir: &Path) -> Restate {
        let key = dir.join("identity.pem");
        std::fs::write(&key, IDENTITY_PRIVATE_KEY).unwrap();
        let line = format!(
            "request-identity-private-key-pem-file = {:?}\n",
            key.display().to_string()
        );
        Restate::start_with(binary, dir, &line).await
    }

    /// [`Restate::start`] with `invoker` added to its `[worker.invoker]` section.
    async fn start_with(binary: &Path, dir: &Path, invoker: &str) -> Restate {
        let config = dir.join("restate.toml");
        std::fs::write(
            &config,
            format!(
                r#"node-name = "agcore-test"
base-dir = "{base}"
listen-mode = "tcp"
bind-address = "127.0.0.1:5122"
advertised-address = "http://127.0.0.1:5122/"
disable-telemetry = true
auto-provision = true
default-num-partitions = 4
rocksdb-total-memory-size = "256 MiB"
log-format = "compact"
log-disable-ansi-codes = true

[admin]
bind-address = "127.0.0.1:9070"
disable-web-ui = true

[admin.query-engine]
memory-size = "64 MiB"

[ingress]
bind-address = "127.0.0.1:8080"

[worker.invoker]
# Few streams per connection: invocations spread over several connections, so over the
# endpoints behind a connection-balancing proxy.
http2-streams-per-connection-limit = 4
{invoker}"#,
                base = dir.join("restate-data").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("restate.log")).unwrap();
        let child = Command::new(binary)
            .arg("--no-logo")
            .arg("--config-file")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let restate = Restate { child };
        let client = reqwest::Client::new();
        wait_until("the Restate server answers", || async {
            let admin = client.get(format!("{ADMIN}/health")).send().await;
            let ingress = client
                .get(format!("{INGRESS}/restate/health"))
                .send()
                .await;
            matches!((admin, ingress), (Ok(a), Ok(i)) if a.status().is_success() && i.status().is_success())
        })
        .await;
        restate
    }

    /// Register the endpoint at `uri` through the admin API.
    pub async fn register(&self, uri: &str) -> Value {
        let response = reqwest::Client::new()
            .post(format!("{ADMIN}/deployments"))
            .json(&serde_json::json!({"uri": uri, "force": true}))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert!(status.is_success(), "registering {uri}: {status} {body}");
        body
    }
}

impl Drop for Restate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An `agcore restate serve` process; killed (SIGKILL) when dropped.
pub struct Endpoint {
    child: Option<Child>,
    dir: PathBuf,
    bind: String,
    args: Vec<String>,
}

impl Endpoint {
    /// Start `agcore restate serve --bind BIND ARGS…` in `dir`; returns once it listens.
    pub async fn start(dir: &Path, bind: &str, args: &[String]) -> Endpoint {
        let mut endpoint = Endpoint {
            child: None,
            dir: dir.to_owned(),
            bind: bind.to_owned(),
            args: args.to_vec(),
        };
        endpoint.restart().await;
        endpoint
    }

    /// The URI Restate reaches it at.
    pub fn uri(&self) -> String {
        format!("http://{}", self.bind)
    }

    /// SIGKILL it (no cleanup, like a crashed machine) and reap it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// Start it again (after [`Endpoint::kill`]); returns once it listens.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "the endpoint still runs");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(
                self.dir
                    .join(format!("endpoint-{}.log", self.bind.replace(':', "_"))),
            )
            .unwrap();
        let child = super::agcore(&self.dir)
            .args(["restate", "serve", "--bind", &self.bind])
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let bind = self.bind.clone();
        wait_until("the endpoint listens", || {
            let bind = bind.clone();
            async move { TcpStream::connect(&bind).is_ok() }
        })
        .await;
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Poll `ready` until it holds; fails the test after [`PATIENCE`].
pub async fn wait_until<F, Fut>(what: &str, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + PATIENCE;
    while !ready().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Call `handler` of the session `key` through the ingress with the JSON `body` (none: no
/// body); the HTTP status and the JSON answer.
pub async fn call(key: &str, handler: &str, body: Option<&Value>) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{INGRESS}/AgentSession/{key}/{handler}"))
        .timeout(PATIENCE);
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}

/// The lines of `path` (none when it does not exist).
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The rows of `sql` run by the admin API's query engine (`POST /query`).
pub async fn query(sql: &str) -> Vec<Value> {
    let response = reqwest::Client::new()
        .post(format!("{ADMIN}/query"))
        .header("accept", "application/json")
        .json(&serde_json::json!({ "query": sql }))
        .timeout(PATIENCE)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert!(status.is_success(), "{sql}: {status} {body}");
    body["rows"].as_array().cloned().unwrap_or_default()
}
