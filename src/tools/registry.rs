//! [`ToolRegistry`]: registers tools, offers their definitions to the model, and runs calls —
//! permission-checked, schema-validated, time-limited and panic-isolated.

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::stream::{self, Stream, StreamExt};
use indexmap::IndexMap;
use serde_json::Value;
use tracing::Instrument;

pub use crate::tools::call::{ToolArguments, ToolCallRequest, ToolInvocation, generate_call_id};
pub use crate::tools::validate::validate_tool_name;

use crate::tools::approval::{
    ApprovalDecision, ApprovalPolicy, ApprovalRequest, Approver, GrantRecorder, PermissionDecision,
    SessionGrant, SessionGrants,
};
use crate::tools::approval_trace::{DENIED, DecidedBy, approval_here};
use crate::tools::authorize::{CallAuthority, ask_approver, panic_message};
use crate::tools::base::{BaseTool, default_model_content};
use crate::tools::call::parse_arguments_for;
use crate::tools::call_digest::CallDigest;
use crate::tools::context::ToolContext;
use crate::tools::continuation;
use crate::tools::error::ToolError;
use crate::tools::exposure::{ExposurePolicy, ExposureReport, ToolExposure};
use crate::tools::outcome::{CompletedCall, ToolOutcome};
use crate::tools::permission::{Permission, PermissionChecker, denied_error};
use crate::tools::profile::{Profile, ProfileEntry};
use crate::tools::reasons::{ExposureCheckError, ExposureError, HiddenBecause};
use crate::tools::recheck::{self, CallRules};
use crate::tools::rules::{ArgumentRules, RuleAction};
use crate::tools::validate::{compile_schema, validate_arguments};
use crate::vocab::{ToolAnswer, ToolDefinition};

/// The prefix of a team's handoff tools (`transfer_to_<agent>`): no registered tool may take a
/// name starting with it ([`ToolRegistry::register`]). The same as `team::TRANSFER_PREFIX`.
pub const HANDOFF_PREFIX: &str = "transfer_to_";

/// A registered tool and what registration computed for it once.
#[derive(Clone)]
struct Entry {
    tool: Arc<dyn BaseTool>,
    /// The compiled parameters schema (`None`: the schema accepts anything); shared by the
    /// registries narrowed from this one.
    validator: Option<Arc<jsonschema::Validator>>,
}

/// What `prepare` hands to approval and execution.
struct Prepared<'a> {
    input: Value,
    entry: &'a Entry,
    /// Permissions configured as *ask* that this call needs.
    ask: Vec<Permission>,
    /// Rules on the arguments that ask for approval, explained.
    rule_ask: Option<String>,
    /// The allow rules that let the call skip the approval its permissions ask for.
    allowed_by: Option<String>,
    /// `ask` holds the assumed permissions of a tool that says nothing about what it does.
    unannotated: bool,
}

/// A call's gates, passed once ([`ToolRegistry::gate`]): what the exposure gate,
/// permissions, rules and argument parsing decided — or why the call is refused. The run
/// decides from it whether the call's start rides ahead in the journal, and then runs the
/// call with it, so the gates are not evaluated a second time.
pub(crate) struct Gated<'a>(Result<Prepared<'a>, ToolError>);

impl Gated<'_> {
    /// Whether running the call may ask the approver first (a permission configured as ask,
    /// or a rule on its arguments, that no decision covers yet). A call refused before that
    /// (an unknown tool, bad arguments) does not ask.
    pub(crate) fn may_ask(&self) -> bool {
        self.0
            .as_ref()
            .is_ok_and(|prepared| !prepared.ask.is_empty() || prepared.rule_ask.is_some())
    }
}

/// One call of [`ToolRegistry::run_stream_observed`]: the request, whether a decision already
/// approved it (for the call with this digest, when known), and its gates if already passed.
pub(crate) type ObservedCall<'a> = (
    ToolCallRequest,
    Option<Option<CallDigest>>,
    Option<Gated<'a>>,
);

/// Holds tools by name, in registration order, and runs calls.
///
/// Every call goes through the same steps: look up → exposure gate (profile, restricted mode,
/// flags: a hidden tool never runs) → check permissions → parse and validate the arguments
/// against the tool's JSON Schema (compiled once, at registration) → ask the [`Approver`] when a
/// permission is configured as *ask* → execute (with the timeout, panics caught). A failure at
/// any step is a [`ToolError`] for that call only; the registry and other calls keep working.
///
/// ```
/// # use std::sync::Arc;
/// use agcore::tools::prelude::*;
/// use agcore::tools::{PermissionChecker, PermissionConfig};
///
/// # struct Echo;
/// # #[async_trait]
/// # impl BaseTool for Echo {
/// #     fn name(&self) -> &str { "echo" }
/// #     fn description(&self) -> &str { "Echo" }
/// #     fn parameters(&self) -> Value { json!({"type": "object"}) }
/// #     async fn execute(&self, args: Value) -> Result<Value, ToolError> { Ok(args) }
/// # }
/// # async fn demo() -> Result<(), ToolError> {
/// let mut registry = ToolRegistry::new()
///     .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
/// registry.register(Arc::new(Echo))?;
/// let invocation = registry.invoke("echo", json!({"x": 1})).await?;
/// assert_eq!(invocation.output?, json!({"x": 1}));
/// # Ok(()) }
/// ```
pub struct ToolRegistry {
    tools: IndexMap<String, Entry>,
    permission_checker: Option<Arc<PermissionChecker>>,
    default_timeout: Option<Duration>,
    concurrency_limit: Option<usize>,
    exposure: Option<ExposurePolicy>,
    approval_policy: ApprovalPolicy,
    approver: Option<Arc<dyn Approver>>,
    grants: Arc<SessionGrants>,
    grant_recorder: Option<Arc<dyn GrantRecorder>>,
    rules: Arc<ArgumentRules>,
    /// Tools counted as idempotent besides those that declare it themselves.
    idempotent: Arc<BTreeSet<String>>,
    /// Which tools are deferred: offered only once `tool_search` found them
    /// ([`crate::tools::deferred`]).
    deferred: Arc<[ProfileEntry]>,
    /// Whether the run reports calls' titles and partial input as the model streams them.
    input_updates: bool,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::new()
    }
}

/// A registry is the list of its tools, in registration order (what
/// [`ExposurePolicy::check`] takes).
impl<'a> IntoIterator for &'a ToolRegistry {
    type Item = &'a Arc<dyn BaseTool>;
    type IntoIter = Tools<'a>;

    fn into_iter(self) -> Tools<'a> {
        Tools(self.tools.values())
    }
}

/// The tools of a [`ToolRegistry`], in registration order.
#[derive(Clone)]
pub struct Tools<'a>(indexmap::map::Values<'a, String, Entry>);

impl<'a> Iterator for Tools<'a> {
    type Item = &'a Arc<dyn BaseTool>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|entry| &entry.tool)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.list_tools())
            .field("permission_checker", &self.permission_checker)
            .field("default_timeout", &self.default_timeout)
            .field("concurrency_limit", &self.concurrency_limit)
            .field("exposure", &self.exposure)
            .field("approval_policy", &self.approval_policy)
            .field("approver", &self.approver.is_some())
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry without a permission checker (every call is allowed).
    pub fn new() -> Self {
        ToolRegistry {
            tools: IndexMap::new(),
            permission_checker: None,
            default_timeout: None,
            concurrency_limit: None,
            exposure: None,
            approval_policy: ApprovalPolicy::default(),
            approver: None,
            grants: Arc::new(SessionGrants::default()),
            grant_recorder: None,
            rules: Arc::new(ArgumentRules::default()),
            idempotent: Arc::new(BTreeSet::new()),
            deferred: Arc::new([]),
            input_updates: false,
        }
    }

    /// Have the run report each call while the model streams its arguments: a
    /// [`crate::llm::StreamEvent::ToolCallUpdate`] with the best title so far
    /// ([`BaseTool::title`] on the partial input) and the partial input, parsed with `jiter`'s
    /// partial mode at most every few hundred bytes (see [`crate::tools::streaming`]). Off by
    /// default (nothing is parsed early unless a tool [supports input
    /// streaming](BaseTool::supports_input_streaming)); a UI that shows calls live turns it on.
    pub fn with_input_updates(mut self, on: bool) -> Self {
        self.input_updates = on;
        self
    }

    /// Whether the run reports calls as their arguments stream
    /// ([`ToolRegistry::with_input_updates`]).
    pub fn input_updates(&self) -> bool {
        self.input_updates
    }

    /// Apply exposure gates (profiles, restricted mode, flags) to what the model is offered
    /// and to what may run.
    pub fn with_exposure(mut self, policy: ExposurePolicy) -> Self {
        self.exposure = Some(policy);
        self
    }

    /// The exposure policy, if any.
    pub fn exposure(&self) -> Option<&ExposurePolicy> {
        self.exposure.as_ref()
    }

    /// Allow, ask or deny calls by their arguments ([`crate::tools::rules`]), after the
    /// permission check. Check the rules against the registered tools afterwards with
    /// [`ToolRegistry::check_exposure`].
    pub fn with_argument_rules(mut self, rules: ArgumentRules) -> Self {
        self.rules = Arc::new(rules);
        self
    }

    /// The rules on arguments.
    pub fn argument_rules(&self) -> &ArgumentRules {
        &self.rules
    }

    /// Count the tools named in `names` as idempotent too, as if they declared
    /// [`BaseTool::idempotent`]: a call of one that a crash cut off runs again when the run
    /// resumes, with the same idempotency key, instead of being answered as interrupted. For a
    /// tool whose every call is safe to repeat in the deployment at hand (e.g. `run_command`
    /// when the commands honour `AGCORE_IDEMPOTENCY_KEY`). Names that are not registered are
    /// reported by [`ToolRegistry::check_exposure`].
    pub fn with_idempotent_tools(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.idempotent = Arc::new(names.into_iter().collect());
        self
    }

    /// Whether a call of `name` that a crash cut off may run again: the tool is registered and
    /// declares itself idempotent or is named by [`ToolRegistry::with_idempotent_tools`].
    pub fn is_idempotent(&self, name: &str) -> bool {
        self.tools
            .get(name)
            .is_some_and(|entry| entry.tool.idempotent() || self.idempotent.contains(name))
    }

    /// Tools named idempotent that are not registered.
    fn idempotent_problems(&self) -> impl Iterator<Item = ExposureError> + '_ {
        self.idempotent
            .iter()
            .filter(|name| !self.tools.contains_key(name.as_str()))
            .map(|name| ExposureError::IdempotentUnknownTool { tool: name.clone() })
    }

    /// Deferred entries that match no registered tool (a typo defers nothing, silently).
    fn deferred_problems(&self) -> impl Iterator<Item = ExposureError> + '_ {
        self.deferred
            .iter()
            .filter(|entry| !self.tools().any(|tool| entry.matches(tool.as_ref())))
            .map(|entry| ExposureError::DeferredMatchesNothing {
                entry: entry.to_string(),
            })
    }

    /// Rules on arguments that name a tool that is not registered or an argument it does not
    /// declare.
    pub(crate) fn rule_problems(&self) -> Vec<ExposureError> {
        self.rules.problems(self.tools().map(|tool| tool.as_ref()))
    }

    /// Ask before calls needing the policy's *ask* permissions.
    pub fn with_approval_policy(mut self, policy: ApprovalPolicy) -> Self {
        self.approval_policy = policy;
        self
    }

    /// The approval policy.
    pub fn approval_policy(&self) -> &ApprovalPolicy {
        &self.approval_policy
    }

    /// Who answers approval requests. Without one, every call that needs approval is denied.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Record each new "allow for the session" grant with `recorder` (a session's journal), so
    /// a later process can [restore](ToolRegistry::restore_session_grants) it.
    pub fn with_grant_recorder(mut self, recorder: Arc<dyn GrantRecorder>) -> Self {
        self.grant_recorder = Some(recorder);
        self
    }

    /// Grant again what the session was granted before (e.g. `crate::session::Restored`'s
    /// `grants`): those calls run without asking.
    pub fn restore_session_grants(&self, grants: &[SessionGrant]) {
        for grant in grants {
            self.grants.restore(grant);
        }
    }

    /// Record a new grant (see [`ToolRegistry::with_grant_recorder`]).
    async fn record_grant(&self, grant: Option<SessionGrant>) {
        if let (Some(grant), Some(recorder)) = (grant, &self.grant_recorder) {
            recorder.record_grant(&grant).await;
        }
    }

    /// Forget the session's "allow for the session" grants.
    pub fn clear_session_grants(&self) {
        self.grants.clear();
    }

    /// What the permission rules (checker + approval policy) say about `tool`.
    pub fn permission_decision(&self, tool: &dyn BaseTool) -> PermissionDecision {
        self.approval_policy.decide_for(
            self.permission_checker.as_deref(),
            &tool.required_permissions(),
            tool.permissions_assumed(),
        )
    }

    /// Every exposure decision for `provider`/`model`, explained (the default policy when none
    /// is set: no profile gate, not restricted, no flags).
    pub fn explain(&self, provider: &str, model: &str) -> ExposureReport {
        let default = ExposurePolicy::default();
        let policy = self.exposure.as_ref().unwrap_or(&default);
        let tools = self
            .tools()
            .map(|tool| {
                let decision = self.permission_decision(tool.as_ref());
                let mut hidden_because = policy.gate(tool.as_ref());
                if !tool.supports_provider(provider, model) {
                    hidden_because.push(HiddenBecause::Provider {
                        provider: provider.to_owned(),
                        model: model.to_owned(),
                    });
                }
                if !decision.refused.is_empty() {
                    hidden_because.push(HiddenBecause::Permissions {
                        refused: decision.refused,
                    });
                }
                ToolExposure {
                    rules: self.rules.describe(tool.name()),
                    name: tool.name().to_owned(),
                    source: tool.source(),
                    kind: tool.kind(),
                    permissions: tool.required_permissions(),
                    ask: decision.ask,
                    exposed: hidden_because.is_empty(),
                    hidden_because,
                }
            })
            .collect();
        let mut problems = policy.profile_problems(self);
        problems.extend(self.rule_problems());
        ExposureReport {
            provider: provider.to_owned(),
            model: model.to_owned(),
            profile: policy.active_profile().map(str::to_owned),
            restricted: policy.is_restricted(),
            flags: policy.flags().map(str::to_owned).collect(),
            tools,
            problems,
        }
    }

    /// Check the exposure policy's profiles against the registered tools: a tool name or MCP
    /// server a profile lists that does not exist is an error. Call it after registering.
    pub fn check_exposure(&self) -> Result<(), ExposureCheckError> {
        let problems = self
            .exposure
            .as_ref()
            .map(|policy| policy.profile_problems(self))
            .unwrap_or_default()
            .into_iter()
            .chain(self.rule_problems())
            .chain(self.idempotent_problems())
            .chain(self.deferred_problems())
            .collect::<Vec<_>>();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ExposureCheckError { problems })
        }
    }

    /// Check permissions with `checker` before every call.
    pub fn with_permission_checker(self, checker: PermissionChecker) -> Self {
        self.with_shared_permission_checker(Arc::new(checker))
    }

    /// Check permissions with a checker shared with other registries.
    pub fn with_shared_permission_checker(mut self, checker: Arc<PermissionChecker>) -> Self {
        self.permission_checker = Some(checker);
        self
    }

    /// The permission checker, if any.
    pub fn permission_checker(&self) -> Option<&Arc<PermissionChecker>> {
        self.permission_checker.as_ref()
    }

    /// A timeout for every call of a tool that does not set its own ([`BaseTool::timeout`]).
    /// A call over its limit ends with [`ToolError::Timeout`]; the tool's future is dropped.
    pub fn with_default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = Some(timeout);
        self
    }

    /// This registry as an agent of a team sees it: the same tools, permissions, rules,
    /// approver and session grants, with one more exposure gate — the agent's own list
    /// (`agent`: its path in the team, named in the reason of every tool it hides). What the
    /// agent may call is what both allow: narrowing never widens.
    pub fn narrowed_for_agent(&self, agent: &str, tools: Profile) -> ToolRegistry {
        let policy = self
            .exposure
            .clone()
            .unwrap_or_default()
            .with_agent_tools(agent, tools);
        ToolRegistry {
            tools: self.tools.clone(),
            permission_checker: self.permission_checker.clone(),
            default_timeout: self.default_timeout,
            concurrency_limit: self.concurrency_limit,
            exposure: Some(policy),
            approval_policy: self.approval_policy.clone(),
            approver: self.approver.clone(),
            grants: Arc::clone(&self.grants),
            grant_recorder: self.grant_recorder.clone(),
            rules: Arc::clone(&self.rules),
            idempotent: Arc::clone(&self.idempotent),
            deferred: Arc::clone(&self.deferred),
            input_updates: self.input_updates,
        }
    }

    /// The most calls run at once (`None`: no limit).
    pub fn concurrency_limit(&self) -> Option<usize> {
        self.concurrency_limit
    }

    /// Run at most `limit` calls of one batch at a time (default: all at once; minimum 1).
    pub fn with_concurrency_limit(mut self, limit: usize) -> Self {
        self.concurrency_limit = Some(limit.max(1));
        self
    }

    /// Register a tool. Fails with [`ToolError::DuplicateName`], [`ToolError::InvalidName`]
    /// (not `^[a-zA-Z0-9_-]{1,64}$`, or in the handoff namespace [`HANDOFF_PREFIX`]) or
    /// [`ToolError::InvalidSchema`].
    pub fn register(&mut self, tool: Arc<dyn BaseTool>) -> Result<(), ToolError> {
        let name = tool.name().to_owned();
        validate_tool_name(&name)?;
        // A team's handoffs are offered under these names and answered by the run; a tool of
        // such a name (an MCP server's, say) would look like a handoff in the history.
        if name.starts_with(HANDOFF_PREFIX) {
            return Err(ToolError::InvalidName {
                name,
                reason: format!(
                    "names starting with '{HANDOFF_PREFIX}' are reserved for a team's handoffs"
                ),
            });
        }
        if self.tools.contains_key(&name) {
            return Err(ToolError::DuplicateName(name));
        }
        let validator = compile_schema(&name, &tool.parameters())?;
        let validator = validator.map(Arc::new);
        self.tools.insert(name, Entry { tool, validator });
        Ok(())
    }

    /// Register several tools; stops at the first error (tools before it stay registered).
    pub fn register_all(&mut self, tools: Vec<Arc<dyn BaseTool>>) -> Result<(), ToolError> {
        tools.into_iter().try_for_each(|tool| self.register(tool))
    }

    /// Remove a tool; the order of the others is kept. Its session approval grants go with it.
    pub fn unregister(&mut self, name: &str) -> Option<Arc<dyn BaseTool>> {
        self.grants.forget(name);
        self.tools.shift_remove(name).map(|entry| entry.tool)
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn BaseTool>> {
        self.tools.get(name).map(|entry| entry.tool.clone())
    }

    /// The names of all tools, in registration order.
    pub fn list_tools(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// All tools, in registration order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<dyn BaseTool>> {
        self.tools.values().map(|entry| &entry.tool)
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The definitions of all tools, in registration order (stable, so prompts and prompt
    /// caches are reproducible). The tool loop sends [`ToolRegistry::exposed_definitions`].
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools
            .values()
            .map(|entry| definition_of(entry.tool.as_ref()))
            .collect()
    }

    /// The definitions the model is offered for `provider`/`model`, in registration order:
    /// only tools that pass every exposure gate — profile, restricted mode, flags, provider
    /// support, and permissions that can pass. [`ToolRegistry::explain`] says why the others
    /// are hidden.
    pub fn exposed_definitions(&self, provider: &str, model: &str) -> Vec<ToolDefinition> {
        self.exposed_tools(provider, model)
            .map(|tool| definition_of(tool.as_ref()))
            .collect()
    }

    /// The tools that pass every exposure gate for `provider`/`model`, in registration order
    /// (what [`ToolRegistry::exposed_definitions`] describes; deferred tools included).
    pub fn exposed_tools<'a>(
        &'a self,
        provider: &'a str,
        model: &'a str,
    ) -> impl Iterator<Item = &'a Arc<dyn BaseTool>> + 'a {
        self.tools
            .values()
            .map(|entry| &entry.tool)
            .filter(|tool| self.passes_policy(tool.as_ref()))
            .filter(move |tool| tool.supports_provider(provider, model))
            .filter(|tool| self.permission_decision(tool.as_ref()).refused.is_empty())
    }

    /// Defer the tools these entries match (tool names, `mcp:<server>`, `kind:<kind>`, ...):
    /// they are registered, gated and run as usual, but the model is offered `tool_search`
    /// instead of their schemas until a search finds them ([`crate::tools::deferred`]).
    /// Adds to the entries given before.
    pub fn with_deferred_tools(mut self, entries: impl IntoIterator<Item = ProfileEntry>) -> Self {
        let mut all = self.deferred.to_vec();
        all.extend(entries);
        self.deferred = all.into();
        self
    }

    /// Whether `tool` is deferred ([`ToolRegistry::with_deferred_tools`]).
    pub fn is_deferred(&self, tool: &dyn BaseTool) -> bool {
        self.deferred.iter().any(|entry| entry.matches(tool))
    }

    /// Run one call: look up → exposure gate → check permissions → validate the arguments →
    /// ask for approval if needed → execute.
    ///
    /// Returns `Err` when the call could not start (`NotFound`, `NotExposed`,
    /// `PermissionDenied`, `InvalidArguments`, `ApprovalDenied`); `Ok` with the record once the
    /// tool ran — its `output` holds the tool's error, a `Timeout` or a panic
    /// (`ExecutionFailed`).
    pub async fn invoke(&self, name: &str, args: Value) -> Result<ToolInvocation, ToolError> {
        let started = Instant::now();
        let call = ToolCallRequest::new(generate_call_id(), name, args);
        let prepared = self.prepare(&call)?;
        self.approve(&call, &prepared).await?;
        Ok(self
            .execute(call.id, call.name, prepared, started)
            .await
            .into_invocation())
    }

    /// Pass `call` through the gates (exposure, permissions, rules, parsing, schema) once;
    /// hand the result to [`ToolRegistry::run_stream_observed`] with the call.
    pub(crate) fn gate(&self, call: &ToolCallRequest) -> Gated<'_> {
        Gated(self.prepare(call))
    }

    /// Run one call and record every outcome, failures before execution included.
    pub async fn invoke_call(&self, call: ToolCallRequest) -> ToolInvocation {
        self.run_call(call, None, None, || std::future::ready(Ok(())))
            .await
            .into_invocation()
    }

    /// Run one call to its [`CompletedCall`]. `approved`: a decision already allows it (the
    /// approver is not asked again), given for the call with this digest (when known) — a
    /// call that no longer has it is refused with [`ToolError::ApprovalMismatch`]. `gated`:
    /// the call's gates already passed ([`ToolRegistry::gate`]), else they are passed here.
    /// `gate` runs once the call passed every check, just before its tool executes (from then
    /// on it may have had effects); an `Err` from it refuses the call with
    /// [`ToolError::NotStarted`].
    async fn run_call<'a, G, F>(
        &'a self,
        call: ToolCallRequest,
        approved: Option<Option<CallDigest>>,
        gated: Option<Gated<'a>>,
        gate: G,
    ) -> CompletedCall
    where
        G: FnOnce() -> F,
        F: Future<Output = Result<(), String>>,
    {
        let started = Instant::now();
        let prepared = match gated.map_or_else(|| self.prepare(&call), |gated| gated.0) {
            Ok(prepared) => prepared,
            Err(error) => {
                let by = match &error {
                    ToolError::DeniedByRule { .. } => Some(DecidedBy::Rule),
                    ToolError::PermissionDenied(..) => Some(DecidedBy::Permission),
                    _ => None,
                };
                if let Some(by) = by {
                    approval_here(&call.name, &call.id, &DENIED, by);
                }
                let input = call.arguments.into_value();
                return self.refused(call.id, call.name, input, error, started);
            }
        };
        match approved {
            None => {
                if let Err(error) = self.approve(&call, &prepared).await {
                    return self.refused(call.id, call.name, prepared.input, error, started);
                }
            }
            // What runs must be what was approved: the tool and arguments shown.
            Some(Some(digest)) if digest != CallDigest::of(&call.name, &prepared.input) => {
                approval_here(&call.name, &call.id, &DENIED, DecidedBy::Mismatch);
                let error = ToolError::ApprovalMismatch {
                    tool: call.name.clone(),
                    call_id: call.id.clone(),
                };
                return self.refused(call.id, call.name, prepared.input, error, started);
            }
            Some(_) => {}
        }
        if let Err(reason) = gate().await {
            let error = ToolError::NotStarted {
                tool: call.name.clone(),
                reason,
            };
            return self.refused(call.id, call.name, prepared.input, error, started);
        }
        // Past every gate: a tool watching its streamed input gets the final one now, not before.
        if let Some(feed) = ToolContext::current().and_then(|context| context.take_approval_feed())
        {
            feed.approve(&prepared.input);
        }
        self.execute(call.id, call.name, prepared, started).await
    }

    /// Run calls concurrently (at most the concurrency limit at a time) and yield each record
    /// as soon as it finishes, with its position in `calls`. One failing call does not stop
    /// the others.
    ///
    /// The calls run inside the stream's task: tools must not block the thread (use
    /// `tokio::task::spawn_blocking` for CPU-heavy or blocking work).
    pub fn invoke_stream(
        &self,
        calls: Vec<ToolCallRequest>,
    ) -> impl Stream<Item = (usize, ToolInvocation)> + Send + '_ {
        self.run_stream(calls)
            .map(|(position, call)| (position, call.into_invocation()))
    }

    /// [`ToolRegistry::invoke_stream`] yielding [`CompletedCall`]s: each with its
    /// [`ToolOutcome`](crate::tools::ToolOutcome) (refused or ran) and the model's text,
    /// rendered once.
    pub fn run_stream(
        &self,
        calls: Vec<ToolCallRequest>,
    ) -> impl Stream<Item = (usize, CompletedCall)> + Send + '_ {
        let calls = calls.into_iter().map(|call| (call, None, None)).collect();
        self.run_stream_observed(calls, &NoObserver)
    }

    /// [`ToolRegistry::run_stream`] for the run: each call with whether a decision already
    /// approved it and its gates if the run already passed them, and `observer` told — inside
    /// the call's own future, so that nothing waits for a call the stream's consumer is not
    /// polling — just before a call's tool executes and when the call finished. The run records there that the call started and its answer
    /// (in memory, and in its journal), so that after a cancellation or a crash it knows which
    /// calls may have had effects and which finished.
    pub(crate) fn run_stream_observed<'a>(
        &'a self,
        calls: Vec<ObservedCall<'a>>,
        observer: &'a dyn CallObserver,
    ) -> impl Stream<Item = (usize, CompletedCall)> + Send + 'a {
        let limit = self.concurrency_limit.unwrap_or(calls.len()).max(1);
        stream::iter(calls.into_iter().enumerate())
            .map(move |(position, (call, approved, gated))| {
                // Inside the call's span: its approval events and an MCP request's span
                // belong to it.
                let span = observer.span(position);
                let resume = observer.continuation(position);
                let context = observer.context(position);
                async move {
                    // A call that can be continued (an MCP task) records how, and picks up
                    // where an earlier attempt left off; a call of a run has its context.
                    let run = self.run_call(call, approved, gated, || observer.started(position));
                    let keep = |value| observer.continues(position, value);
                    let continued = continuation::scope(resume, keep, run);
                    let mut completed = match context {
                        Some(context) => context.scope(continued).await,
                        None => continued.await,
                    };
                    observer.finished(position, &mut completed).await;
                    (position, completed)
                }
                .instrument(span)
            })
            .buffer_unordered(limit)
    }

    /// Run the design's `(name, args)` calls concurrently (bounded by the concurrency limit);
    /// the records come back in the order of `calls`, and one failing call does not stop the
    /// others. Each call gets a generated id; to choose the ids (e.g. the model's
    /// `tool_call_id`s), use [`ToolRegistry::invoke_requests`].
    ///
    /// ```
    /// # use agcore::tools::prelude::*;
    /// # async fn demo(registry: &ToolRegistry) {
    /// let records = registry
    ///     .invoke_all(vec![("get_weather".into(), json!({"city": "Paris"}))])
    ///     .await;
    /// assert!(registry.invoke_all(vec![]).await.is_empty());
    /// # }
    /// ```
    pub async fn invoke_all(&self, calls: Vec<(String, Value)>) -> Vec<ToolInvocation> {
        self.invoke_requests(calls.into_iter().map(ToolCallRequest::from))
            .await
    }

    /// Run calls that carry their own ids concurrently (bounded by the concurrency limit); the
    /// records come back in the order of `calls`, and one failing call does not stop the others.
    ///
    /// ```
    /// # use agcore::tools::prelude::*;
    /// # use agcore::tools::ToolCallRequest;
    /// # async fn demo(registry: &ToolRegistry) {
    /// let records = registry
    ///     .invoke_requests([ToolCallRequest::from_json("call_1", "get_weather", r#"{"city":"Paris"}"#)])
    ///     .await;
    /// assert_eq!(records[0].id, "call_1");
    /// # }
    /// ```
    pub async fn invoke_requests(
        &self,
        calls: impl IntoIterator<Item = ToolCallRequest>,
    ) -> Vec<ToolInvocation> {
        let mut done: Vec<(usize, ToolInvocation)> = self
            .invoke_stream(calls.into_iter().collect())
            .collect()
            .await;
        done.sort_unstable_by_key(|(position, _)| *position);
        done.into_iter().map(|(_, invocation)| invocation).collect()
    }

    /// What the model reads for a call: the tool's [`BaseTool::model_content`] of the output,
    /// or for a failure an error text starting with `Error: ` that says what to do next.
    pub fn model_content(&self, invocation: &ToolInvocation) -> String {
        match &invocation.output {
            Ok(output) => match self.tools.get(&invocation.tool_name) {
                Some(entry) => entry.tool.model_content(output),
                None => default_model_content(output),
            },
            Err(error) => self.error_answer(error).content,
        }
    }

    /// The model's view of an error, with a hint where one helps.
    fn error_answer(&self, error: &ToolError) -> ToolAnswer {
        let hint = match error {
            ToolError::NotFound(_) => {
                // Only tools the model could actually use (not hidden by a gate).
                let names: Vec<&str> = self
                    .tools()
                    .filter(|tool| self.passes_policy(tool.as_ref()))
                    .filter(|tool| self.permission_decision(tool.as_ref()).refused.is_empty())
                    .map(|tool| tool.name())
                    .collect();
                if names.is_empty() {
                    " No tools are available.".to_owned()
                } else {
                    format!(" Available tools: {}.", names.join(", "))
                }
            }
            ToolError::InvalidArguments(..) => {
                " Call the tool again with arguments that match its parameters schema.".to_owned()
            }
            ToolError::PermissionDenied(..)
            | ToolError::NotExposed { .. }
            | ToolError::ApprovalDenied { .. }
            | ToolError::ApprovalDeferred { .. }
            | ToolError::ApprovalMismatch { .. }
            | ToolError::DeniedByRule { .. } => {
                " Do not retry this call; continue without it or ask the user.".to_owned()
            }
            ToolError::Timeout { .. } => {
                " Try a smaller or simpler request, or continue without it.".to_owned()
            }
            // The structured output of the failure, for the model to act on.
            ToolError::FailedWithOutput { output, .. } => format!("\nOutput: {output}"),
            _ => String::new(),
        };
        let text = error.to_string();
        ToolAnswer::error(format_args!("{}.{hint}", text.trim_end_matches('.')))
    }

    /// Whether the exposure policy's own gates (profile, restricted mode, flags) let `tool`
    /// through.
    fn passes_policy(&self, tool: &dyn BaseTool) -> bool {
        self.exposure
            .as_ref()
            .is_none_or(|policy| policy.gate(tool).is_empty())
    }

    /// Everything before approval and execution: lookup, exposure gate, permissions, argument
    /// parsing and validation. Arguments are validated before a human is asked, so nobody
    /// approves a call that would be rejected anyway.
    fn prepare(&self, call: &ToolCallRequest) -> Result<Prepared<'_>, ToolError> {
        let entry = self
            .tools
            .get(&call.name)
            .ok_or_else(|| ToolError::NotFound(call.name.clone()))?;
        let tool = entry.tool.as_ref();
        if let Some(policy) = &self.exposure {
            let reasons = policy.gate(tool);
            if !reasons.is_empty() {
                return Err(ToolError::NotExposed {
                    tool: call.name.clone(),
                    reasons,
                });
            }
        }
        let decision = self.permission_decision(tool);
        if !decision.refused.is_empty() {
            return Err(denied_error(
                &call.name,
                &decision.refused,
                tool.required_permissions().is_empty(),
            ));
        }
        let input = match &call.arguments {
            ToolArguments::Value(value) => value.clone(),
            ToolArguments::Json(text) => parse_arguments_for(&call.name, text)?,
        };
        if let Some(validator) = &entry.validator {
            validate_arguments(&call.name, validator, &input)?;
        }
        // After the permission check: a denied permission stays denied; deny beats ask beats
        // allow among the rules that match.
        let mut ask = decision.ask;
        let mut rule_ask = None;
        let mut allowed_by = None;
        if !self.rules.is_empty() {
            let verdict = self.rules.evaluate_for(tool, &input);
            match verdict.action {
                Some(RuleAction::Deny) => {
                    return Err(ToolError::DeniedByRule {
                        tool: call.name.clone(),
                        because: verdict.explain(),
                    });
                }
                Some(RuleAction::Ask) => rule_ask = Some(verdict.explain()),
                Some(RuleAction::Allow) => {
                    if !ask.is_empty() {
                        allowed_by = Some(verdict.explain());
                    }
                    ask.clear();
                }
                None => {}
            }
        }
        Ok(Prepared {
            input,
            entry,
            unannotated: decision.unannotated && !ask.is_empty(),
            ask,
            rule_ask,
            allowed_by,
        })
    }

    /// Ask the approver when the call needs a permission configured as *ask* (unless the
    /// session already granted it).
    async fn approve(
        &self,
        call: &ToolCallRequest,
        prepared: &Prepared<'_>,
    ) -> Result<(), ToolError> {
        if prepared.ask.is_empty() && prepared.rule_ask.is_none() {
            return Ok(());
        }
        // One question at a time, and the grants checked after waiting: two parallel calls of
        // a tool must not both ask when the first answer is "allow for the session".
        let _turn = self.grants.ask_turn().await;
        if self.grants.covers(&call.name, &prepared.input) {
            approval_here(
                &call.name,
                &call.id,
                &ApprovalDecision::AllowOnce,
                DecidedBy::Grant,
            );
            return Ok(());
        }
        let needs = prepared
            .ask
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        // Why it asks: the permissions configured as ask, or a rule on its arguments.
        let why = match &prepared.rule_ask {
            Some(because) => format!("a rule on its arguments asks for approval ({because})"),
            None if prepared.unannotated => format!(
                "it does not say what it does (no annotations), so it may need {needs}; each call is asked"
            ),
            None => format!("it needs {needs}, which is configured as ask"),
        };
        let Some(approver) = &self.approver else {
            approval_here(&call.name, &call.id, &DENIED, DecidedBy::NoApprover);
            return Err(ToolError::ApprovalDenied {
                tool: call.name.clone(),
                message: match &prepared.rule_ask {
                    Some(_) => format!("{why}, and no approver is configured"),
                    None if prepared.unannotated => {
                        format!("{why}, and no approver is configured")
                    }
                    None => format!(
                        "it needs {needs}, which requires approval, and no approver is configured"
                    ),
                },
            });
        };
        let tool = prepared.entry.tool.as_ref();
        let request = ApprovalRequest {
            tool: call.name.clone(),
            call_id: call.id.clone(),
            title: tool.title(&prepared.input),
            kind: tool.kind(),
            arguments: prepared.input.clone(),
            permissions: prepared.ask.clone(),
            reason: match &prepared.rule_ask {
                Some(_) => format!("tool '{}': {why}", call.name),
                None => format!("tool '{}' {}", call.name, why.trim_start_matches("it ")),
            },
            digest: Some(CallDigest::of(&call.name, &prepared.input)),
        };
        let decision = ask_approver(approver.as_ref(), &request).await;
        approval_here(&call.name, &call.id, &decision, DecidedBy::Approver);
        let granted = self.grants.remember(&call.name, &prepared.input, &decision);
        self.record_grant(granted).await;
        match decision {
            ApprovalDecision::Deny { message } => Err(ToolError::ApprovalDenied {
                tool: call.name.clone(),
                message: message.unwrap_or_else(|| "the user declined this call".to_owned()),
            }),
            ApprovalDecision::Defer => Err(ToolError::ApprovalDeferred {
                request: Box::new(request),
            }),
            ApprovalDecision::AllowOnce
            | ApprovalDecision::AllowForSession
            | ApprovalDecision::AllowForSessionWithArgs => Ok(()),
        }
    }

    /// Ask the approver about a pending request of a suspended run (no approver: deferred
    /// again); a session-wide answer is remembered as when asked during a call.
    pub(crate) async fn ask_pending(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let Some(approver) = &self.approver else {
            let decision = ApprovalDecision::Defer;
            approval_here(
                &request.tool,
                &request.call_id,
                &decision,
                DecidedBy::NoApprover,
            );
            return decision;
        };
        let _turn = self.grants.ask_turn().await;
        if self.grants.covers(&request.tool, &request.arguments) {
            let decision = ApprovalDecision::AllowOnce;
            approval_here(&request.tool, &request.call_id, &decision, DecidedBy::Grant);
            return decision;
        }
        let decision = ask_approver(approver.as_ref(), request).await;
        approval_here(
            &request.tool,
            &request.call_id,
            &decision,
            DecidedBy::Approver,
        );
        let granted = self
            .grants
            .remember(&request.tool, &request.arguments, &decision);
        self.record_grant(granted).await;
        decision
    }

    /// Remember a session-wide decision given for a suspended run's request.
    pub(crate) fn remember_grant(&self, request: &ApprovalRequest, decision: &ApprovalDecision) {
        let granted = self
            .grants
            .remember(&request.tool, &request.arguments, decision);
        // Called outside an async context: recorded on a task of the runtime, if there is one.
        if let (Some(grant), Some(recorder), Ok(runtime)) = (
            granted,
            self.grant_recorder.clone(),
            tokio::runtime::Handle::try_current(),
        ) {
            runtime.spawn(async move { recorder.record_grant(&grant).await });
        }
    }

    /// Execute with the timeout, a panic caught as [`ToolError::ExecutionFailed`].
    async fn execute(
        &self,
        id: String,
        tool_name: String,
        prepared: Prepared<'_>,
        started: Instant,
    ) -> CompletedCall {
        let Prepared {
            input,
            entry,
            allowed_by,
            ..
        } = prepared;
        let tool = &entry.tool;
        // With rules, the call runs with them at hand: a value the tool arrives at mid-call
        // (a redirect target) is checked too ([`recheck`]).
        let call_rules = (!self.rules.is_empty()).then(|| CallRules {
            rules: Arc::clone(&self.rules),
            tool: Arc::clone(tool),
            input: input.clone(),
            allowed_by,
        });
        // The call may ask mid-run ([`ToolContext::authorize`]) through the same approver.
        let authority = CallAuthority {
            call_id: id.clone(),
            tool: Arc::clone(tool),
            input: input.clone(),
            approver: self.approver.clone(),
            grants: Arc::clone(&self.grants),
            recorder: self.grant_recorder.clone(),
            rules: Arc::clone(&self.rules),
        };
        let execution = authority.scope(tool.execute_rendered(input.clone()));
        let run = AssertUnwindSafe(async move {
            match call_rules {
                Some(call_rules) => recheck::scope(call_rules, execution).await,
                None => execution.await,
            }
        })
        .catch_unwind();
        let outcome = match tool.timeout().or(self.default_timeout) {
            Some(limit) => match tokio::time::timeout(limit, run).await {
                Ok(outcome) => outcome,
                Err(_) => Ok(Err(ToolError::Timeout {
                    tool: tool_name.clone(),
                    limit,
                })),
            },
            None => run.await,
        };
        let rendered = outcome.unwrap_or_else(|panic| {
            Err(ToolError::ExecutionFailed(
                tool_name.clone(),
                format!("the tool panicked: {}", panic_message(panic.as_ref())),
            ))
        });
        // Rendered here, with the tool at hand: no second lookup later.
        let (result, answer, media) = match rendered {
            Ok((output, text)) => {
                let media = tool.media(&output);
                (Ok(output), ToolAnswer::ok(text), media)
            }
            Err(error) => {
                let answer = self.error_answer(&error);
                (Err(error), answer, Vec::new())
            }
        };
        CompletedCall {
            id,
            tool_name,
            input,
            outcome: ToolOutcome::Ran { result },
            answer,
            media,
            duration: started.elapsed(),
        }
    }

    /// The record of a call refused before its tool started.
    fn refused(
        &self,
        id: String,
        tool_name: String,
        input: Value,
        reason: ToolError,
        started: Instant,
    ) -> CompletedCall {
        CompletedCall {
            id,
            tool_name,
            input,
            answer: self.error_answer(&reason),
            media: Vec::new(),
            outcome: ToolOutcome::Refused { reason },
            duration: started.elapsed(),
        }
    }
}

/// Told about each call of [`ToolRegistry::run_stream_observed`] as it starts and finishes.
#[async_trait::async_trait]
pub(crate) trait CallObserver: Send + Sync {
    /// The call at `position` passed every check and its tool is about to execute; an `Err`
    /// refuses it instead ([`ToolError::NotStarted`]).
    async fn started(&self, position: usize) -> Result<(), String>;

    /// The call at `position` finished (or was refused); its answer may be edited.
    async fn finished(&self, position: usize, call: &mut CompletedCall);

    /// The span the call at `position` runs in (none: the stream's).
    fn span(&self, _position: usize) -> tracing::Span {
        tracing::Span::none()
    }

    /// What an earlier attempt of the call at `position` recorded to be continued from
    /// ([`crate::tools::continuation`]), if anything.
    fn continuation(&self, _position: usize) -> Option<serde_json::Value> {
        None
    }

    /// The call at `position` recorded how to continue it: keep it (durably) before it goes on.
    async fn continues(&self, _position: usize, _value: serde_json::Value) -> Result<(), String> {
        Ok(())
    }

    /// The context the call at `position` runs in ([`ToolContext::current`]); none by default.
    fn context(&self, _position: usize) -> Option<ToolContext> {
        None
    }
}

/// Observes nothing.
struct NoObserver;

#[async_trait::async_trait]
impl CallObserver for NoObserver {
    async fn started(&self, _position: usize) -> Result<(), String> {
        Ok(())
    }

    async fn finished(&self, _position: usize, _call: &mut CompletedCall) {}
}

/// The definition the model sees for `tool`.
pub fn definition_of(tool: &dyn BaseTool) -> ToolDefinition {
    ToolDefinition::function(tool.name(), tool.current_description(), tool.parameters())
}
