//! [`Hooks`]: code that runs at the points of a run — before each model request (may edit
//! it), after each reply, before each tool call (may allow, deny with a reason the model
//! reads, or rewrite the arguments), after each tool call (may rewrite the answer), on
//! compaction and on error.
//!
//! Hooks are set on [`crate::run::CycleConfig::hooks`], a [`HookChain`]: they run in the
//! order they were added, each seeing what the ones before it did. A hook that panics or
//! takes longer than the chain's timeout is isolated like a tool: its edits are dropped, it
//! is reported (a `tracing` warning naming the hook and the event), and the run goes on —
//! except before a tool call, where a failed hook denies the call (a hook that guards calls
//! must not let one through by crashing).
//!
//! ```
//! use std::sync::Arc;
//! use agcore::run::hooks::{HookChain, Hooks, ToolCallDecision};
//! use agcore::llm::{CycleConfig, ToolCall};
//!
//! struct NoForcePush;
//!
//! #[async_trait::async_trait]
//! impl Hooks for NoForcePush {
//!     fn name(&self) -> &str {
//!         "no-force-push"
//!     }
//!     async fn before_tool_call(&self, call: &ToolCall) -> ToolCallDecision {
//!         if call.function.arguments.contains("push --force") {
//!             ToolCallDecision::deny("force pushes are not allowed here; push without --force")
//!         } else {
//!             ToolCallDecision::Allow
//!         }
//!     }
//! }
//!
//! let mut config = CycleConfig::new("gpt-4o-mini");
//! config.hooks = HookChain::new().with(Arc::new(NoForcePush));
//! ```

mod batch;

pub(crate) use batch::{after_tool, before_tools, caller_decision, on_event};

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use serde_json::Value;

use crate::context::CompactionTier;
use crate::context::tokenizer::OutboundText;
use crate::run::error::LlmError;
use crate::run::event::StreamEvent;
use crate::vocab::{ChatResponse, OpenaiChatMessage, RequestOptions, ToolAnswer, ToolCall};

/// Code run at the points of a run. Every method has a default that does nothing, so a hook
/// implements only the events it cares about.
#[async_trait]
pub trait Hooks: Send + Sync {
    /// The hook's name, in reports and denial texts.
    fn name(&self) -> &str {
        "hook"
    }

    /// Before each request agcore sends to the model server — the run's turns, the context
    /// engine's summaries, and the text a server-side token counter (llama.cpp `/tokenize`)
    /// would count ([`HookRequest::purpose`] says which): may edit what is sent (this request
    /// only; the history is not changed). A redaction hook here sees everything that leaves.
    async fn before_model_request(&self, _request: &mut HookRequest) {}

    /// After each model reply (before its rules — final answer or tool turn — are applied).
    async fn after_model_response(&self, _reply: &ChatResponse) {}

    /// Before each tool call runs (after the model asked for it, before its permission check
    /// and validation in the registry, which a rewritten call goes through again).
    async fn before_tool_call(&self, _call: &ToolCall) -> ToolCallDecision {
        ToolCallDecision::Allow
    }

    /// After each tool call: may rewrite the answer the model reads (events keep the tool's
    /// own output).
    async fn after_tool_call(&self, _call: &ToolCall, _answer: &mut ToolAnswer) {}

    /// After the context engine compacted the history (once per tier applied), before the
    /// request it made room for. The hook observes; it cannot undo the compaction.
    async fn on_compaction(&self, _compaction: &Compaction) {}

    /// When the run fails (the error it returns).
    async fn on_error(&self, _error: &LlmError) {}
}

/// The model request a [`Hooks::before_model_request`] may edit.
#[derive(Debug, Clone, PartialEq)]
pub struct HookRequest {
    /// Why the request is sent.
    pub purpose: RequestPurpose,
    /// The model name.
    pub model: String,
    /// The messages sent, oldest first.
    pub messages: Vec<OpenaiChatMessage>,
    /// The request options.
    pub options: RequestOptions,
}

/// A server-side token counter's texts pass the hooks as a request of one user message per
/// text ([`RequestPurpose::TokenCount`]).
#[async_trait]
impl OutboundText for HookChain {
    async fn outbound(&self, model: &str, texts: &[&str]) -> Option<Vec<String>> {
        let messages: Vec<OpenaiChatMessage> = texts
            .iter()
            .map(|text| OpenaiChatMessage::user_text(*text))
            .collect();
        let edited = self
            .before_request(
                RequestPurpose::TokenCount,
                model,
                &messages,
                &RequestOptions::default(),
            )
            .await?;
        Some(
            edited
                .messages
                .iter()
                .map(|message| message.text().unwrap_or_default())
                .collect(),
        )
    }
}

/// Why agcore sends a request to the model server ([`HookRequest::purpose`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RequestPurpose {
    /// A turn of the run: the conversation, for the model to answer.
    Turn,
    /// The context engine's summary of older turns (the messages are its summary prompt).
    Summary,
    /// Text for the server's tokenizer to count (one user message per text); nothing is
    /// answered. Edits change what is counted, and so the estimate.
    TokenCount,
}

/// What a [`Hooks::before_tool_call`] decides.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolCallDecision {
    /// Let the call go on (to the registry's own gates).
    Allow,
    /// Do not run the call; the model reads `reason`.
    Deny {
        /// Why, told to the model.
        reason: String,
    },
    /// Run the call with these arguments instead (validated again by the registry).
    Rewrite {
        /// The new arguments.
        arguments: Value,
    },
}

impl ToolCallDecision {
    /// [`ToolCallDecision::Deny`] with `reason`.
    pub fn deny(reason: impl Into<String>) -> Self {
        ToolCallDecision::Deny {
            reason: reason.into(),
        }
    }
}

/// A compaction of the history, for [`Hooks::on_compaction`]: what
/// [`StreamEvent::ContextCompacted`](crate::llm::StreamEvent::ContextCompacted) reports.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compaction {
    /// How room was made.
    pub tier: CompactionTier,
    /// The estimated prompt tokens before.
    pub tokens_before: u64,
    /// The estimated prompt tokens after.
    pub tokens_after: u64,
    /// Messages stubbed, summarised or dropped.
    pub messages: u64,
    /// The model's context window the budget was computed from.
    pub window: u64,
}

impl Compaction {
    /// The compaction a [`StreamEvent::ContextCompacted`](crate::llm::StreamEvent::ContextCompacted)
    /// reports (`None` for any other event).
    pub fn of_event(event: &StreamEvent) -> Option<Self> {
        match *event {
            StreamEvent::ContextCompacted {
                tier,
                tokens_before,
                tokens_after,
                messages,
                window,
            } => Some(Compaction {
                tier,
                tokens_before,
                tokens_after,
                messages,
                window,
            }),
            _ => None,
        }
    }
}

/// The default time one hook may take for one event.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// The hooks of a run, in order, with the time each may take per event.
#[derive(Clone)]
pub struct HookChain {
    hooks: Vec<Arc<dyn Hooks>>,
    timeout: Duration,
}

impl Default for HookChain {
    fn default() -> Self {
        HookChain {
            hooks: Vec::new(),
            timeout: DEFAULT_HOOK_TIMEOUT,
        }
    }
}

impl std::fmt::Debug for HookChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookChain")
            .field(
                "hooks",
                &self
                    .hooks
                    .iter()
                    .map(|hook| hook.name())
                    .collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Why a hook did not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookFailure {
    /// It panicked.
    #[error("hook '{hook}' panicked on {event}: {message}")]
    Panicked {
        /// The hook's name.
        hook: String,
        /// The event.
        event: &'static str,
        /// The panic message.
        message: String,
    },
    /// It took longer than the chain's timeout.
    #[error("hook '{hook}' took longer than {limit:?} on {event}")]
    TimedOut {
        /// The hook's name.
        hook: String,
        /// The event.
        event: &'static str,
        /// The timeout.
        limit: Duration,
    },
}

impl HookChain {
    /// No hooks.
    pub fn new() -> Self {
        HookChain::default()
    }

    /// `hook` added after the others.
    pub fn with(mut self, hook: Arc<dyn Hooks>) -> Self {
        self.push(hook);
        self
    }

    /// Add `hook` after the others.
    pub fn push(&mut self, hook: Arc<dyn Hooks>) {
        self.hooks.push(hook);
    }

    /// The time one hook may take for one event (default [`DEFAULT_HOOK_TIMEOUT`]).
    pub fn with_timeout(mut self, limit: Duration) -> Self {
        self.timeout = limit;
        self
    }

    /// Whether there are no hooks.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Run `event` of one hook, isolated: a panic or a timeout is a [`HookFailure`], reported
    /// as a warning.
    async fn isolated<T>(
        &self,
        hook: &dyn Hooks,
        event: &'static str,
        future: impl Future<Output = T>,
    ) -> Result<T, HookFailure> {
        let outcome = tokio::time::timeout(self.timeout, AssertUnwindSafe(future).catch_unwind())
            .await
            .map_err(|_| HookFailure::TimedOut {
                hook: hook.name().to_owned(),
                event,
                limit: self.timeout,
            })
            .and_then(|caught| {
                caught.map_err(|panic| HookFailure::Panicked {
                    hook: hook.name().to_owned(),
                    event,
                    message: panic_message(panic.as_ref()),
                })
            });
        if let Err(failure) = &outcome {
            tracing::warn!(hook = hook.name(), event, "{failure}");
        }
        outcome
    }

    /// The request after every hook's edits; `None` without hooks (send it as it is). A hook
    /// that fails leaves the request as the hooks before it left it.
    pub async fn before_model_request(
        &self,
        model: &str,
        messages: &[OpenaiChatMessage],
        options: &RequestOptions,
    ) -> Option<HookRequest> {
        self.before_request(RequestPurpose::Turn, model, messages, options)
            .await
    }

    /// [`HookChain::before_model_request`] for a request sent for `purpose`.
    pub async fn before_request(
        &self,
        purpose: RequestPurpose,
        model: &str,
        messages: &[OpenaiChatMessage],
        options: &RequestOptions,
    ) -> Option<HookRequest> {
        if self.is_empty() {
            return None;
        }
        let mut request = HookRequest {
            purpose,
            model: model.to_owned(),
            messages: messages.to_vec(),
            options: options.clone(),
        };
        for hook in &self.hooks {
            let mut draft = request.clone();
            let edit = hook.before_model_request(&mut draft);
            if self
                .isolated(hook.as_ref(), "before_model_request", edit)
                .await
                .is_ok()
            {
                request = draft;
            }
        }
        Some(request)
    }

    /// Tell every hook about a reply.
    pub async fn after_model_response(&self, reply: &ChatResponse) {
        for hook in &self.hooks {
            let seen = hook.after_model_response(reply);
            let _ = self
                .isolated(hook.as_ref(), "after_model_response", seen)
                .await;
        }
    }

    /// Ask every hook about `call`, in order, until one denies it: `Ok` with the call to run
    /// (its arguments rewritten by the hooks that did), or `Err` with the answer the model
    /// reads for a denied call. A hook that fails denies the call.
    pub async fn before_tool_call(&self, call: &ToolCall) -> Result<ToolCall, ToolAnswer> {
        let mut call = call.clone();
        for hook in &self.hooks {
            let decision = hook.before_tool_call(&call);
            let blocked = |reason: &dyn std::fmt::Display| {
                ToolAnswer::error(format_args!(
                    "tool '{}' was blocked by hook '{}': {}. Do not retry this call as it is.",
                    call.function.name,
                    hook.name(),
                    reason.to_string().trim_end_matches('.')
                ))
            };
            match self
                .isolated(hook.as_ref(), "before_tool_call", decision)
                .await
            {
                Ok(ToolCallDecision::Allow) => {}
                Ok(ToolCallDecision::Deny { reason }) => return Err(blocked(&reason)),
                Ok(ToolCallDecision::Rewrite { arguments }) => {
                    call.function.arguments = arguments.to_string();
                }
                Err(failure) => return Err(blocked(&failure)),
            }
        }
        Ok(call)
    }

    /// The answer after every hook's rewrite. A hook that fails leaves it as the hooks before
    /// it left it.
    pub async fn after_tool_call(&self, call: &ToolCall, answer: ToolAnswer) -> ToolAnswer {
        let mut answer = answer;
        for hook in &self.hooks {
            let mut draft = answer.clone();
            let edit = hook.after_tool_call(call, &mut draft);
            if self
                .isolated(hook.as_ref(), "after_tool_call", edit)
                .await
                .is_ok()
            {
                answer = draft;
            }
        }
        answer
    }

    /// Tell every hook about a compaction.
    pub async fn on_compaction(&self, compaction: &Compaction) {
        for hook in &self.hooks {
            let seen = hook.on_compaction(compaction);
            let _ = self.isolated(hook.as_ref(), "on_compaction", seen).await;
        }
    }

    /// Tell every hook that the run failed.
    pub async fn on_error(&self, error: &LlmError) {
        for hook in &self.hooks {
            let seen = hook.on_error(error);
            let _ = self.isolated(hook.as_ref(), "on_error", seen).await;
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}
