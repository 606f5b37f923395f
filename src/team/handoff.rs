//! Handoffs: which agent a conversation is with ([`current_agent`]), and what the agent that
//! receives it sees ([`HandoffHistory`]).

use crate::team::Team;
use crate::team::agent::HandoffHistory;
use crate::team::tools::TRANSFER_PREFIX;
use crate::vocab::{OpenaiChatMessage, ToolCall};

/// The agent the history's last successful handoff went to (`transfer_to_<agent>` answered
/// without error), if any. A run with a team starts with it, so a stored conversation goes
/// on with the agent it was left with. (A compaction that summarised the handoff away
/// forgets it: the run then starts with the agent it names.)
pub fn current_agent(history: &[OpenaiChatMessage]) -> Option<String> {
    for (index, message) in history.iter().enumerate().rev() {
        let OpenaiChatMessage::Assistant {
            tool_calls: calls, ..
        } = message
        else {
            continue;
        };
        let answered = |call: &ToolCall| {
            history[index + 1..].iter().any(|m| {
                matches!(m, OpenaiChatMessage::Tool { tool_call_id, .. }
                    if *tool_call_id == call.id && !m.is_tool_error())
            })
        };
        if let Some(call) = calls
            .iter()
            .rev()
            .find(|call| call.function.name.starts_with(TRANSFER_PREFIX) && answered(call))
        {
            return call
                .function
                .name
                .strip_prefix(TRANSFER_PREFIX)
                .map(str::to_owned);
        }
    }
    None
}

/// The agent a run of `team` entered at `entry` is with after `history`: `entry`, moved by
/// each successful `transfer_to_<agent>` call only when the agent holding the conversation at
/// that call may hand off to that agent. `None` when no handoff counted.
///
/// This is what a run starts with. [`current_agent`] reads names only: a tool merely *named*
/// `transfer_to_x` that answered successfully (one registered before names in the handoff
/// namespace were refused, or a history written elsewhere) would move it; here, only a handoff
/// the team itself offers at that point does.
pub fn current_agent_in(team: &Team, entry: &str, history: &[OpenaiChatMessage]) -> Option<String> {
    let mut current = team.agent(entry)?;
    let mut moved = false;
    for (index, message) in history.iter().enumerate() {
        let OpenaiChatMessage::Assistant {
            tool_calls: calls, ..
        } = message
        else {
            continue;
        };
        for call in calls {
            let Some(to) = call.function.name.strip_prefix(TRANSFER_PREFIX) else {
                continue;
            };
            let answered = history[index + 1..].iter().any(|m| {
                matches!(m, OpenaiChatMessage::Tool { tool_call_id, .. }
                    if *tool_call_id == call.id && !m.is_tool_error())
            });
            if !answered || !current.handoffs().iter().any(|h| h == to) {
                continue;
            }
            if let Some(next) = team.agent(to) {
                current = next;
                moved = true;
            }
        }
    }
    moved.then(|| current.name().to_owned())
}

/// `history` as the agent receiving a handoff sees it under `filter`. The system prompt and
/// the last tool turn (the one that handed off) are always kept.
pub(crate) fn filter(
    history: Vec<OpenaiChatMessage>,
    filter: HandoffHistory,
) -> Vec<OpenaiChatMessage> {
    if filter == HandoffHistory::Full {
        return history;
    }
    let system = usize::from(matches!(
        history.first(),
        Some(OpenaiChatMessage::System { .. })
    ));
    // The handing-off turn: the last assistant message with tool calls, and what follows.
    let last_turn = history
        .iter()
        .rposition(|m| matches!(m, OpenaiChatMessage::Assistant { tool_calls: calls, .. } if !calls.is_empty()))
        .unwrap_or(history.len());
    let mut kept: Vec<OpenaiChatMessage> = history[..system].to_vec();
    let earlier = &history[system..last_turn];
    match filter {
        HandoffHistory::Full => {}
        HandoffHistory::NoToolCalls => {
            for message in earlier {
                match message {
                    OpenaiChatMessage::Tool { .. } => {}
                    OpenaiChatMessage::Assistant {
                        tool_calls: calls, ..
                    } if !calls.is_empty() => {
                        // Its text stays; its calls (and the state signed with them) go.
                        if let Some(text) = message.text().filter(|t| !t.trim().is_empty()) {
                            kept.push(OpenaiChatMessage::assistant_text(text));
                        }
                    }
                    other => kept.push(other.clone()),
                }
            }
        }
        HandoffHistory::LastUserMessage => {
            if let Some(user) = earlier
                .iter()
                .rev()
                .find(|m| matches!(m, OpenaiChatMessage::User { .. }))
            {
                kept.push(user.clone());
            }
        }
    }
    kept.extend_from_slice(&history[last_turn..]);
    kept
}
