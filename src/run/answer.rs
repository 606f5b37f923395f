//! The answer pipeline: the one place a finished tool call's raw result becomes the message the
//! model reads. The driver calls [`AnswerPipeline::shape`] once per finished call, inside the
//! call's future (so the journal records the final answer before the run moves on), in this
//! order:
//!
//! 1. **Hooks** (`Hooks::after_tool_call`): they may rewrite or redact the text, so everything
//!    after sees what they left — nothing redacted is kept or shown.
//! 2. **Keep whole**: over its tool's limit (`ContextConfig::tool_output_limits`, else the
//!    cycle's) and with a spill directory set, the whole text is kept — in the run's session
//!    store when its journal keeps outputs, else in a spill file — and cut with a
//!    `read_output` marker. Before the cut, or the rest would be lost.
//! 3. **Cut to the limit**: the per-tool limit without a spill directory, then the run's
//!    [`RunRules::tool_output_limit`](crate::run::RunRules::tool_output_limit), head and tail
//!    at line boundaries with a marker naming the bytes and lines cut ([`truncate_for_model`]).
//! 4. **Media** (images, audio: [`ToolMedia`](crate::tools::ToolMedia) on the call, whatever
//!    its source): last, so the note line that says they follow (or were not shown) is never
//!    cut away, and the parts travel beside the text — a user message after the turn's tool
//!    messages — never in it.
//!
//! Answers the run gives itself (a hook's denial, the repeated-call guard, a call not run) do
//! not come through here: they are short and the run's own words.

use crate::context;
use crate::run::config::CycleConfig;
use crate::run::hooks;
use crate::run::journal::RunJournal;
use crate::tools::media::{MAX_MEDIA_BYTES, ModelMedia};
use crate::tools::outcome::CompletedCall;
use crate::vocab::{OpenaiChatMessage, ToolAnswer, ToolCall, text};

/// What shaping a finished call's answer needs besides the call.
pub(crate) struct AnswerPipeline<'a> {
    /// The hooks, the per-tool limits and the spill directory.
    pub config: &'a CycleConfig,
    /// The run's journal: where a large output is kept when it keeps outputs.
    pub journal: Option<&'a dyn RunJournal>,
    /// The run's output limit, bytes.
    pub limit: usize,
    /// Whether media reach the model as parts (else a note says they were not shown).
    pub accepts_images: bool,
}

impl AnswerPipeline<'_> {
    /// Shape `completed.answer` for the model (see the module docs), in place; returns the
    /// media message to follow the turn's tool messages, if any. `call` is the call as the
    /// model sent it (for the hooks).
    pub(crate) async fn shape(
        &self,
        call: Option<&ToolCall>,
        completed: &mut CompletedCall,
    ) -> Option<OpenaiChatMessage> {
        let answer = std::mem::take(&mut completed.answer);
        let answer = hooks::after_tool(&self.config.hooks, call, answer).await;
        let answer = keep_large(self.config, self.journal, &completed.tool_name, answer).await;
        let mut answer = truncate_answer(answer, self.limit);
        let media = std::mem::take(&mut completed.media);
        let message = match ModelMedia::of(
            &completed.tool_name,
            &completed.id,
            &media,
            self.accepts_images,
            MAX_MEDIA_BYTES,
        ) {
            Some(media) => {
                answer.content.push('\n');
                answer.content.push_str(&media.note);
                media.message
            }
            None => None,
        };
        completed.answer = answer;
        message
    }
}

/// A finished call's answer over its tool's limit: with a spill directory set (and the context
/// engine on), kept whole — in the run's session store when its journal keeps outputs, else in
/// a spill file — and cut with a `read_output` marker; without one, cut at that limit when it
/// is below the cycle's (the run's cut comes next either way).
async fn keep_large(
    config: &CycleConfig,
    journal: Option<&dyn RunJournal>,
    tool_name: &str,
    answer: ToolAnswer,
) -> ToolAnswer {
    let limit = context::spill::limit_for(&config.engine(), tool_name);
    if config.context.spill_dir.is_some() {
        if let Some(journal) = journal
            && config.context.enabled
            && answer.content.len() > limit
        {
            let id = context::spill::new_output_id();
            let (_, tail_start) = context::spill::cut_points(&answer.content, limit);
            match journal
                .keep_output(&id, &answer.content, Some(tail_start))
                .await
            {
                Some(Ok(())) => {
                    return ToolAnswer {
                        content: context::spill::cut_with_marker(&answer.content, limit, &id),
                        is_error: answer.is_error,
                    };
                }
                Some(Err(error)) => {
                    tracing::warn!(%error, "could not keep a large tool output in the session; writing a spill file");
                }
                None => {}
            }
        }
        context::spill::keep_large(&config.engine(), tool_name, answer)
    } else if limit < config.tool_output_limit {
        truncate_answer(answer, limit)
    } else {
        answer
    }
}

/// `answer` with its text cut for the model (see [`truncate_for_model`]).
pub(crate) fn truncate_answer(answer: ToolAnswer, limit: usize) -> ToolAnswer {
    ToolAnswer {
        content: truncate_for_model(answer.content, limit),
        is_error: answer.is_error,
    }
}

/// Cut `content` to about `limit` bytes for the model: its beginning (half the limit) and its
/// end (a quarter), cut at line boundaries when lines are short
/// ([`text::cut_middle_lines`]), with a marker in between saying exactly what was removed —
/// the byte and line range — and how to see it.
pub(crate) fn truncate_for_model(content: String, limit: usize) -> String {
    if content.len() <= limit {
        return content;
    }
    let cut = text::cut_middle_lines(&content, limit / 2, limit / 4);
    let (head, removed) = (cut.head(), cut.removed());
    let first_line = head.matches('\n').count() + 1;
    let last_line =
        first_line + removed.matches('\n').count() - usize::from(removed.ends_with('\n'));
    let lines = if first_line == last_line {
        format!("line {first_line}")
    } else {
        format!("lines {first_line}-{last_line}")
    };
    let newline = if head.is_empty() || head.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    format!(
        "{head}{newline}[... {} bytes cut here: bytes {}-{} of {} ({lines} of this output); the \
         output was longer than the tool output limit of {limit} bytes; re-run with narrower \
         arguments (e.g. an offset, a limit or a filter) to see them ...]\n{}",
        cut.cut_bytes(),
        cut.head_end() + 1,
        cut.tail_start(),
        content.len(),
        cut.tail(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn long_output_is_cut_with_a_marker_and_keeps_head_and_tail() {
        let content = format!("HEAD{}TAIL", "é".repeat(10_000));
        let cut = truncate_for_model(content, 1_000);
        assert!(cut.starts_with("HEAD") && cut.ends_with("TAIL"));
        assert!(cut.contains("bytes cut here"));
        assert!(cut.len() < 1_200);
        assert_eq!(truncate_for_model("short".into(), 1_000), "short");
    }

    #[test]
    fn the_cut_marker_says_exactly_which_bytes_and_lines_were_removed() {
        let content: String = (1..=1000).map(|i| format!("line {i:04}\n")).collect();
        // Each line is 10 bytes: line N spans bytes (N-1)*10 .. N*10.
        let cut = truncate_for_model(content.clone(), 1_000);
        let (head, rest) = cut.split_once("[... ").unwrap();
        let (marker, tail) = rest.split_once(" ...]\n").unwrap();
        assert!(
            content.starts_with(head) && content.ends_with(tail),
            "{cut}"
        );
        let removed_from = head.len() + 1;
        let removed_to = content.len() - tail.len();
        let first_line = head.matches('\n').count() + 1;
        let last_line = content[..removed_to].matches('\n').count();
        assert!(
            marker.contains(&format!(
                "bytes {removed_from}-{removed_to} of {}",
                content.len()
            )),
            "{marker}"
        );
        assert!(
            marker.contains(&format!("lines {first_line}-{last_line}")),
            "{marker}"
        );
        assert!(marker.contains("narrower arguments"), "{marker}");
        // The head ends and the tail starts on whole lines when lines are short.
        assert!(head.ends_with("line 0050\n"), "{head}");
        assert!(tail.starts_with("line "), "{tail}");
        assert!(cut.len() <= 1_000 + 200, "{}", cut.len());
    }
}
