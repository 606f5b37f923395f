//! [`Agent`]: what every session of an endpoint runs with — the model and its configuration
//! (a template conversation) and the tools.

use std::sync::Arc;

use agcore::run::Conversation;
#[cfg(doc)]
use agcore::tools::DeferAll;
use agcore::tools::ToolRegistry;

/// The agent an endpoint serves: each session's run uses its model, configuration, system
/// prompt and tools.
pub struct Agent {
    template: Conversation,
    registry: ToolRegistry,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("template", &self.template)
            .field("tools", &self.registry.list_tools())
            .finish()
    }
}

impl Agent {
    /// An agent with `template`'s model, configuration and system prompt (its history is
    /// where a new session starts) and `registry`'s tools. A call the registry's approver
    /// defers waits for the `approve` handler: give the registry [`DeferAll`] as its approver
    /// to have every call that needs approval wait.
    pub fn new(template: Conversation, registry: ToolRegistry) -> Arc<Self> {
        Arc::new(Agent { template, registry })
    }

    /// The template conversation.
    pub(crate) fn template(&self) -> &Conversation {
        &self.template
    }

    /// The tools.
    pub(crate) fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// Whether `tool` may run again after a crash cut it off.
    pub(crate) fn idempotent(&self, tool: &str) -> bool {
        self.registry.is_idempotent(tool)
    }
}
