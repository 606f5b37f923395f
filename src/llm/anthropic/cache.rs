//! The prompt-cache breakpoint planner: where a request puts its (at most 4)
//! `cache_control: {"type": "ephemeral"}` markers.
//!
//! Anthropic caches the prefix of a request up to a marked block (tools, then system, then
//! messages, in that order) and a later request reads it back when its prefix up to one of its
//! own markers is identical. The planner marks:
//!
//! 1. the last tool definition (the tools rarely change within a run);
//! 2. the last system block;
//! 3. the last message of the previous request: the last user message before the newest
//!    assistant reply (in a tool loop, the previous tool results) — a marker the previous
//!    request also set, on the very same prefix, so this request reads what that one wrote;
//! 4. the newest message: written now, read by the next request through its marker 3.
//!
//! The positions depend only on the shape of the request, so they are stable from call to call
//! and the prefix hashes match. Compaction rewrites the history and loses the cached message
//! prefix (the tools and system markers still hit).

/// Anthropic's limit on markers per request.
pub(crate) const MAX_BREAKPOINTS: usize = 4;

/// The role of a wire message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// `user` (tool results included).
    User,
    /// `assistant`.
    Assistant,
}

/// Where the markers go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Breakpoints {
    /// The last tool, when there are tools.
    pub(crate) tools: bool,
    /// The last system block, when there is a system prompt.
    pub(crate) system: bool,
    /// Indexes of the messages whose last block is marked, oldest first.
    pub(crate) messages: Vec<usize>,
}

/// The breakpoints of a request with `tools` tool definitions, `system_blocks` system blocks
/// and messages of `roles`.
pub(crate) fn plan(tools: usize, system_blocks: usize, roles: &[Role]) -> Breakpoints {
    let mut plan = Breakpoints {
        tools: tools > 0,
        system: system_blocks > 0,
        messages: Vec::new(),
    };
    let Some(newest) = roles.len().checked_sub(1) else {
        return plan;
    };
    let previous_end = roles
        .iter()
        .rposition(|role| *role == Role::Assistant)
        .and_then(|reply| roles[..reply].iter().rposition(|role| *role == Role::User));
    plan.messages
        .extend(previous_end.filter(|at| *at != newest));
    plan.messages.push(newest);
    let fixed = usize::from(plan.tools) + usize::from(plan.system);
    let room = MAX_BREAKPOINTS.saturating_sub(fixed);
    let extra = plan.messages.len().saturating_sub(room);
    plan.messages.drain(..extra);
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use Role::{Assistant as A, User as U};

    #[test]
    fn a_first_request_marks_tools_system_and_the_message() {
        assert_eq!(
            plan(3, 1, &[U]),
            Breakpoints {
                tools: true,
                system: true,
                messages: vec![0]
            }
        );
        assert_eq!(plan(0, 0, &[]), Breakpoints::default());
    }

    #[test]
    fn a_tool_loop_marks_the_previous_end_and_the_newest_message() {
        // [user, assistant calls, user results]: the previous request ended at 0.
        assert_eq!(plan(1, 1, &[U, A, U]).messages, vec![0, 2]);
        assert_eq!(plan(1, 1, &[U, A, U, A, U]).messages, vec![2, 4]);
        // A prefilled assistant message is the newest.
        assert_eq!(plan(0, 0, &[U, A]).messages, vec![0, 1]);
    }

    #[test]
    fn the_markers_are_stable_from_one_request_to_the_next() {
        // What request n marks as newest, request n + 1 marks as the previous end.
        let mut roles = vec![U];
        for _ in 0..10 {
            let before = plan(2, 1, &roles);
            roles.extend([A, U]);
            let after = plan(2, 1, &roles);
            assert_eq!(before.messages.last(), after.messages.first());
        }
    }

    #[test]
    fn never_more_than_four() {
        for tools in [0, 1] {
            for system in [0, 1] {
                let plan = plan(tools, system, &[U, A, U, A, U]);
                let count =
                    usize::from(plan.tools) + usize::from(plan.system) + plan.messages.len();
                assert!(count <= MAX_BREAKPOINTS);
                assert_eq!(plan.messages.last(), Some(&4));
            }
        }
    }
}
