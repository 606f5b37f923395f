//! Typed final output: [`Conversation::submit_typed`] runs the tool loop until the model's final
//! answer matches a schema, and returns it as a Rust value. Invalid answers go back to the
//! model with what is wrong, a bounded number of times.

use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::{Stream, StreamExt};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::run::conversation::Conversation;
use crate::run::driver::{Drive, LoopItem, Start, drive};
use crate::run::error::LlmError;
use crate::run::event::StreamEvent;
use crate::run::model_turn::Mode;
use crate::run::output_schema::{OutputMode, TypedRun};
use crate::run::output_schema::{OutputSchema, SchemaError, extract_json};
use crate::run::request::{RunRequest, Suspension};
use crate::tools::error::ToolError;
use crate::tools::registry::ToolRegistry;
use crate::tools::typed::deserialize_input;
use crate::vocab::ChatResponse;

impl FromStr for OutputMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(OutputMode::Auto),
            "native" => Ok(OutputMode::Native),
            "tool" => Ok(OutputMode::Tool),
            "prompted" => Ok(OutputMode::Prompted),
            other => Err(format!(
                "unknown output mode '{other}': expected auto, native, tool or prompted"
            )),
        }
    }
}

/// Options of a typed run: the [`OutputMode`], how often an invalid answer goes back to the
/// model, and the final-answer tool's name. Clones share what the server was found to reject.
#[derive(Debug, Clone)]
pub struct TypedOutput {
    mode: OutputMode,
    max_retries: u32,
    tool_name: String,
    /// Set when the server rejected `response_format`: later runs go to tool mode at once.
    native_rejected: Arc<AtomicBool>,
}

/// How often an invalid answer goes back to the model by default.
pub const DEFAULT_OUTPUT_RETRIES: u32 = 2;

/// The final-answer tool's default name.
pub const DEFAULT_OUTPUT_TOOL: &str = "final_answer";

impl Default for TypedOutput {
    fn default() -> Self {
        TypedOutput {
            mode: OutputMode::Auto,
            max_retries: DEFAULT_OUTPUT_RETRIES,
            tool_name: DEFAULT_OUTPUT_TOOL.to_owned(),
            native_rejected: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl TypedOutput {
    /// [`OutputMode::Auto`], [`DEFAULT_OUTPUT_RETRIES`], tool [`DEFAULT_OUTPUT_TOOL`].
    pub fn new() -> Self {
        TypedOutput::default()
    }

    /// Use `mode`.
    pub fn with_mode(mut self, mode: OutputMode) -> Self {
        self.mode = mode;
        self
    }

    /// Send an invalid answer back to the model at most `retries` times.
    pub fn with_max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// Name the final-answer tool of [`OutputMode::Tool`] `name` (it must not clash with a
    /// tool of the registry).
    pub fn with_tool_name(mut self, name: impl Into<String>) -> Self {
        self.tool_name = name.into();
        self
    }

    /// The mode asked for.
    pub fn mode(&self) -> OutputMode {
        self.mode
    }

    /// The mode the next run uses: [`OutputMode::Auto`] becomes [`OutputMode::Tool`] once the
    /// server rejected `response_format`.
    pub fn effective_mode(&self) -> OutputMode {
        match self.mode {
            OutputMode::Auto if self.native_rejected.load(Ordering::Relaxed) => OutputMode::Tool,
            mode => mode,
        }
    }

    /// How often an invalid answer goes back to the model.
    pub fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// The final-answer tool's name.
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }
}

/// Why a typed run ended without a valid answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TypedOutputError {
    /// The run itself failed (transport, server, limits, cancellation).
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// Every answer failed to parse or validate, the last one included.
    #[error(
        "the model's answer did not match the output schema after {attempts} attempts: {error}"
    )]
    Invalid {
        /// Answers the model gave (the first and each retry).
        attempts: u32,
        /// What is wrong with the last one.
        error: String,
        /// The last answer as the model sent it (reply text, or the final-answer tool's
        /// arguments).
        raw: String,
    },
    /// The schema cannot be used.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// The final-answer tool's name is taken by a tool of the registry.
    #[error(
        "the final-answer tool '{0}' clashes with a registered tool; pick another with TypedOutput::with_tool_name"
    )]
    ToolNameTaken(String),
    /// A typed run was asked for without a schema: the request has none
    /// ([`RunRequest::with_output_schema`]) and does not continue a typed run's state.
    #[error(
        "the run has no output schema: give one with RunRequest::with_output_schema, or continue a typed run's state"
    )]
    NoSchema,
}

/// How a typed run that may suspend ended ([`Conversation::run_typed_with`]).
#[derive(Debug)]
#[non_exhaustive]
// Returned once per run: the suspension is not worth a box for the caller to unwrap.
#[allow(clippy::large_enum_variant)]
pub enum TypedOutcome {
    /// The validated answer.
    Output(Value),
    /// The run waits for decisions; continue it with [`RunRequest::from_state`] (still typed).
    Suspended(Suspension),
}

/// What a streaming typed run yields: the run's events, a note for each answer sent back,
/// then exactly one [`TypedEvent::Output`] or [`TypedEvent::Failed`].
#[derive(Debug)]
#[non_exhaustive]
pub enum TypedEvent<T> {
    /// An event of the run (text deltas, tool calls, turns), as the tool loop streams them.
    Event(StreamEvent),
    /// The answer did not parse or validate; it goes back to the model with `error`.
    Rejected {
        /// Which answer this was (1 = the first).
        attempt: u32,
        /// What is wrong with it.
        error: String,
    },
    /// The validated answer; the last item.
    Output(T),
    /// The run ended without a valid answer; the last item.
    Failed(TypedOutputError),
    /// The run suspended for approvals (only a run from a [`RunRequest`]); the last item.
    Suspended(Suspension),
}

/// The stream of a streaming typed run.
pub type TypedStream<'a, T> = Pin<Box<dyn Stream<Item = TypedEvent<T>> + Send + 'a>>;

impl Conversation {
    /// Send `prompt` with the registry's tools and run until the model's final answer is a
    /// valid `T` (by [`OutputMode::Auto`], two retries; see [`Conversation::submit_typed_with`]).
    ///
    /// ```
    /// # async fn demo() -> Result<(), agcore::run::TypedOutputError> {
    /// use agcore::llm::testing::ScriptedModel;
    /// use agcore::{Conversation, CycleConfig};
    /// use agcore::tools::prelude::*;
    ///
    /// /// A city and its country.
    /// #[derive(Deserialize, JsonSchema)]
    /// struct City { name: String, country: String }
    ///
    /// let model = ScriptedModel::new().reply_text(r#"{"name": "Paris", "country": "France"}"#);
    /// let mut cycle = Conversation::new(model, CycleConfig::new("m"));
    /// let city: City = cycle.submit_typed("Capital of France?".into(), &ToolRegistry::new()).await?;
    /// assert_eq!(city.country, "France");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`TypedOutputError::Invalid`] (with the last raw answer) when every answer was
    /// invalid; [`TypedOutputError::Llm`] when the run failed.
    pub async fn submit_typed<T>(
        &mut self,
        prompt: String,
        registry: &ToolRegistry,
    ) -> Result<T, TypedOutputError>
    where
        T: DeserializeOwned + JsonSchema + Send,
    {
        self.submit_typed_with(prompt, registry, &TypedOutput::new())
            .await
    }

    /// [`Conversation::submit_typed`] with `options` (mode, retries, tool name).
    pub async fn submit_typed_with<T>(
        &mut self,
        prompt: String,
        registry: &ToolRegistry,
        options: &TypedOutput,
    ) -> Result<T, TypedOutputError>
    where
        T: DeserializeOwned + JsonSchema + Send,
    {
        let schema = OutputSchema::of::<T>()?;
        let items = typed_run(
            self,
            prompt,
            registry,
            schema,
            options,
            parse_as::<T>,
            Mode::Blocking,
        );
        last(items).await
    }

    /// Streaming form of [`Conversation::submit_typed`].
    pub fn submit_typed_stream<'a, T>(
        &'a mut self,
        prompt: String,
        registry: &'a ToolRegistry,
        options: &TypedOutput,
    ) -> Result<TypedStream<'a, T>, TypedOutputError>
    where
        T: DeserializeOwned + JsonSchema + Send + 'a,
    {
        let schema = OutputSchema::of::<T>()?;
        let items = typed_run(
            self,
            prompt,
            registry,
            schema,
            options,
            parse_as::<T>,
            Mode::Streaming,
        );
        Ok(Box::pin(items))
    }

    /// [`Conversation::submit_typed_with`] for a schema given as JSON ([`OutputSchema::from_json`]):
    /// the validated answer as JSON.
    pub async fn submit_with_schema(
        &mut self,
        prompt: String,
        registry: &ToolRegistry,
        schema: OutputSchema,
        options: &TypedOutput,
    ) -> Result<Value, TypedOutputError> {
        let items = typed_run(self, prompt, registry, schema, options, Ok, Mode::Blocking);
        last(items).await
    }

    /// Streaming form of [`Conversation::submit_with_schema`].
    pub fn submit_stream_with_schema<'a>(
        &'a mut self,
        prompt: String,
        registry: &'a ToolRegistry,
        schema: OutputSchema,
        options: &TypedOutput,
    ) -> TypedStream<'a, Value> {
        Box::pin(typed_run(
            self,
            prompt,
            registry,
            schema,
            options,
            Ok,
            Mode::Streaming,
        ))
    }
}

impl Conversation {
    /// [`Conversation::run_with`] for a typed answer: `request` made typed with
    /// [`RunRequest::with_output_schema`], or continuing a typed run's saved state
    /// ([`RunRequest::from_state`]; the schema and mode come from the state). Like any run from
    /// a [`RunRequest`] it records into its journal and suspends for deferred approvals; a
    /// suspended typed run resumes typed.
    ///
    /// # Errors
    /// Those of [`Conversation::submit_with_schema`]; [`TypedOutputError::NoSchema`] for a request
    /// that is not typed.
    pub async fn run_typed_with(
        &mut self,
        request: RunRequest<'_>,
    ) -> Result<TypedOutcome, TypedOutputError> {
        let mut items = std::pin::pin!(typed_request(self, request, Mode::Blocking));
        while let Some(item) = items.next().await {
            match item {
                TypedEvent::Output(value) => return Ok(TypedOutcome::Output(value)),
                TypedEvent::Suspended(suspension) => {
                    return Ok(TypedOutcome::Suspended(suspension));
                }
                TypedEvent::Failed(error) => return Err(error),
                TypedEvent::Event(_) | TypedEvent::Rejected { .. } => {}
            }
        }
        Err(LlmError::Other("the typed run ended without a result".to_owned()).into())
    }

    /// Streaming form of [`Conversation::run_typed_with`]: events, then exactly one
    /// [`TypedEvent::Output`], [`TypedEvent::Suspended`] or [`TypedEvent::Failed`].
    pub fn run_typed_with_stream<'a>(
        &'a mut self,
        request: RunRequest<'a>,
    ) -> TypedStream<'a, Value> {
        Box::pin(typed_request(self, request, Mode::Streaming))
    }
}

/// A typed run of `request`: its schema, else the one its saved state kept.
fn typed_request<'a>(
    cycle: &'a mut Conversation,
    mut request: RunRequest<'a>,
    mode: Mode,
) -> impl Stream<Item = TypedEvent<Value>> + Send + 'a {
    let output = request.take_output();
    let drive = request.into_drive(mode);
    async_stream::stream! {
        let drive = match drive {
            Ok(drive) => drive,
            Err(error) => {
                yield TypedEvent::Failed(error.into());
                return;
            }
        };
        let saved = match &drive.start {
            Start::State { state, .. } => state.typed.clone(),
            Start::Prompt(_) => None,
        };
        let (schema, options, resumed) = match (output, saved) {
            (Some((schema, options)), _) => (schema, options, None),
            (None, Some(typed)) => match OutputSchema::from_saved(typed.schema.clone()) {
                Ok(schema) => (schema, TypedOutput::new(), Some(typed)),
                Err(error) => {
                    yield TypedEvent::Failed(error.into());
                    return;
                }
            },
            (None, None) => {
                yield TypedEvent::Failed(TypedOutputError::NoSchema);
                return;
            }
        };
        let items = typed_drive(cycle, drive, schema, &options, resumed, Ok);
        let mut items = std::pin::pin!(items);
        while let Some(item) = items.next().await {
            yield item;
        }
    }
}

/// The answer as a `T`; the error names the field that is wrong.
fn parse_as<T: DeserializeOwned>(value: Value) -> Result<T, String> {
    deserialize_input::<T>("output", value).map_err(|error| match error {
        ToolError::InvalidArguments(_, problem) => problem,
        other => other.to_string(),
    })
}

async fn last<T>(items: impl Stream<Item = TypedEvent<T>>) -> Result<T, TypedOutputError> {
    let mut items = std::pin::pin!(items);
    while let Some(item) = items.next().await {
        match item {
            TypedEvent::Output(value) => return Ok(value),
            TypedEvent::Failed(error) => return Err(error),
            TypedEvent::Suspended(_) => {
                let error = LlmError::Other("the typed run suspended".to_owned());
                return Err(error.into());
            }
            TypedEvent::Event(_) | TypedEvent::Rejected { .. } => {}
        }
    }
    Err(LlmError::Other("the typed run ended without a result".to_owned()).into())
}

/// An answer that failed, and what the model is told about it.
struct Rejection {
    error: String,
    raw: String,
    feedback: String,
}

/// One typed run of `prompt` over the cycle's history (the design's calls: no journal, no
/// suspension).
fn typed_run<'a, T: Send + 'a>(
    cycle: &'a mut Conversation,
    prompt: String,
    registry: &'a ToolRegistry,
    schema: OutputSchema,
    options: &TypedOutput,
    parse: fn(Value) -> Result<T, String>,
    mode: Mode,
) -> impl Stream<Item = TypedEvent<T>> + Send + 'a {
    let drive = Drive::plain(Some(prompt), Some(registry), mode);
    typed_drive(cycle, drive, schema, options, None, parse)
}

/// Attempts of the tool loop until an answer passes `schema` and `parse`: the first as `first`
/// says (a prompt, or a saved typed run — `resumed` — with decisions), each retry a new prompt
/// with what was wrong, all with `first`'s tools, journal and suspension.
pub(crate) fn typed_drive<'a, T: Send + 'a>(
    cycle: &'a mut Conversation,
    first: Drive<'a>,
    schema: OutputSchema,
    options: &TypedOutput,
    resumed: Option<TypedRun>,
    parse: fn(Value) -> Result<T, String>,
) -> impl Stream<Item = TypedEvent<T>> + Send + 'a {
    let options = options.clone();
    async_stream::stream! {
        let (registry, journal, suspend, mode) = (first.registry, first.journal, first.suspend, first.mode);
        let team = first.team.clone();
        let taken = |tool: &str| registry.is_some_and(|registry| registry.get(tool).is_some());
        let tool = resumed.as_ref().map_or_else(|| options.tool_name.clone(), |typed| typed.tool.clone());
        let max_retries = resumed.as_ref().map_or(options.max_retries, |typed| typed.max_retries);
        let mut output_mode = resumed.as_ref().map_or_else(|| options.effective_mode(), |typed| typed.mode);
        if resumed.is_none() && output_mode == OutputMode::Tool && taken(&tool) {
            yield TypedEvent::Failed(TypedOutputError::ToolNameTaken(tool));
            return;
        }
        let saved = schema.saved();
        let prompt = match &first.start {
            Start::Prompt(prompt) => prompt.clone(),
            Start::State { .. } => None,
        };
        let mut first = Some(first);
        if let Some(Drive { start: Start::Prompt(Some(text)), .. }) = &mut first {
            *text = instructed(text, output_mode, &schema, &tool);
        }
        let mut next_prompt = None;
        // A resumed run goes on with the answer it was on.
        let mut attempt = resumed.as_ref().map_or(0, |typed| typed.attempt.saturating_sub(1));
        loop {
            attempt += 1;
            let before = cycle.messages.len();
            let native = matches!(output_mode, OutputMode::Native | OutputMode::Auto);
            let format = FormatGuard::set(&mut *cycle, native.then(|| schema.response_format()));
            let output_tool =
                (output_mode == OutputMode::Tool).then(|| schema.tool_definition(&tool));
            let typed = Some(TypedRun {
                schema: saved.clone(),
                mode: output_mode,
                tool: tool.clone(),
                max_retries,
                attempt,
            });
            let this = match first.take() {
                Some(drive) => Drive { output_tool, typed, ..drive },
                None => Drive {
                    start: Start::Prompt(next_prompt.take()),
                    registry,
                    journal,
                    suspend,
                    mode,
                    output_tool,
                    typed,
                    team: team.clone(),
                },
            };
            let mut result = None;
            let mut suspended = None;
            {
                let items = drive(&mut *format.cycle, this);
                let mut items = std::pin::pin!(items);
                while let Some(item) = items.next().await {
                    match item {
                        LoopItem::Event(event) => yield TypedEvent::Event(event),
                        LoopItem::Done(reply) => result = Some(Ok(*reply)),
                        LoopItem::Failed(error) => result = Some(Err(error)),
                        LoopItem::Suspended(state) => suspended = Some(state),
                    }
                }
            }
            drop(format);
            if let Some(state) = suspended {
                yield TypedEvent::Suspended(Suspension::new(state));
                return;
            }
            let reply = match result {
                Some(Ok(reply)) => reply,
                Some(Err(error))
                    if output_mode == OutputMode::Auto && rejects_response_format(&error) =>
                {
                    if taken(&tool) {
                        yield TypedEvent::Failed(TypedOutputError::ToolNameTaken(tool));
                        return;
                    }
                    options.native_rejected.store(true, Ordering::Relaxed);
                    tracing::warn!(
                        error = %error,
                        "the server rejected response_format; typed output falls back to tool mode"
                    );
                    output_mode = OutputMode::Tool;
                    attempt -= 1;
                    // The prompt again, unless a turn with it was kept (then the run goes on).
                    next_prompt = prompt
                        .as_ref()
                        .filter(|_| cycle.messages.len() == before)
                        .map(|prompt| instructed(prompt, output_mode, &schema, &tool));
                    continue;
                }
                Some(Err(error)) => {
                    yield TypedEvent::Failed(error.into());
                    return;
                }
                None => {
                    let error = LlmError::Other("the run ended without a result".to_owned());
                    yield TypedEvent::Failed(error.into());
                    return;
                }
            };
            let rejection = match checked(&reply, output_mode, &schema, &tool, parse) {
                Ok(output) => {
                    yield TypedEvent::Output(output);
                    return;
                }
                Err(rejection) => rejection,
            };
            if attempt > max_retries {
                yield TypedEvent::Failed(TypedOutputError::Invalid {
                    attempts: attempt,
                    error: rejection.error,
                    raw: rejection.raw,
                });
                return;
            }
            yield TypedEvent::Rejected { attempt, error: rejection.error };
            next_prompt = Some(rejection.feedback);
        }
    }
}

/// `prompt` with what the mode needs the model to know.
fn instructed(prompt: &str, mode: OutputMode, schema: &OutputSchema, tool: &str) -> String {
    match mode {
        OutputMode::Auto | OutputMode::Native => prompt.to_owned(),
        OutputMode::Tool => {
            format!("{prompt}\n\nWhen you have the answer, give it by calling the `{tool}` tool.")
        }
        OutputMode::Prompted => format!("{prompt}\n\n{}", schema.prompt_instruction()),
    }
}

/// The answer of `reply` by `mode`, checked against `schema`, as a `T`.
fn checked<T>(
    reply: &ChatResponse,
    mode: OutputMode,
    schema: &OutputSchema,
    tool: &str,
    parse: fn(Value) -> Result<T, String>,
) -> Result<T, Rejection> {
    let value = answer(reply, mode, schema, tool)?;
    parse(value)
        .map_err(|error| rejection(mode, schema, tool, error, raw_answer(reply, mode, tool)))
}

/// The answer of `reply` by `mode`, checked against `schema`.
fn answer(
    reply: &ChatResponse,
    mode: OutputMode,
    schema: &OutputSchema,
    tool: &str,
) -> Result<Value, Rejection> {
    if mode != OutputMode::Tool {
        let raw = reply.text();
        return extract_json(&raw)
            .and_then(|value| schema.check(&value))
            .map_err(|error| rejection(mode, schema, tool, error, raw));
    }
    let calls: Vec<_> = reply
        .tool_calls()
        .iter()
        .filter(|call| call.function.name == tool)
        .collect();
    let mut last = None;
    for call in calls {
        let checked = serde_json::from_str::<Value>(&call.function.arguments)
            .map_err(|error| format!("the arguments are not valid JSON: {error}"))
            .and_then(|value| schema.check(&value));
        match checked {
            Ok(value) => return Ok(value),
            Err(error) => last = Some((error, call.function.arguments.clone())),
        }
    }
    Err(match last {
        Some((error, raw)) => rejection(mode, schema, tool, error, raw),
        None => Rejection {
            error: format!("the model answered in text instead of calling `{tool}`"),
            raw: reply.text(),
            feedback: format!(
                "You answered in text. Give your final answer by calling the `{tool}` tool, with the answer as its arguments."
            ),
        },
    })
}

/// What the model sent as its answer: the text, or the final-answer tool's arguments.
fn raw_answer(reply: &ChatResponse, mode: OutputMode, tool: &str) -> String {
    match mode {
        OutputMode::Tool => reply
            .tool_calls()
            .iter()
            .find(|call| call.function.name == tool)
            .map(|call| call.function.arguments.clone())
            .unwrap_or_default(),
        _ => reply.text(),
    }
}

fn rejection(
    mode: OutputMode,
    schema: &OutputSchema,
    tool: &str,
    error: String,
    raw: String,
) -> Rejection {
    let feedback = match mode {
        OutputMode::Tool => format!(
            "Your final answer (the `{tool}` call) is not valid: {error}. Call `{tool}` again with corrected arguments."
        ),
        OutputMode::Auto | OutputMode::Native => format!(
            "Your answer is not valid: {error}. Reply again with only the corrected JSON value."
        ),
        OutputMode::Prompted => format!(
            "Your answer is not valid: {error}. {}",
            schema.prompt_instruction()
        ),
    };
    Rejection {
        error,
        raw,
        feedback,
    }
}

/// Whether the server refused the request because of `response_format` (a 400/404/422 whose
/// message names it).
fn rejects_response_format(error: &LlmError) -> bool {
    match error {
        LlmError::BadRequest { message, .. } => {
            let message = message.to_ascii_lowercase();
            message.contains("response_format") || message.contains("json_schema")
        }
        _ => false,
    }
}

/// Sets the cycle's `response_format` for one attempt and puts the caller's back however the
/// attempt ends (a dropped stream included).
struct FormatGuard<'c> {
    cycle: &'c mut Conversation,
    saved: Option<Option<Value>>,
}

impl<'c> FormatGuard<'c> {
    fn set(cycle: &'c mut Conversation, format: Option<Value>) -> Self {
        let saved = format.map(|format| cycle.config.options.response_format.replace(format));
        FormatGuard { cycle, saved }
    }
}

impl Drop for FormatGuard<'_> {
    fn drop(&mut self) {
        if let Some(saved) = self.saved.take() {
            self.cycle.config.options.response_format = saved;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::config::CycleConfig;
    use crate::run::state::{Phase, RunRules, RunState};
    use crate::run::step::{Effect, Input, step};
    use crate::vocab::{FinishReason, OpenaiChatMessage, ToolCall};

    fn calls(calls: Vec<ToolCall>) -> Input {
        Input::ModelReplied(Box::new(ChatResponse {
            message: OpenaiChatMessage::assistant_tool_calls(None, calls),
            stop_reason: Some(FinishReason::ToolCalls),
            usage: None,
            model: None,
            id: None,
        }))
    }

    fn started() -> RunState {
        let mut state = RunState::new(Vec::new(), RunRules::of(&CycleConfig::new("m")), true);
        state.output_tool = Some("final_answer".into());
        step(
            state,
            Input::Start {
                prompt: Some("q".into()),
            },
        )
        .0
    }

    #[test]
    fn the_final_answer_call_is_answered_by_the_run_which_ends_after_its_turn() {
        let (state, effect) = step(
            started(),
            calls(vec![
                ToolCall::new("a", "lookup", "{}"),
                ToolCall::new("b", "final_answer", r#"{"x":1}"#),
            ]),
        );
        let Effect::RunTools(batch) = effect else {
            panic!("{effect:?}")
        };
        assert_eq!(batch.run, vec![0], "only the other call runs");
        assert_eq!(batch.answered.len(), 1);
        assert_eq!(
            batch.answered[0].1.content,
            crate::run::step::OUTPUT_RECEIVED
        );
        let (state, effect) = step(state, Input::ToolsDone);
        let Effect::Done(reply) = effect else {
            panic!("{effect:?}")
        };
        assert_eq!(reply.tool_calls()[1].function.arguments, r#"{"x":1}"#);
        assert!(matches!(state.phase, Phase::Finished { .. }));
        // user, assistant, two answers: all committed.
        assert_eq!(state.committed, 4);
        assert_eq!(state.messages.len(), 4);
    }

    #[test]
    fn a_state_without_an_output_tool_serialises_as_before() {
        let state = RunState::new(Vec::new(), RunRules::of(&CycleConfig::new("m")), true);
        let value = serde_json::to_value(&state).unwrap_or_default();
        assert!(value.get("output_tool").is_none());
    }
}
