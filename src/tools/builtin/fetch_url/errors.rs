//! Why a `fetch_url` request failed, in words a model can act on: the DNS name that did not
//! resolve, the address that refused the connection, the TLS failure, the blocked address and
//! its rule, the limit that was hit — found by walking reqwest's error source chain, since
//! reqwest's own text is only "error sending request for url (…)".

use std::error::Error as StdError;
use std::io;
use std::time::Duration;

use crate::tools::builtin::net_guard::{self, DnsFailure};

use super::dial::DialRefused;
use crate::tools::error::ToolError;
use crate::tools::recheck::RecheckRefusal;

use super::{failed, refused};

/// A redirect chain longer than the limit.
#[derive(Debug, thiserror::Error)]
#[error("stopped after {limit} redirects (the limit), at {url}")]
pub(super) struct TooManyRedirects {
    pub limit: usize,
    pub url: String,
}

/// `host:port` of `url`, as the connection saw it.
fn authority(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

/// Every message in the chain below `error`, joined — for the cases without a better word.
fn chain(error: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    for error in net_guard::causes(error).skip(1) {
        let text = error.to_string();
        // hyper and reqwest repeat their sources' text in their own; keep each once.
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

/// The kind of the innermost I/O error in the chain that says more than `Other`
/// (hyper wraps the TLS stream's `InvalidData` in an `Other`).
fn io_kind(error: &(dyn StdError + 'static)) -> Option<io::ErrorKind> {
    let kinds = net_guard::causes(error)
        .filter_map(|error| error.downcast_ref::<io::Error>())
        .map(io::Error::kind);
    kinds.fold(None, |found, kind| match (found, kind) {
        (Some(found), io::ErrorKind::Other) => Some(found),
        _ => Some(kind),
    })
}

/// The [`ToolError`] for a failed request to `url` (`connect_timeout`: the client's limit).
pub(super) fn describe(
    url: &reqwest::Url,
    error: &reqwest::Error,
    connect_timeout: Duration,
) -> ToolError {
    let at = authority(url);
    if let Some(refusal) = net_guard::find_refusal(error) {
        return refused(&refusal);
    }
    if let Some(refusal) = net_guard::find_in_chain::<RecheckRefusal>(error) {
        return ToolError::DeniedByRule {
            tool: "fetch_url".to_owned(),
            because: format!("the redirect to {refusal}"),
        };
    }
    if let Some(dial) = net_guard::find_in_chain::<DialRefused>(error) {
        return ToolError::PermissionDenied("fetch_url".to_owned(), format!("GET {url}: {dial}"));
    }
    if let Some(dns) = net_guard::find_in_chain::<DnsFailure>(error) {
        return failed(format!(
            "GET {url} failed: DNS: {dns}. Check the host name for typos; the name may not \
             exist, or this machine has no DNS or network access"
        ));
    }
    if let Some(redirects) = net_guard::find_in_chain::<TooManyRedirects>(error) {
        return failed(format!(
            "GET {url} failed: {redirects}; the server redirects in a loop or too often"
        ));
    }
    if error.is_connect() && error.is_timeout() {
        return failed(format!(
            "GET {url} failed: connecting to {at} timed out after {connect_timeout:?} (the \
             connect timeout); the host is down, unreachable, or drops packets"
        ));
    }
    match io_kind(error) {
        Some(io::ErrorKind::ConnectionRefused) => {
            return failed(format!(
                "GET {url} failed: connection refused by {at}: nothing is listening on that \
                 port (is the server running, is the port right?)"
            ));
        }
        Some(io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted) => {
            return failed(format!(
                "GET {url} failed: {at} reset the connection ({})",
                chain(error)
            ));
        }
        Some(io::ErrorKind::HostUnreachable | io::ErrorKind::NetworkUnreachable) => {
            return failed(format!(
                "GET {url} failed: {at} is unreachable from this machine ({})",
                chain(error)
            ));
        }
        _ => {}
    }
    // rustls failures reach us as `InvalidData` I/O errors from the TLS stream.
    if url.scheme() == "https"
        && error.is_connect()
        && io_kind(error).is_none_or(|kind| kind == io::ErrorKind::InvalidData)
    {
        return failed(format!(
            "GET {url} failed: the TLS handshake with {at} failed ({}); the server may not \
             speak HTTPS on this port, or its certificate is not valid for this name",
            chain(error)
        ));
    }
    let what = if error.is_connect() {
        format!("could not connect to {at}")
    } else if error.is_body() || error.is_decode() {
        "reading the response failed".to_owned()
    } else {
        "the request failed".to_owned()
    };
    failed(format!("GET {url} failed: {what}: {}", chain(error)))
}
