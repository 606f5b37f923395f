//! Sampling on the command line: a server's `sampling/createMessage` is answered by the
//! session's model — only for servers whose config entry says `"allowSampling": true`, only
//! after the user approves each request in the terminal (no terminal: no sampler, so agcore
//! does not offer sampling and refuses any request), and within the server's token budget
//! (`samplingTokenBudget`, default [`DEFAULT_TOKEN_BUDGET`]) for the session. `--yes` does not
//! approve sampling: it approves tool calls.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use agcore::display::{escape_for_terminal, escape_keeping_lines};
use agcore::llm::types::{FinishReason, OpenaiChatMessage, RequestOptions};
use agcore::llm::{ChatModel, ChatRequest};
use agcore::tools::mcp::{
    McpClient, McpServerConfig, Sampler, SamplingReply, SamplingRequest, SamplingRole,
};
use async_trait::async_trait;
use rustyline::error::ReadlineError;
use tokio::sync::Mutex;

use crate::approve::raise_interrupt;
use crate::render::without_spinner;

/// The tokens (prompt and answer, as the model reports them) a server may spend on sampling in
/// one session when its entry does not say.
pub const DEFAULT_TOKEN_BUDGET: u32 = 4096;

/// The most bytes of each server message shown in the approval question.
const SHOWN_BYTES: usize = 2000;

/// The session's model, once the command has built it (commands without one refuse sampling).
static MODEL: OnceLock<(Arc<dyn ChatModel>, String)> = OnceLock::new();

/// Offer `client` / `model` (the session's) to servers allowed to sample.
pub fn offer_model(client: &Arc<dyn ChatModel>, model: &str) {
    let _ = MODEL.set((client.clone(), model.to_owned()));
}

/// `client` with a terminal sampler when its entry allows sampling and there is a terminal.
pub fn interactive(client: McpClient, entry: Option<&McpServerConfig>) -> McpClient {
    let Some(entry) = entry.filter(|entry| entry.allow_sampling) else {
        return client;
    };
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return client;
    }
    let budget = entry.sampling_token_budget.unwrap_or(DEFAULT_TOKEN_BUDGET);
    client.with_sampler(Arc::new(TerminalSampler::new(budget)))
}

/// Asks in the terminal, then calls the session's model, within a token budget.
#[derive(Debug)]
pub struct TerminalSampler {
    budget: u32,
    used: AtomicU32,
    one_at_a_time: Mutex<()>,
}

impl TerminalSampler {
    /// A sampler that may spend `budget` tokens.
    pub fn new(budget: u32) -> Self {
        TerminalSampler {
            budget,
            used: AtomicU32::new(0),
            one_at_a_time: Mutex::new(()),
        }
    }
}

#[async_trait]
impl Sampler for TerminalSampler {
    async fn sample(&self, request: &SamplingRequest) -> Result<SamplingReply, String> {
        let _turn = self.one_at_a_time.lock().await;
        let Some((model, name)) = MODEL.get() else {
            return Err("sampling is not available: this command has no model".into());
        };
        let left = self
            .budget
            .saturating_sub(self.used.load(Ordering::Relaxed));
        if left == 0 {
            return Err(format!(
                "the sampling budget of {} tokens for this server is spent",
                self.budget
            ));
        }
        let max_tokens = request.max_tokens.min(left);
        if !approved(request, max_tokens).await {
            return Err("the user refused the sampling request".into());
        }
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        messages.extend(request.system_prompt.clone().map(OpenaiChatMessage::system));
        messages.extend(request.messages.iter().map(|turn| match turn.role {
            SamplingRole::User => OpenaiChatMessage::user_text(turn.text.clone()),
            SamplingRole::Assistant => OpenaiChatMessage::assistant_text(turn.text.clone()),
        }));
        let options = RequestOptions {
            max_tokens: Some(max_tokens),
            temperature: request.temperature,
            stop: (!request.stop_sequences.is_empty()).then(|| request.stop_sequences.clone()),
            ..RequestOptions::default()
        };
        let reply = model
            .chat(ChatRequest {
                model: name,
                messages: &messages,
                tools: &[],
                options: &options,
            })
            .await
            .map_err(|error| format!("the model failed: {error}"))?;
        // What the model reports; without a report, the most it may have used.
        let spent = reply
            .usage
            .map(|usage| u32::try_from(usage.total_tokens).unwrap_or(u32::MAX))
            .unwrap_or(max_tokens);
        self.used.fetch_add(spent.min(left), Ordering::Relaxed);
        let text = reply.message.text().unwrap_or_default();
        eprintln!(
            "\r\x1b[K  sampling: sent the model's answer ({} tokens; {} of {} left)",
            spent,
            left.saturating_sub(spent),
            self.budget
        );
        Ok(SamplingReply {
            model: reply.model.unwrap_or_else(|| name.clone()),
            text,
            stop_reason: reply.stop_reason.map(|reason| {
                match reason {
                    FinishReason::Length => "maxTokens",
                    _ => "endTurn",
                }
                .to_owned()
            }),
        })
    }
}

/// Ask the user; Ctrl-C refuses and cancels the turn.
async fn approved(request: &SamplingRequest, max_tokens: u32) -> bool {
    let question = question(request, max_tokens);
    let answer = tokio::task::spawn_blocking(move || {
        without_spinner(|| -> Result<String, ReadlineError> {
            eprintln!("{question}");
            let _ = std::io::stderr().flush();
            let mut editor = rustyline::DefaultEditor::new()?;
            editor.readline("  [y] send to the model  [n] refuse: ")
        })
    })
    .await;
    match answer {
        Ok(Ok(line)) => matches!(line.trim(), "y" | "Y" | "yes"),
        Ok(Err(ReadlineError::Interrupted)) => {
            raise_interrupt();
            false
        }
        _ => false,
    }
}

/// The approval question: who asks, the system prompt and messages (escaped, each bounded).
fn question(request: &SamplingRequest, max_tokens: u32) -> String {
    let mut lines = vec![format!(
        "\r\x1b[K? MCP server '{}' asks to use the model (at most {max_tokens} tokens):",
        escape_for_terminal(&request.server)
    )];
    if let Some(system) = &request.system_prompt {
        lines.push(format!("  system: {}", shown(system)));
    }
    for turn in &request.messages {
        let role = match turn.role {
            SamplingRole::User => "user",
            SamplingRole::Assistant => "assistant",
        };
        lines.push(format!("  {role}: {}", shown(&turn.text)));
    }
    lines.join("\n")
}

fn shown(text: &str) -> String {
    let shown = agcore::vocab::text::head(text, SHOWN_BYTES);
    let mut out = escape_keeping_lines(shown.head()).replace('\n', "\n    ");
    if !shown.is_whole() {
        out.push_str(&format!(" [… {} more bytes]", shown.cut_bytes()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use agcore::tools::mcp::SamplingTurn;

    #[test]
    fn the_question_escapes_and_bounds_what_the_server_sent() {
        let request = SamplingRequest {
            server: "evil\u{1b}[2J".into(),
            messages: vec![SamplingTurn {
                role: SamplingRole::User,
                text: format!("hi\u{1b}]0;title\u{7}{}", "x".repeat(3000)),
            }],
            system_prompt: Some("be nice".into()),
            max_tokens: 50,
            temperature: None,
            stop_sequences: Vec::new(),
        };
        let text = question(&request, 50);
        assert!(!text[4..].contains('\u{1b}'), "{text:?}");
        assert!(text.contains("system: be nice"), "{text}");
        assert!(text.contains("more bytes]"), "{text}");
        assert!(text.contains("at most 50 tokens"), "{text}");
    }
}
