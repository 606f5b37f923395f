//! The `run` handler: agcore's step machine driven inside the invocation. Every model request
//! and every tool call is one journaled `ctx.run`: a replayed invocation (the endpoint
//! restarted) takes their results from the journal instead of sending or running them again.
//! A turn's calls run concurrently, each with the idempotency key a local run would give it.
//! A call that needs approval waits on an awakeable that `approve` resolves.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agcore::run::external::{self, CallEnd};
use agcore::run::{Decision, Effect, Input, LlmError, RunRules, RunState, ToolBatch, step};
use agcore::tools::CallDigest;
use agcore::tools::approval::{ApprovalDecision, ApprovalRequest};
use agcore::vocab::{ChatResponse, OpenaiChatMessage, ToolAnswer, ToolCall};
use futures::future::join_all;
use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::agent::Agent;
use crate::session::{MESSAGES, PENDING, RUN};
use crate::wire::{PendingCall, StoredPending, WireDecision};

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
    mut ctx: ObjectContext<'_>,
    prompt: String,
) -> HandlerResult<String> {
    let history = match ctx.get::<Json<Vec<OpenaiChatMessage>>>(MESSAGES).await? {
        Some(Json(history)) => history,
        None => agent.template().messages().to_vec(),
    };
    let rules = RunRules::of(agent.template().config());
    let mut state = RunState::new(history, rules, !agent.registry().is_empty());
    // Drawn from Restate's random source, seeded by the invocation id: the same on every
    // replay and retry of this invocation, so the calls' idempotency keys are too; another
    // `run` is another invocation, a new run id and new keys.
    state.run_id = Some(format!("run_{}", ctx.rand_uuid().simple()));
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
                        // Hosted tools pass the registry's gates, as in a local run.
                        external::gate_hosted_tools(&mut conversation, model_agent.registry());
                        // Deferred tools as a local run offers them: `tool_search` until a
                        // search (answered in `run_tools`) loads them.
                        let tools = external::offered_tools_for(
                            &conversation,
                            model_agent.registry(),
                            &sent,
                        );
                        let reply =
                            external::request_model(&mut conversation, &mut sent, request, &tools)
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

/// What the `before_tool_call` hooks decided about a batch, as journaled: the calls (with
/// rewritten arguments), the positions still to run, and the denied calls' answers.
#[derive(Serialize, Deserialize)]
struct HookedBatch {
    calls: Vec<ToolCall>,
    run: Vec<usize>,
    denied: Vec<(usize, ToolAnswer)>,
}

/// Run the calls of `batch` as the local driver does: the `before_tool_call` hooks first (one
/// journaled step), each call's idempotency key, then the calls concurrently — at most the
/// registry's concurrency limit at a time — each one journaled step; their answers go into
/// `state` in call order.
///
/// Each call is preceded by a journaled start marker: found in the journal while the call's
/// own step is not, it means an earlier attempt may have started the tool, which then runs
/// again only if it declares itself idempotent, and is otherwise answered as interrupted,
/// naming its key. The journal's order must be the same on every replay: all markers are
/// created first, in call order, and awaited together; then all calls' steps, in call order
/// (a step enters the journal when its future is first polled, and `join_all` polls in order);
/// the concurrency limit is a semaphore inside the steps, so it never reorders them.
async fn run_tools(
    agent: &Arc<Agent>,
    ctx: &ObjectContext<'_>,
    state: &mut RunState,
    mut batch: ToolBatch,
) -> Result<Input, HandlerError> {
    if !agent.template().config().hooks.is_empty() && !batch.run.is_empty() {
        let hook_agent = Arc::clone(agent);
        let mut asked = batch.clone();
        let Json(hooked) = ctx
            .run(move || async move {
                let denied = external::before_tools(hook_agent.template(), &mut asked).await;
                Ok(Json(HookedBatch {
                    calls: asked.calls,
                    run: asked.run,
                    denied,
                }))
            })
            .name("before_tool_call")
            .await?;
        batch.calls = hooked.calls;
        batch.run = hooked.run;
        for (position, answer) in hooked.denied {
            state.record_answer(position, answer.clone());
            batch.answered.push((position, answer));
        }
    }
    // `tool_search` and deferred tools not loaded yet are answered by the run; the answers
    // depend only on the registry and the state, so a replay gives the same ones.
    external::answer_deferred(agent.template(), agent.registry(), state, &mut batch);
    // The run id is the same on every replay (see `run`), so every key is too.
    external::assign_keys(state, Some(ctx.key()));
    ctx.set(RUN, Json(state.without_messages()));

    let calls: Vec<(usize, ToolCall, Option<Option<CallDigest>>)> = batch
        .run
        .iter()
        .filter_map(|&position| {
            let call = batch.calls.get(position)?.clone();
            let approved = batch
                .approved
                .iter()
                .position(|&p| p == position)
                .map(|i| batch.approved_for.get(i).cloned().flatten());
            Some((position, call, approved))
        })
        .collect();
    let fresh: Vec<Arc<AtomicBool>> = calls
        .iter()
        .map(|_| Arc::new(AtomicBool::new(false)))
        .collect();
    let markers = calls.iter().zip(&fresh).map(|((_, call, _), fresh)| {
        let marker = Arc::clone(fresh);
        ctx.run(move || async move {
            marker.store(true, Ordering::SeqCst);
            Ok(())
        })
        .name(format!("start {}", call.id))
    });
    for marked in join_all(markers).await {
        marked?;
    }

    let limit = agent
        .registry()
        .concurrency_limit()
        .unwrap_or(calls.len())
        .max(1);
    let permits = Arc::new(Semaphore::new(limit));
    let rules = state.without_messages();
    let steps = calls
        .into_iter()
        .zip(fresh)
        .map(|((position, call, approved), fresh)| {
            let run_again = fresh.load(Ordering::SeqCst) || agent.idempotent(&call.function.name);
            let call_agent = Arc::clone(agent);
            let permits = Arc::clone(&permits);
            let rules = rules.clone();
            let name = format!("call {} {}", call.function.name, call.id);
            let step = ctx
                .run(move || async move {
                    if !run_again {
                        let key = external::idempotency_key_of(&rules, &call.id);
                        return Ok(Json(CallEnd::Answered {
                            answer: external::interrupted(key.as_deref()),
                            media: None,
                        }));
                    }
                    // Never closed: the permit is always given.
                    let _permit = permits.acquire_owned().await.ok();
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
                .name(name);
            async move { (position, step.await) }
        });
    let mut deferred = Vec::new();
    for (position, end) in join_all(steps).await {
        let Json(end) = end?;
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
/// state (so `approve` finds it) until every decision is in. Only a decision `approve` proved
/// counts (`approval_proof`); any other resolution of the awakeable is ignored and the call
/// waits on a new one — after [`MAX_UNPROVED`] of them, it is denied.
async fn decisions(
    ctx: &ObjectContext<'_>,
    requests: Vec<ApprovalRequest>,
) -> Result<Vec<Decision>, HandlerError> {
    let count = requests.len();
    // Drawn from the system's random source in a journaled step: the same on every replay,
    // unknown to whoever knows the invocation id (Restate's own random source is seeded by it).
    let Json(nonces) = ctx
        .run(move || async move {
            crate::approval_proof::nonces(count)
                .map(Json)
                .map_err(|error| TerminalError::new(error.to_string()).into())
        })
        .name("approval nonces")
        .await?;
    let mut waits = Vec::with_capacity(requests.len());
    let mut stored = Vec::with_capacity(requests.len());
    for (request, nonce) in requests.into_iter().zip(nonces) {
        let (awakeable, decided) = ctx.awakeable::<Json<WireDecision>>();
        stored.push(StoredPending {
            call: PendingCall {
                id: request.call_id.clone(),
                tool: request.tool.clone(),
                arguments: request.arguments.clone(),
            },
            awakeable,
            nonce,
            digest: request.shown_digest().as_str().to_owned(),
        });
        waits.push((request, decided));
    }
    ctx.set(PENDING, Json(stored.clone()));
    let mut decisions = Vec::with_capacity(waits.len());
    for (position, (request, mut decided)) in waits.into_iter().enumerate() {
        let mut unproved = 0;
        let answer = loop {
            let Json(decision) = decided.await?;
            if crate::approval_proof::verify(ctx.key(), &stored[position], &decision) {
                break if decision.allow {
                    ApprovalDecision::AllowOnce
                } else {
                    ApprovalDecision::Deny {
                        message: decision.message,
                    }
                };
            }
            unproved += 1;
            if unproved >= MAX_UNPROVED {
                break ApprovalDecision::Deny {
                    message: Some(format!(
                        "denied: its awakeable was resolved {unproved} times without the \
                         approve handler"
                    )),
                };
            }
            let (awakeable, next) = ctx.awakeable::<Json<WireDecision>>();
            stored[position].awakeable = awakeable;
            ctx.set(PENDING, Json(stored.clone()));
            decided = next;
        };
        decisions.push(Decision::for_request(&request, answer));
    }
    ctx.clear(PENDING);
    Ok(decisions)
}

/// How many resolutions without `approve`'s proof a waiting call ignores before it is
/// denied (each one costs a journal entry).
const MAX_UNPROVED: usize = 16;
