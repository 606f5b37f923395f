//! [`EgressProxy`]: an HTTP `CONNECT` proxy on 127.0.0.1 that a sandboxed command with an
//! allow-list of hosts reaches (its only allowed TCP port), as Codex's managed proxy. It
//! tunnels to listed hosts only, never to a private or loopback address unless listed
//! ([`HostAllowList`]), and resolves names itself through a [`HostResolver`] (injectable:
//! a test points a name at a loopback server). Everything a client sends is untrusted: the
//! request head is bounded in size and time, as are the lookup and the connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::tools::sandbox::allow_list::HostAllowList;

/// The most of a request head read before it is refused.
const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request head, a lookup and a connection may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// Resolves the host names the proxy tunnels to.
#[async_trait::async_trait]
pub trait HostResolver: Send + Sync + std::fmt::Debug {
    /// The addresses of `host` (a name, not an IP literal) at `port`.
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>>;
}

/// The system's resolver (`getaddrinfo`, through tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait::async_trait]
impl HostResolver for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}

/// A running egress proxy on 127.0.0.1; it stops when this is dropped.
#[derive(Debug)]
pub struct EgressProxy {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EgressProxy {
    /// Listen on 127.0.0.1 (a free port) and tunnel to the hosts of `allowed`, resolved by
    /// `resolver`. Needs a tokio runtime (the current one serves the connections).
    pub fn start(
        allowed: HostAllowList,
        resolver: Arc<dyn HostResolver>,
    ) -> std::io::Result<EgressProxy> {
        let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let allowed = Arc::new(allowed);
        let task = runtime.spawn(async move {
            let Ok(listener) = TcpListener::from_std(listener) else {
                return;
            };
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    // Out of descriptors, say: wait rather than spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let (allowed, resolver) = (allowed.clone(), resolver.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, &allowed, resolver.as_ref()).await;
                });
            }
        });
        Ok(EgressProxy { port, task })
    }

    /// The port it listens on (on 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its URL, for `HTTPS_PROXY` and `HTTP_PROXY`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// One client: its `CONNECT host:port`, checked, then bytes both ways until either side ends.
async fn serve(
    mut client: TcpStream,
    allowed: &HostAllowList,
    resolver: &dyn HostResolver,
) -> std::io::Result<()> {
    let (head, rest) = match tokio::time::timeout(STEP_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(read)) => read,
        Ok(Err(_)) | Err(_) => return refuse(&mut client, 400, "no request head in time").await,
    };
    let (host, port) = match parse_connect(&head) {
        Ok(target) => target,
        Err((status, why)) => return refuse(&mut client, status, why).await,
    };
    if !allowed.allows_host(&host) {
        let why = format!("{host} is not on the sandbox's list of allowed hosts");
        return refuse(&mut client, 403, &why).await;
    }
    let addresses = match host.parse::<std::net::IpAddr>() {
        Ok(address) => vec![SocketAddr::new(address, port)],
        Err(_) => match tokio::time::timeout(STEP_TIMEOUT, resolver.resolve(&host, port)).await {
            Ok(Ok(addresses)) => addresses,
            Ok(Err(_)) | Err(_) => {
                return refuse(&mut client, 502, &format!("{host} could not be resolved")).await;
            }
        },
    };
    let reachable: Vec<SocketAddr> = addresses
        .into_iter()
        .filter(|address| allowed.allows_address(address.ip()))
        .collect();
    if reachable.is_empty() {
        let why = format!("{host} resolves to a private or loopback address that is not listed");
        return refuse(&mut client, 403, &why).await;
    }
    let connect = tokio::time::timeout(STEP_TIMEOUT, TcpStream::connect(&reachable[..])).await;
    let Ok(Ok(mut upstream)) = connect else {
        return refuse(
            &mut client,
            502,
            &format!("{host}:{port} could not be reached"),
        )
        .await;
    };
    client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    // What the client sent after its head already belongs to the tunnel.
    upstream.write_all(&rest).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// The request head (through the blank line) and whatever followed it in the same reads.
async fn read_head(client: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let read = client.read(&mut chunk).await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buffer.extend_from_slice(&chunk[..read]);
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            let rest = buffer.split_off(end + 4);
            return Ok((String::from_utf8_lossy(&buffer).into_owned(), rest));
        }
        if buffer.len() > MAX_HEAD {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
    }
}

/// `CONNECT host:port HTTP/1.x` → the host (lowercase, IPv6 without brackets) and port.
fn parse_connect(head: &str) -> Result<(String, u16), (u16, &'static str)> {
    let line = head.lines().next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err((400, "a malformed request line"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err((400, "a malformed request line"));
    }
    if method != "CONNECT" {
        return Err((
            405,
            "only CONNECT (HTTPS) goes through the sandbox's proxy; plain HTTP does not",
        ));
    }
    let (host, port) = target
        .rsplit_once(':')
        .ok_or((400, "CONNECT needs host:port"))?;
    let port = port
        .parse::<u16>()
        .map_err(|_| (400, "CONNECT needs host:port"))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    if host.is_empty() || host.len() > 253 {
        return Err((400, "CONNECT needs host:port"));
    }
    Ok((host, port))
}

async fn refuse(client: &mut TcpStream, status: u16, why: &str) -> std::io::Result<()> {
    let reason = match status {
        403 => "Forbidden",
        405 => "Method Not Allowed",
        502 => "Bad Gateway",
        _ => "Bad Request",
    };
    let body = format!("agcore sandbox proxy: {why}\n");
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_lines_parse_and_others_are_refused() {
        assert_eq!(
            parse_connect("CONNECT Example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(("example.com".to_owned(), 443))
        );
        assert_eq!(
            parse_connect("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n"),
            Ok(("::1".to_owned(), 8443))
        );
        assert_eq!(
            parse_connect("GET http://a/ HTTP/1.1\r\n\r\n")
                .unwrap_err()
                .0,
            405
        );
        assert_eq!(
            parse_connect("CONNECT a HTTP/1.1\r\n\r\n").unwrap_err().0,
            400
        );
        assert_eq!(parse_connect("garbage").unwrap_err().0, 400);
    }
}
