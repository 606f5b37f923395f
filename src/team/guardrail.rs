//! [`Guardrail`]: a check of an agent's input or final answer that can stop the run with a
//! reason ([`crate::run::LlmError::GuardrailTripped`]) — before the model sees the input, or
//! before the caller sees the answer. Checks of a tool's arguments are the registry's rules
//! ([`crate::tools::rules`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;

/// What a guardrail checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardrailStage {
    /// The agent's input: the user's prompt, or its task as a sub-agent.
    Input,
    /// The agent's final answer.
    Output,
}

/// What a guardrail decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardrailVerdict {
    /// Go on.
    Pass,
    /// Stop the run, for this reason.
    Trip {
        /// Why (shown to the user, and to a parent agent's model).
        reason: String,
    },
}

/// A check of an agent's input or output. A sub-agent's tripped guardrail stops the
/// sub-agent: its parent reads the reason as the call's error.
#[async_trait]
pub trait Guardrail: Send + Sync {
    /// Its name, in the error it raises.
    fn name(&self) -> &str;

    /// Check `text` (the input or the final answer, as `stage` says) of agent `agent` (its
    /// path in the team).
    async fn check(&self, agent: &str, stage: GuardrailStage, text: &str) -> GuardrailVerdict;
}

type CheckFn = dyn Fn(&str) -> Pin<Box<dyn Future<Output = GuardrailVerdict> + Send>> + Send + Sync;

/// A guardrail made of an async function of the text.
///
/// ```
/// use agcore::team::{FnGuardrail, GuardrailVerdict};
///
/// let no_secrets = FnGuardrail::new("no_secrets", |text: &str| {
///     let tripped = text.contains("API_KEY");
///     async move {
///         if tripped {
///             GuardrailVerdict::Trip { reason: "the text names an API key".into() }
///         } else {
///             GuardrailVerdict::Pass
///         }
///     }
/// });
/// ```
pub struct FnGuardrail {
    name: String,
    check: Arc<CheckFn>,
}

impl FnGuardrail {
    /// A guardrail named `name` that runs `check` on the text.
    pub fn new<F, Fut>(name: impl Into<String>, check: F) -> Self
    where
        F: Fn(&str) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = GuardrailVerdict> + Send + 'static,
    {
        FnGuardrail {
            name: name.into(),
            check: Arc::new(move |text: &str| Box::pin(check(text))),
        }
    }
}

impl std::fmt::Debug for FnGuardrail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnGuardrail")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Guardrail for FnGuardrail {
    fn name(&self) -> &str {
        &self.name
    }

    async fn check(&self, _agent: &str, _stage: GuardrailStage, text: &str) -> GuardrailVerdict {
        (self.check)(text).await
    }
}

/// Run `agent`'s guardrails of `stage` on `text`; the first trip as the run's error.
pub(crate) async fn check(
    agent: &crate::team::Agent,
    path: &str,
    stage: GuardrailStage,
    text: &str,
) -> Option<crate::run::LlmError> {
    let guardrails = match stage {
        GuardrailStage::Input => agent.input_guardrails(),
        GuardrailStage::Output => agent.output_guardrails(),
    };
    for guardrail in guardrails {
        if let GuardrailVerdict::Trip { reason } = guardrail.check(path, stage, text).await {
            return Some(crate::run::LlmError::GuardrailTripped {
                agent: path.to_owned(),
                guardrail: guardrail.name().to_owned(),
                reason,
            });
        }
    }
    None
}

/// What a guardrail agent answers.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct Judgement {
    /// Whether the text must be stopped.
    tripped: bool,
    /// Why (one sentence).
    reason: String,
}

/// A guardrail that asks a model: an agent with its own instructions whose typed answer
/// `{"tripped": bool, "reason": string}` decides. A guardrail whose model fails trips (the
/// check could not be made: failing open would let through what it exists to stop).
pub struct AgentGuardrail {
    name: String,
    model: Arc<dyn crate::llm::model::ChatModel>,
    config: crate::run::config::CycleConfig,
    instructions: String,
}

impl AgentGuardrail {
    /// A guardrail named `name` asking `model` (configured by `config`) under `instructions`
    /// — say what to stop; the text to judge is its user message.
    pub fn new(
        name: impl Into<String>,
        model: Arc<dyn crate::llm::model::ChatModel>,
        config: crate::run::config::CycleConfig,
        instructions: impl Into<String>,
    ) -> Self {
        AgentGuardrail {
            name: name.into(),
            model,
            config,
            instructions: instructions.into(),
        }
    }
}

impl std::fmt::Debug for AgentGuardrail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentGuardrail")
            .field("name", &self.name)
            .field("model", &self.config.model)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Guardrail for AgentGuardrail {
    fn name(&self) -> &str {
        &self.name
    }

    async fn check(&self, agent: &str, stage: GuardrailStage, text: &str) -> GuardrailVerdict {
        let mut cycle = crate::run::Conversation {
            model: Arc::clone(&self.model),
            config: self.config.clone(),
            messages: vec![crate::vocab::OpenaiChatMessage::system(&self.instructions)],
            context: crate::context::ContextState::default(),
            usage: crate::run::usage::UsageTally::default(),
        };
        let what = match stage {
            GuardrailStage::Input => "input",
            GuardrailStage::Output => "answer",
        };
        let prompt = format!("Judge this {what} of agent '{agent}':\n\n{text}");
        let registry = crate::tools::registry::ToolRegistry::new();
        match cycle.submit_typed::<Judgement>(prompt, &registry).await {
            Ok(Judgement {
                tripped: true,
                reason,
            }) => GuardrailVerdict::Trip { reason },
            Ok(_) => GuardrailVerdict::Pass,
            Err(error) => GuardrailVerdict::Trip {
                reason: format!("the guardrail's model could not judge: {error}"),
            },
        }
    }
}
