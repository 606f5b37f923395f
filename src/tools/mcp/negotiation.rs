//! Which protocol generation agcore speaks to a server: the stateless 2026-07-28 protocol
//! (`server/discover`, every request carrying its version and capabilities in `_meta`) or the
//! `initialize` handshake of 2025-11-25 and earlier.

use rmcp::model::ProtocolVersion;
use rmcp::service::ClientLifecycleMode;

/// The newest protocol version agcore speaks (stateless, no `initialize`).
pub const STATELESS_PROTOCOL_VERSION: &str = "2026-07-28";

/// How agcore opens a session with a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum McpNegotiation {
    /// Over HTTP, ask with `server/discover` for 2026-07-28; a server that does not know it
    /// (it answers with a JSON-RPC error, or an HTTP error before any session exists) gets the
    /// `initialize` handshake with the configured version (2025-11-25 by default, or the
    /// 2025-06-18 / 2025-03-26 it negotiates down to). Over stdio, the handshake: the server
    /// is one process per client, so a session costs nothing, and the session's features
    /// (list-changed notifications, subscriptions, server requests) keep working.
    #[default]
    Auto,
    /// Only the `initialize` handshake (for a server that mishandles `server/discover`).
    Initialize,
    /// Only 2026-07-28 (also over stdio): a server that does not speak it is an error.
    Stateless,
}

impl McpNegotiation {
    /// The rmcp lifecycle for this choice, with `legacy` the version `initialize` offers, over
    /// stdio or HTTP.
    ///
    /// A configured version of 2026-07-28 or later has no handshake, so it means
    /// [`Stateless`](Self::Stateless) whatever was chosen.
    pub(crate) fn lifecycle(self, legacy: &ProtocolVersion, stdio: bool) -> ClientLifecycleMode {
        let stateless = vec![ProtocolVersion::V_2026_07_28];
        if !legacy.has_initialize() {
            return ClientLifecycleMode::Discover {
                preferred_versions: stateless,
            };
        }
        match self {
            McpNegotiation::Auto if stdio => ClientLifecycleMode::Initialize,
            McpNegotiation::Auto => ClientLifecycleMode::Auto {
                preferred_versions: stateless,
                legacy_version: Some(legacy.clone()),
            },
            McpNegotiation::Initialize => ClientLifecycleMode::Initialize,
            McpNegotiation::Stateless => ClientLifecycleMode::Discover {
                preferred_versions: stateless,
            },
        }
    }

    /// The other lifecycle to try over a fresh HTTP connection when the first failed at the
    /// transport level (a legacy HTTP server that answers `server/discover` with a plain
    /// `400`): only after an `Auto` probe.
    pub(crate) fn http_fallback(self, legacy: &ProtocolVersion) -> Option<ClientLifecycleMode> {
        (self == McpNegotiation::Auto && legacy.has_initialize())
            .then_some(ClientLifecycleMode::Initialize)
    }
}

/// Whether `version` is a stateless (2026-07-28 or later) protocol version.
pub fn is_stateless_version(version: &str) -> bool {
    version >= STATELESS_PROTOCOL_VERSION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_probes_http_then_offers_the_configured_legacy_version() {
        let legacy = ProtocolVersion::V_2025_06_18;
        assert_eq!(
            McpNegotiation::Auto.lifecycle(&legacy, true),
            ClientLifecycleMode::Initialize
        );
        assert_eq!(
            McpNegotiation::Auto.lifecycle(&legacy, false),
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_06_18),
            }
        );
        assert_eq!(
            McpNegotiation::Auto.http_fallback(&legacy),
            Some(ClientLifecycleMode::Initialize)
        );
        assert_eq!(McpNegotiation::Stateless.http_fallback(&legacy), None);
    }

    #[test]
    fn a_stateless_version_never_initializes() {
        let modern = ProtocolVersion::V_2026_07_28;
        for negotiation in [
            McpNegotiation::Auto,
            McpNegotiation::Initialize,
            McpNegotiation::Stateless,
        ] {
            assert!(matches!(
                negotiation.lifecycle(&modern, true),
                ClientLifecycleMode::Discover { .. }
            ));
            assert_eq!(negotiation.http_fallback(&modern), None);
        }
        assert!(is_stateless_version("2026-07-28"));
        assert!(!is_stateless_version("2025-11-25"));
    }
}
