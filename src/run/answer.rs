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
use crate::vocab::{OpenaiChatMessage, ToolAnswer, ToolCall, truncate_answer};

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
