//! How a session starts: `initialize` for the protocol versions that have it (up to
//! 2025-11-25), `server/discover` for 2026-07-28 and later, which have no handshake — every
//! request carries its version and capabilities. Chosen by the configured protocol version
//! ([`McpClient::with_protocol_version`](crate::tools::mcp::McpClient::with_protocol_version)).

use rmcp::ClientLifecycleMode;
use rmcp::model::ProtocolVersion;

/// The first protocol version without `initialize` (dates compare as text).
const FIRST_STATELESS: &str = "2026-07-28";

/// The lifecycle for `version` (checked to parse when the connection opens).
pub(crate) fn mode(version: &str) -> ClientLifecycleMode {
    let parsed = serde_json::from_value::<ProtocolVersion>(serde_json::Value::from(version));
    match parsed {
        Ok(parsed) if is_stateless(version) => ClientLifecycleMode::Discover {
            preferred_versions: vec![parsed],
        },
        _ => ClientLifecycleMode::Initialize,
    }
}

/// Whether `version` is a stateless one (2026-07-28 or later), with the tasks extension.
pub(crate) fn is_stateless(version: &str) -> bool {
    version >= FIRST_STATELESS
}
