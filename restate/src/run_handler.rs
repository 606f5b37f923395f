//! The `run` handler: agcore's step machine driven inside the invocation. Every model request
//! and every tool call is one journaled `ctx.run`: a replayed invocation (the endpoint
//! restarted) takes their results from the journal instead of sending or running them again.
//! A call that needs approval waits on an awakeable that `approve` resolves.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agcore::run::external::{self, CallEnd};
use agcore::run::{Decision, Effect, Input, LlmError, RunRules, RunState, ToolBatch, step};
use agcore::tools::approval::{ApprovalDecision, ApprovalRequest};
use agcore::vocab::{ChatResponse, OpenaiChatMessage, ToolAnswer};
use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};

use crate::agent::Agent;
use crate::session::{MESSAGES, PENDING, RUN};
use crate::wire::{PendingCall, StoredPending, WireDecision};

/// The answer of a call that was running when the endpoint stopped, on a tool that does not
/// declare itself idempotent: it is not run again.
const INTERRUPTED: &str = "interrupted: the endpoint stopped while this tool ran; whether it had \
any effect is unknown. It was not run again.";

/// What a model request step journals: the state after the context engine prepared it, and
/// the reply or the error.
#[derive(Serialize, Deserialize)]
struct ModelStep {
    state: RunState,
    reply: Result<ChatResponse, String>,
}

/// Run `prompt` in the session `ctx` is keyed by.
pub(crate) async fn run(
    agent: &Arc<Agent>,
    ctx: ObjectContext<'_>,
    prompt: String,
) -> HandlerResult<String> {
    let history = match ctx.get::<Json<Vec<OpenaiChatMessage>>>(MESSAGES).await? {
        Some(Json(history)) => history,
        None => agent.template().messages().to_vec(),
    };
    let rules = RunRules::of(agent.template().config());
    let mut state = RunState::new(history, rules, !agent.registry().is_empty());
    let mut saved = state.committed;
    let mut input = Input::Start {
        prompt: Some(prompt),
    };
    loop {
        let (next, effect) = step(state, input);
        state = next;
        if state.committed != saved {
            saved = state.committed;
            ctx.set(MESSAGES, Json(state.committed_messages().to_vec()));
        }
        match effect {
            Effect::RequestModel(request) => {
                ctx.set(RUN, Json(state.without_messages()));
                let model_agent = Arc::clone(agent);
                let mut sent = state.clone();
                let Json(done) = ctx
                    .run(move || async move {
                        let mut conversation = external::fork(model_agent.template());
                        let reply = external::request_model(
                            &mut conversation,
                            &mut sent,
                            request,
                            model_agent.tools(),
                        )
                        .await
                        .map_err(|error| error.to_string());
                        Ok(Json(ModelStep { state: sent, reply }))
                    })
                    .name("model")
                    .await?;
                state = done.state;
                input = match done.reply {
                    Ok(reply) => Input::ModelReplied(Box::new(reply)),
                    Err(error) => Input::ModelFailed(LlmError::Other(error)),
                };
            }
            Effect::RunTools(batch) => {
                ctx.set(RUN, Json(state.without_messages()));
                input = run_tools(agent, &ctx, &mut state, batch).await?;
            }
            Effect::AskApproval(requests) | Effect::Suspend(requests) => {
                ctx.set(RUN, Json(state.without_messages()));
                input = Input::Decisions(decisions(&ctx, requests).await?);
            }
            Effect::Done(reply) => {
                ctx.set(MESSAGES, Json(state.committed_messages().to_vec()));
                ctx.clear(RUN);
                return Ok(reply.text());
            }
            Effect::Fail(error) => {
                ctx.set(MESSAGES, Json(state.committed_messages().to_vec()));
                ctx.clear(RUN);
                return Err(TerminalError::new_with_code(
                    500,
                    format!("the run of session {:?} failed: {error}", ctx.key()),
                )
                .into());
            }
        }
    }
}

/// Run the calls of `batch`, one journaled step each, in call order; their answers go into
/// `state`. Each call is preceded by a journaled start marker: found in the journal while the
/// call's own step is not, it means an earlier attempt may have started the tool, which then
/// runs again only if it declares itself idempotent.
async fn run_tools(
    agent: &Arc<Agent>,
    ctx: &ObjectContext<'_>,
    state: &mut RunState,
    batch: ToolBatch,
) -> Result<Input, HandlerError> {
    let mut deferred = Vec::new();
    for &position in &batch.run {
        let Some(call) = batch.calls.get(position).cloned() else {
            continue;
        };
        let approved = batch
            .approved
            .iter()
            .position(|&p| p == position)
            .map(|i| batch.approved_for.get(i).cloned().flatten());
        let fresh = Arc::new(AtomicBool::new(false));
        let marker = Arc::clone(&fresh);
        ctx.run(move || async move {
            marker.store(true, Ordering::SeqCst);
            Ok(())
        })
        .name(format!("start {}", call.id))
        .await?;
        let run_again = fresh.load(Ordering::SeqCst) || agent.idempotent(&call.function.name);
        let call_agent = Arc::clone(agent);
        let rules = state.without_messages();
        let name = format!("call {} {}", call.function.name, call.id);
        let Json(end) = ctx
            .run(move || async move {
                if !run_again {
                    return Ok(Json(CallEnd::Answered {
                        answer: ToolAnswer::error(INTERRUPTED),
                        media: None,
                    }));
                }
                let conversation = external::fork(call_agent.template());
                let end = external::run_call(
                    &conversation,
                    &rules,
                    call_agent.registry(),
                    &call,
                    approved,
                )
                .await;
                Ok(Json(end))
            })
            .name(name)
            .await?;
        match end {
            CallEnd::Answered { answer, media } => {
                state.mark_started(position);
                state.record_answer(position, answer);
                if let Some(media) = media {
                    state.record_media(position, media);
                }
            }
            CallEnd::Deferred(request) => deferred.push(request),
        }
    }
    Ok(if deferred.is_empty() {
        Input::ToolsDone
    } else {
        Input::ToolsDeferred(deferred)
    })
}

/// Wait for a decision on each of `requests`: one awakeable per call, kept in the object's
/// state (so `approve` finds it) until every decision is in.
async fn decisions(
    ctx: &ObjectContext<'_>,
    requests: Vec<ApprovalRequest>,
) -> Result<Vec<Decision>, HandlerError> {
    let mut waits = Vec::with_capacity(requests.len());
    let mut stored = Vec::with_capacity(requests.len());
    for request in requests {
        let (awakeable, decided) = ctx.awakeable::<Json<WireDecision>>();
        stored.push(StoredPending {
            call: PendingCall {
                id: request.call_id.clone(),
                tool: request.tool.clone(),
                arguments: request.arguments.clone(),
            },
            awakeable,
        });
        waits.push((request, decided));
    }
    ctx.set(PENDING, Json(stored));
    let mut decisions = Vec::with_capacity(waits.len());
    for (request, decided) in waits {
        let Json(decision) = decided.await?;
        let answer = if decision.allow {
            ApprovalDecision::AllowOnce
        } else {
            ApprovalDecision::Deny {
                message: decision.message,
            }
        };
        decisions.push(Decision::for_request(&request, answer));
    }
    ctx.clear(PENDING);
    Ok(decisions)
}
