//! Where `fetch_url` connects, made injectable: a [`HostLookup`] that resolves host names
//! instead of the system's resolver, and a [`DialCheck`] that sees every address before a
//! connection is made to it — after `fetch_url`'s own guard, so it holds even if the guard
//! is off or wrong. [`LoopbackOnly`] is the check tests use: nothing but 127.0.0.0/8 and ::1.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

/// Resolves host names for `fetch_url` ([`super::FetchUrl::with_lookup`]) instead of the
/// system's resolver. Called on a blocking thread.
pub trait HostLookup: Send + Sync + fmt::Debug {
    /// The addresses of `host` (ports are ignored: the URL's port is used).
    ///
    /// # Errors
    /// The name does not resolve (reported as a DNS failure naming the host).
    fn lookup(&self, host: &str) -> io::Result<Vec<SocketAddr>>;
}

/// A check before every connection `fetch_url` makes ([`super::FetchUrl::with_dial_check`]):
/// the addresses a host name resolved to (after the non-public filter), or an IP literal of
/// the URL or of a redirect hop with its port. Refusing means nothing is sent to them.
pub trait DialCheck: Send + Sync + fmt::Debug {
    /// `Ok` to connect to `addrs` for `host`; `Err(reason)` to refuse.
    ///
    /// # Errors
    /// The connection must not be made; the reason is part of the call's error.
    fn check(&self, host: &str, addrs: &[SocketAddr]) -> Result<(), String>;
}

/// A [`DialCheck`] that allows loopback only (127.0.0.0/8, ::1) and records every other
/// address it refused — for tests, which must never send a packet beyond the machine even
/// when the code under test is wrong. Assert [`LoopbackOnly::refused`] is empty at the end.
#[derive(Debug, Default)]
pub struct LoopbackOnly {
    refused: Mutex<Vec<(String, IpAddr)>>,
}

impl LoopbackOnly {
    /// A new check, shared with the tool and the test.
    pub fn new() -> Arc<Self> {
        Arc::new(LoopbackOnly::default())
    }

    /// Every (host, address) refused so far: each is a connection the code under test tried
    /// to make beyond loopback.
    pub fn refused(&self) -> Vec<(String, IpAddr)> {
        self.refused
            .lock()
            .map(|refused| refused.clone())
            .unwrap_or_default()
    }
}

impl DialCheck for LoopbackOnly {
    fn check(&self, host: &str, addrs: &[SocketAddr]) -> Result<(), String> {
        let outside: Vec<IpAddr> = addrs
            .iter()
            .map(SocketAddr::ip)
            .filter(|ip| !ip.is_loopback())
            .collect();
        if outside.is_empty() {
            return Ok(());
        }
        if let Ok(mut refused) = self.refused.lock() {
            refused.extend(outside.iter().map(|ip| (host.to_owned(), *ip)));
        }
        Err(format!(
            "a dial to {outside:?} for '{host}' was stopped: only loopback may be reached"
        ))
    }
}

/// A [`DialCheck`] refused the addresses of a host name.
#[derive(Debug, thiserror::Error)]
#[error("the connection to '{host}' was refused by the dial check: {reason}")]
pub(crate) struct DialRefused {
    pub host: String,
    pub reason: String,
}

/// Where a request for an IP literal the check refuses is sent instead: a loopback port
/// nothing listens on (a proxy that cannot be reached), so nothing leaves the machine.
pub(crate) const NOWHERE: &str = "http://127.0.0.1:1";

/// The proxy rule that applies `check` to IP-literal destinations (host names are checked in
/// the resolver): a refused one is routed to [`NOWHERE`].
pub(crate) fn literal_trap(check: Arc<dyn DialCheck>) -> reqwest::Proxy {
    reqwest::Proxy::custom(move |url: &reqwest::Url| {
        let ip = match url.host()? {
            url::Host::Ipv4(ip) => IpAddr::V4(ip),
            url::Host::Ipv6(ip) => IpAddr::V6(ip),
            url::Host::Domain(_) => return None,
        };
        let port = url.port_or_known_default().unwrap_or(0);
        let host = url.host_str().unwrap_or_default();
        match check.check(host, &[SocketAddr::new(ip, port)]) {
            Ok(()) => None,
            Err(reason) => {
                tracing::warn!(host, %reason, "fetch_url: the dial check refused a connection");
                Some(NOWHERE)
            }
        }
    })
}
