//! [`DpopBinding`]: one MCP server's DPoP state — the key its tokens are bound to, the latest
//! nonce each origin (authorization server, MCP server) handed out, and whether the current
//! access token is DPoP-bound (`token_type: DPoP`) or a plain bearer token.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::tools::mcp::auth::dpop::{DpopError, DpopKey};

/// The response header a server hands a nonce out in (RFC 9449 §8, §9).
pub(crate) const DPOP_NONCE_HEADER: &str = "DPoP-Nonce";
/// The request header a proof travels in (`DPoP`; lower case as `HeaderName` spells it).
pub(crate) const DPOP_HEADER: &str = "dpop";
/// The error code of a challenge asking for a proof with the server's nonce.
pub(crate) const USE_DPOP_NONCE: &str = "use_dpop_nonce";
/// A nonce longer than this is not kept (servers use a few dozen bytes).
const MAX_NONCE_BYTES: usize = 1024;
/// Origins remembered at once; more means a misbehaving server, and forgetting only costs a
/// nonce round trip.
const MAX_ORIGINS: usize = 16;

/// One server's DPoP key, nonces and token binding, shared by its token requests and its MCP
/// requests.
#[derive(Debug)]
pub(crate) struct DpopBinding {
    key: DpopKey,
    nonces: Mutex<HashMap<String, String>>,
    bound: AtomicBool,
}

impl DpopBinding {
    pub(crate) fn new(key: DpopKey) -> Self {
        DpopBinding {
            key,
            nonces: Mutex::new(HashMap::new()),
            bound: AtomicBool::new(false),
        }
    }

    /// The key.
    pub(crate) fn key(&self) -> &DpopKey {
        &self.key
    }

    /// Whether the current access token is DPoP-bound (sent as `Authorization: DPoP`).
    pub(crate) fn is_bound(&self) -> bool {
        self.bound.load(Ordering::Acquire)
    }

    /// Record the `token_type` of the token just obtained.
    pub(crate) fn set_token_type(&self, token_type: &str) {
        self.bound
            .store(token_type.eq_ignore_ascii_case("dpop"), Ordering::Release);
    }

    /// A fresh proof for `method` `url` with the latest nonce of the URL's origin.
    pub(crate) fn proof(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
    ) -> Result<String, DpopError> {
        let nonce = self.nonce(url);
        self.key.proof(method, url, access_token, nonce.as_deref())
    }

    /// The latest nonce `url`'s origin gave, if any.
    pub(crate) fn nonce(&self, url: &str) -> Option<String> {
        let origin = origin(url)?;
        self.nonces
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&origin)
            .cloned()
    }

    /// Keep `value` (a `DPoP-Nonce` header of a response from `url`) as its origin's nonce;
    /// `false` when it is not a valid nonce (RFC 9449: 1*NQCHAR), which is then ignored.
    pub(crate) fn remember_nonce(&self, url: &str, value: &[u8]) -> bool {
        let valid = !value.is_empty()
            && value.len() <= MAX_NONCE_BYTES
            && value
                .iter()
                .all(|&b| b == 0x21 || (0x23..=0x5B).contains(&b) || (0x5D..=0x7E).contains(&b));
        let (true, Some(origin)) = (valid, origin(url)) else {
            return false;
        };
        let nonce = String::from_utf8_lossy(value).into_owned();
        let mut nonces = self.nonces.lock().unwrap_or_else(|p| p.into_inner());
        if nonces.len() >= MAX_ORIGINS && !nonces.contains_key(&origin) {
            nonces.clear();
        }
        nonces.insert(origin, nonce);
        true
    }
}

/// Whether a `WWW-Authenticate` value is a DPoP challenge asking for the server's nonce
/// (`DPoP error="use_dpop_nonce"`, RFC 9449 §9).
pub(crate) fn asks_for_nonce(www_authenticate: &str) -> bool {
    let lower = www_authenticate.to_ascii_lowercase();
    lower.trim_start().starts_with("dpop")
        && (lower.contains(&format!("error=\"{USE_DPOP_NONCE}\""))
            || lower.contains(&format!("error={USE_DPOP_NONCE}")))
}

/// The origin of `url` (`scheme://host:port`), the scope of a nonce.
fn origin(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let origin = parsed.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_are_kept_per_origin_and_only_when_valid() {
        let binding = DpopBinding::new(DpopKey::generate().unwrap());
        assert!(binding.remember_nonce("http://127.0.0.1:1/token", b"as-nonce"));
        assert!(binding.remember_nonce("http://127.0.0.1:2/mcp?x", b"rs-nonce"));
        assert_eq!(
            binding.nonce("http://127.0.0.1:1/other").as_deref(),
            Some("as-nonce")
        );
        assert_eq!(
            binding.nonce("http://127.0.0.1:2/mcp").as_deref(),
            Some("rs-nonce")
        );
        assert!(!binding.remember_nonce("http://127.0.0.1:2/mcp", b"has space"));
        assert!(!binding.remember_nonce("http://127.0.0.1:2/mcp", b"quote\""));
        assert!(!binding.remember_nonce("http://127.0.0.1:2/mcp", b""));
        assert!(!binding.remember_nonce("http://127.0.0.1:2/mcp", &[b'a'; 1025]));
        assert_eq!(
            binding.nonce("http://127.0.0.1:2/mcp").as_deref(),
            Some("rs-nonce")
        );
        for port in 10..40 {
            assert!(binding.remember_nonce(&format!("http://127.0.0.1:{port}/"), b"n"));
        }
        assert!(binding.nonces.lock().unwrap().len() <= MAX_ORIGINS);
    }

    #[test]
    fn the_token_type_decides_the_binding() {
        let binding = DpopBinding::new(DpopKey::generate().unwrap());
        assert!(!binding.is_bound());
        binding.set_token_type("DPoP");
        assert!(binding.is_bound());
        binding.set_token_type("Bearer");
        assert!(!binding.is_bound());
    }

    #[test]
    fn only_a_dpop_use_dpop_nonce_challenge_asks_for_a_nonce() {
        assert!(asks_for_nonce(
            r#"DPoP error="use_dpop_nonce", resource_metadata="http://x/.well-known/oauth-protected-resource""#
        ));
        assert!(asks_for_nonce("dpop algs=\"ES256\", error=use_dpop_nonce"));
        assert!(!asks_for_nonce(r#"DPoP resource_metadata="http://x""#));
        assert!(!asks_for_nonce(r#"Bearer error="invalid_token""#));
    }
}
