//! `session/load`: the stored conversation as the updates that first showed it — the user's
//! messages, the agent's text and reasoning, each tool call with what its tool reported
//! (journaled updates: title, content, diffs) and its final state — through the same mapping as
//! a live turn ([`TurnUpdates`]), from the library's replay events.

use agcore::llm::OpenaiChatMessage;
use agcore::run::replay::replay_with_updates;
use agcore::session::StoredCallUpdate;

use super::turn_updates::TurnUpdates;

/// Send the updates that replay `history` with its calls' stored `updates` (system messages
/// are not shown).
pub fn send(history: &[OpenaiChatMessage], updates: &[StoredCallUpdate], to: &mut TurnUpdates<'_>) {
    for message in history {
        match message {
            OpenaiChatMessage::User { content, .. } => to.user_message(content.text()),
            OpenaiChatMessage::Assistant { .. } | OpenaiChatMessage::Tool { .. } => {
                for event in replay_with_updates(std::slice::from_ref(message), updates) {
                    to.event(event, None);
                }
            }
            _ => {}
        }
    }
}
