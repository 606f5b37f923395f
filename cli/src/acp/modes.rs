//! Session modes: agcore's tool profiles (`ask`, `write`, `minimal` and the config's own),
//! switched with `session/set_mode`. A mode only narrows what the model is offered; the
//! permission rules, restricted mode and approvals apply in every mode.

use agcore::tools::{ToolRegistry, ToolsConfig};
use agent_client_protocol::v1::schema as acp;

/// The mode that keeps the configured profile (or none: every tool).
pub const DEFAULT_MODE: &str = "default";

/// The built-in profiles and what they offer.
const BUILT_IN: [(&str, &str); 3] = [
    ("ask", "Read-only tools: reads and searches"),
    ("write", "Every tool (writes and commands still ask)"),
    ("minimal", "No tools"),
];

/// The modes a session offers, the current one first chosen by the config's profile.
pub fn state(tools: &ToolsConfig, current: &str) -> acp::SessionModeState {
    let mut modes = vec![
        acp::SessionMode::new(DEFAULT_MODE, "Default")
            .description("The configured profile".to_owned()),
    ];
    for (id, description) in BUILT_IN {
        if !tools.profiles.contains_key(id) {
            modes.push(acp::SessionMode::new(id, id).description(description.to_owned()));
        }
    }
    for (id, profile) in &tools.profiles {
        modes.push(
            acp::SessionMode::new(id.clone(), id.clone()).description(profile.description.clone()),
        );
    }
    acp::SessionModeState::new(current.to_owned(), modes)
}

/// Whether `mode` is one of the session's modes.
pub fn exists(tools: &ToolsConfig, mode: &str) -> bool {
    mode == DEFAULT_MODE
        || BUILT_IN.iter().any(|(id, _)| *id == mode)
        || tools.profiles.contains_key(mode)
}

/// `registry` offering what `mode` selects.
pub fn apply(
    tools: &ToolsConfig,
    registry: ToolRegistry,
    mode: &str,
) -> Result<ToolRegistry, agcore::tools::exposure::ExposureError> {
    let mut selected = tools.clone();
    if mode != DEFAULT_MODE {
        selected.profile = Some(mode.to_owned());
    }
    Ok(registry.with_exposure(selected.exposure_policy()?))
}
