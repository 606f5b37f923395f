//! The network allow-list of the OS sandbox (issue 34): a sandboxed command reaches listed
//! hosts through agcore's CONNECT proxy on loopback and nothing else — not a listed host's
//! port directly, not UDP, not a host that is not listed, not a private address that is not
//! listed itself. Host names are resolved by an injected resolver that points them at a
//! loopback echo server (no real DNS, no non-loopback address).
//!
//! Fails with the sandbox off: `AGCORE_DISABLE_SANDBOX_IN_TESTS=1` (see `super::sandbox::sandbox`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(target_os = "linux")]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agcore::tools::builtin::{RunCommand, Workspace};
use agcore::tools::sandbox::{EgressProxy, HostAllowList, HostResolver, SandboxPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Names to addresses; records what it was asked.
#[derive(Debug, Default)]
struct FakeResolver {
    names: HashMap<String, SocketAddr>,
    asked: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl HostResolver for FakeResolver {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        self.asked.lock().unwrap().push(host.to_owned());
        match self.names.get(host) {
            Some(address) => Ok(vec![SocketAddr::new(address.ip(), port)]),
            None => Err(std::io::ErrorKind::NotFound.into()),
        }
    }
}

/// A TCP echo server on 127.0.0.1 that counts its connections.
async fn echo_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buffer = [0u8; 1024];
                while let Ok(read) = stream.read(&mut buffer).await {
                    if read == 0 || stream.write_all(&buffer[..read]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (address, accepted)
}

fn resolver(target: SocketAddr) -> Arc<FakeResolver> {
    Arc::new(FakeResolver {
        names: [("svc.test", target), ("rebind.test", target)]
            .into_iter()
            .map(|(name, address)| (name.to_owned(), address))
            .collect(),
        asked: Mutex::default(),
    })
}

/// `CONNECT host:port` through the proxy on `port`: the status line, and the stream.
async fn connect_through(proxy: u16, target: &str) -> (String, TcpStream) {
    let mut stream = TcpStream::connect(("127.0.0.1", proxy)).await.unwrap();
    stream
        .write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "{head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    (head.lines().next().unwrap().to_owned(), stream)
}

#[tokio::test]
async fn the_proxy_tunnels_to_listed_hosts_only() {
    let (target, accepted) = echo_server().await;
    let port = target.port();
    let names = resolver(target);
    // The loopback target is listed as an address, so a listed name may resolve to it.
    let proxy =
        EgressProxy::start(HostAllowList::new(["svc.test", "127.0.0.1"]), names.clone()).unwrap();
    let (status, mut tunnel) = connect_through(proxy.port(), &format!("svc.test:{port}")).await;
    assert_eq!(status, "HTTP/1.1 200 Connection established");
    tunnel.write_all(b"ping").await.unwrap();
    let mut reply = [0u8; 4];
    tunnel.read_exact(&mut reply).await.unwrap();
    assert_eq!(&reply, b"ping");
    // A host not listed is refused before any lookup.
    let (status, _) = connect_through(proxy.port(), &format!("other.test:{port}")).await;
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    assert_eq!(*names.asked.lock().unwrap(), ["svc.test"]);
    // Plain HTTP is not proxied.
    let mut plain = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    plain
        .write_all(b"GET http://svc.test/ HTTP/1.1\r\nHost: svc.test\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    plain.read_to_string(&mut text).await.unwrap();
    assert!(text.starts_with("HTTP/1.1 405"), "{text}");
    // A listed name that resolves to a loopback address not listed itself is refused.
    let strict = EgressProxy::start(HostAllowList::new(["rebind.test"]), names.clone()).unwrap();
    let (status, _) = connect_through(strict.port(), &format!("rebind.test:{port}")).await;
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "only the allowed tunnel arrived"
    );
}

/// What the sandboxed command tries: the tunnel, then the target directly, then UDP, then a
/// host not listed.
const PROBE: &str = r#"
import os, socket, sys
target = int(sys.argv[1])
proxy = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
def through(host):
    p = socket.create_connection(("127.0.0.1", proxy), timeout=10)
    p.sendall(b"CONNECT %s:%d HTTP/1.1\r\n\r\n" % (host, target))
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += p.recv(1)
    return head.split(b"\r\n")[0].decode(), p
status, tunnel = through(b"svc.test")
print(status)
tunnel.sendall(b"ping")
print("tunnel", tunnel.recv(4).decode())
try:
    socket.create_connection(("127.0.0.1", target), timeout=5)
    print("direct connected")
except OSError:
    print("direct blocked")
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"x", ("127.0.0.1", target))
    print("udp sent")
except OSError:
    print("udp blocked")
print(through(b"other.test")[0])
"#;

#[tokio::test]
async fn a_sandboxed_command_reaches_allowed_hosts_through_the_proxy_and_nothing_else() {
    let (target, accepted) = echo_server().await;
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("probe.py"), PROBE).unwrap();
    let policy = SandboxPolicy::workspace_write().with_allowed_hosts(["svc.test", "127.0.0.1"]);
    let sandbox = super::sandbox::sandbox(policy, home.path()).with_resolver(resolver(target));
    let tool = RunCommand::new(Workspace::new(workspace.path()).unwrap()).with_sandbox(sandbox);
    let output = super::sandbox::run(&tool, &format!("python3 probe.py {}", target.port())).await;
    assert_eq!(
        output.stdout,
        "HTTP/1.1 200 Connection established\ntunnel ping\ndirect blocked\nudp blocked\n\
         HTTP/1.1 403 Forbidden\n",
        "{output:?}"
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "only the tunnel arrived"
    );
}
