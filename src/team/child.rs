//! A call of a sub-agent: the child's run, started fresh or continued from what its parent's
//! state kept ([`ChildRun`]), its events passed up with its path, its answer (final text, or
//! typed output as JSON) the call's answer, what it spent charged to its parent.

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use futures::{Stream, StreamExt};

use crate::llm::model::ChatModel;
use crate::run::config::CycleConfig;
use crate::run::conversation::Conversation;
use crate::run::driver::{Drive, LoopItem, Start, TeamRun};
use crate::run::event::StreamEvent;
use crate::run::journal::{JournalEntry, JournalError, RunJournal};
use crate::run::model_turn::Mode;
use crate::run::output_schema::OutputSchema;
use crate::run::state::{ChildRun, Phase, RunRules, RunState};
use crate::run::step::Decision;
use crate::run::typed_output::{TypedEvent, TypedOutput};
use crate::run::usage::{RunUsage, UsageLimits};
use crate::team::agent::{Agent, ParentHistory};
use crate::team::roster::Team;
use crate::tools::approval::ApprovalRequest;
use crate::tools::registry::ToolRegistry;
use crate::vocab::{OpenaiChatMessage, ToolAnswer};

/// One call of a sub-agent, as its parent's driver sets it up.
pub(crate) struct ChildCall<'a> {
    pub team: &'a Team,
    pub agent: &'a Agent,
    /// The child's path, e.g. `main/researcher`.
    pub path: String,
    /// The child's depth (its parent's plus one).
    pub depth: u32,
    pub parent_model: Arc<dyn ChatModel>,
    pub parent_config: &'a CycleConfig,
    /// The run's tools (the child's run narrows them to its agent's list).
    pub registry: Option<&'a ToolRegistry>,
    pub journal: Option<&'a dyn RunJournal>,
    /// The parent's call.
    pub call_id: String,
    /// The task, or what the model must fix in its arguments.
    pub task: Result<String, String>,
    /// The parent's committed history (for [`ParentHistory::Last`]).
    pub parent_history: Vec<OpenaiChatMessage>,
    /// What the parent's state kept of an earlier attempt of this call.
    pub stored: Option<Box<ChildRun>>,
    /// Its limits, within the parent's remaining budget.
    pub limits: UsageLimits,
    pub suspend: bool,
    pub mode: Mode,
    /// The parent's `execute_tool` span of this call.
    pub span: tracing::Span,
}

/// What a child's run yields to its parent.
pub(crate) enum ChildItem {
    /// An event of the child (or of a child of it), with its path.
    Event(StreamEvent),
    /// The call's answer, and what the child spent.
    Done {
        answer: ToolAnswer,
        usage: RunUsage,
        duration: std::time::Duration,
    },
    /// The child waits for decisions on these calls; its state goes into the parent's.
    Suspended {
        child: Box<ChildRun>,
        requests: Vec<ApprovalRequest>,
    },
}

/// The child's records, inside its parent's call.
struct ChildJournal<'a> {
    parent: &'a dyn RunJournal,
    call_id: String,
    agent: String,
}

#[async_trait]
impl RunJournal for ChildJournal<'_> {
    async fn record(&self, entry: JournalEntry<'_>) -> Result<(), JournalError> {
        self.parent
            .record(JournalEntry::Child {
                call_id: &self.call_id,
                agent: &self.agent,
                entry: &entry,
            })
            .await
    }

    fn session(&self) -> Option<&str> {
        self.parent.session()
    }

    async fn keep_output(
        &self,
        id: &str,
        content: &str,
        tail_start: Option<usize>,
    ) -> Option<Result<(), JournalError>> {
        self.parent.keep_output(id, content, tail_start).await
    }
}

/// Run the child of `call` (see the module docs).
pub(crate) fn run<'a>(call: ChildCall<'a>) -> Pin<Box<dyn Stream<Item = ChildItem> + Send + 'a>> {
    Box::pin(async_stream::stream! {
        let ChildCall {
            team, agent, path, depth, parent_model, parent_config, registry, journal, call_id,
            task, parent_history, stored, limits, suspend, mode, span,
        } = call;
        let name = agent.name().to_owned();
        let began = std::time::Instant::now();
        let error = |text: String| ChildItem::Done {
            answer: ToolAnswer::error(text),
            usage: RunUsage::default(),
            duration: began.elapsed(),
        };
        if depth > team.max_depth() {
            yield error(format!(
                "agent '{name}' was not started: sub-agents may nest {} deep and this call would be {depth} deep. Do the task yourself or with your own tools.",
                team.max_depth()
            ));
            return;
        }
        let task = match task {
            Ok(task) => task,
            Err(problem) => {
                yield error(format!("agent '{name}' was not started: {problem}"));
                return;
            }
        };
        let (model, mut config) = match agent.model() {
            Some((model, config)) => (Arc::clone(model), config.clone()),
            None => (parent_model, parent_config.clone()),
        };
        if let Some(max_turns) = agent.max_turns() {
            config.max_turns = Some(max_turns);
        }
        config.usage_limits = limits;
        let child_journal = journal.map(|parent| ChildJournal {
            parent,
            call_id: call_id.clone(),
            agent: name.clone(),
        });
        let (start, messages) = match continued(stored, &config, registry.is_some()) {
            Continue::Finished(text) => {
                yield ChildItem::Done { answer: ToolAnswer::ok(text), usage: RunUsage::default(), duration: began.elapsed() };
                return;
            }
            Continue::From(state, decisions) => (Start::State { state, decisions }, Vec::new()),
            Continue::Fresh => {
                let mut messages = Vec::new();
                if !agent.instructions().is_empty() {
                    messages.push(OpenaiChatMessage::system(agent.instructions()));
                }
                messages.extend(parent_slice(&parent_history, agent.parent_history()));
                (Start::Prompt(Some(task)), messages)
            }
        };
        let typed = match &start {
            Start::State { state, .. } => state.typed.clone(),
            Start::Prompt(_) => None,
        };
        let schema = match agent.output_schema() {
            Some(saved) => match OutputSchema::from_saved(saved.clone()) {
                Ok(schema) => Some(schema),
                Err(problem) => {
                    yield error(format!("agent '{name}' was not started: its output schema is invalid: {problem}"));
                    return;
                }
            },
            None => None,
        };
        let mut cycle = Conversation {
            model,
            config,
            messages,
            context: crate::context::ContextState::default(),
            usage: crate::run::usage::UsageTally::default(),
        };
        let drive = Drive {
            start,
            registry,
            journal: child_journal.as_ref().map(|journal| journal as &dyn RunJournal),
            suspend,
            mode,
            output_tool: None,
            typed: None,
            team: Some(TeamRun {
                team,
                entry: name.clone(),
                parent_path: path.rsplit_once('/').map(|(parent, _)| parent.to_owned()),
                depth,
                parent_span: Some(span),
            }),
        };
        let mut outcome = None;
        {
            match schema {
                None => {
                    let mut items = std::pin::pin!(crate::run::driver::drive(&mut cycle, drive));
                    while let Some(item) = items.next().await {
                        match item {
                            LoopItem::Event(event) => yield ChildItem::Event(wrap(&path, event)),
                            LoopItem::Done(reply) => outcome = Some(Outcome::Answer(reply.text())),
                            LoopItem::Suspended(state) => outcome = Some(Outcome::Suspended(state)),
                            LoopItem::Failed(error) => outcome = Some(Outcome::Failed(error.to_string())),
                        }
                    }
                }
                Some(schema) => {
                    let options = TypedOutput::default();
                    let items = crate::run::typed_output::typed_drive(&mut cycle, drive, schema, &options, typed, Ok);
                    let mut items = std::pin::pin!(items);
                    while let Some(item) = items.next().await {
                        match item {
                            TypedEvent::Event(event) => yield ChildItem::Event(wrap(&path, event)),
                            TypedEvent::Rejected { .. } => {}
                            TypedEvent::Output(value) => outcome = Some(Outcome::Answer(value.to_string())),
                            TypedEvent::Suspended(suspension) => {
                                outcome = Some(Outcome::Suspended(Box::new(suspension.into_state())));
                            }
                            TypedEvent::Failed(error) => outcome = Some(Outcome::Failed(error.to_string())),
                        }
                    }
                }
            }
        }
        // The child's run is over (its state dropped): what it spent is known.
        let usage = cycle.last_run_usage();
        yield ended(name, outcome, usage, began.elapsed());
    })
}

/// What a child's run that ended with `outcome` yields to its parent.
fn ended(
    name: String,
    outcome: Option<Outcome>,
    usage: RunUsage,
    duration: std::time::Duration,
) -> ChildItem {
    let answer = match outcome {
        Some(Outcome::Answer(text)) if text.trim().is_empty() => {
            ToolAnswer::ok(format!("(agent '{name}' finished without an answer)"))
        }
        Some(Outcome::Answer(text)) => ToolAnswer::ok(text),
        Some(Outcome::Suspended(state)) => {
            let requests = state.pending_approvals().to_vec();
            let child = Box::new(ChildRun {
                agent: name,
                messages: Vec::new(),
                run: Some(*state),
                decisions: Vec::new(),
            });
            return ChildItem::Suspended { child, requests };
        }
        Some(Outcome::Failed(problem)) => ToolAnswer::error(format!(
            "agent '{name}' failed: {problem}. Decide whether to retry with a clearer or smaller task, or to go on without it."
        )),
        None => ToolAnswer::error(format!("agent '{name}' ended without an answer")),
    };
    ChildItem::Done {
        answer,
        usage,
        duration,
    }
}

enum Outcome {
    Answer(String),
    Suspended(Box<RunState>),
    Failed(String),
}

/// How a call with stored child state goes on.
enum Continue {
    /// Nothing stored: start the child.
    Fresh,
    /// The child finished before its parent recorded the answer: this was its answer.
    Finished(String),
    /// Continue this state, with these decisions.
    From(Box<RunState>, Vec<Decision>),
}

fn continued(stored: Option<Box<ChildRun>>, config: &CycleConfig, tools: bool) -> Continue {
    let Some(stored) = stored else {
        return Continue::Fresh;
    };
    let ChildRun {
        messages,
        run,
        decisions,
        ..
    } = *stored;
    let decisions = decisions
        .into_iter()
        .map(|d| Decision {
            call_id: d.call_id,
            answer: d.answer,
            digest: d.digest,
        })
        .collect();
    if let Some(mut state) = run {
        if state.messages.is_empty() {
            state.committed = state.committed.min(messages.len());
            state.messages = messages;
        }
        return Continue::From(Box::new(state), decisions);
    }
    if messages.is_empty() {
        return Continue::Fresh;
    }
    if let Some(OpenaiChatMessage::Assistant { tool_calls, .. }) = messages.last()
        && tool_calls.is_empty()
        && let Some(text) = messages.last().and_then(OpenaiChatMessage::text)
    {
        return Continue::Finished(text);
    }
    // Stopped during a model request: the recorded history (with its task) goes on.
    let mut state = RunState::new(messages, RunRules::of(config), tools);
    state.phase = Phase::NeedModel;
    Continue::From(Box::new(state), decisions)
}

/// The child's events carry its path (a grandchild's already carry theirs).
fn wrap(path: &str, event: StreamEvent) -> StreamEvent {
    match event {
        event @ StreamEvent::FromAgent { .. } => event,
        event => StreamEvent::FromAgent {
            agent: path.to_owned(),
            event: Box::new(event),
        },
    }
}

/// The parent's messages a child sees before its task.
fn parent_slice(history: &[OpenaiChatMessage], slice: ParentHistory) -> Vec<OpenaiChatMessage> {
    let ParentHistory::Last(n) = slice else {
        return Vec::new();
    };
    let mut kept: Vec<OpenaiChatMessage> = history
        .iter()
        .filter_map(|message| match message {
            OpenaiChatMessage::User { .. } => Some(message.clone()),
            OpenaiChatMessage::Assistant { .. } => message
                .text()
                .filter(|text| !text.trim().is_empty())
                .map(OpenaiChatMessage::assistant_text),
            _ => None,
        })
        .collect();
    let skip = kept.len().saturating_sub(n);
    kept.drain(..skip);
    kept
}
