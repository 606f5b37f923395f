//! The composition root: builds what the model commands (`run`, `chat`, `tools`) need from
//! the arguments and `agcore.toml` — the model cycle (client, limits, hooks, context, system
//! prompt) and the tool registry (built-in tools, MCP servers, permissions, profiles,
//! approvals). The settings it reads are [`crate::settings`]'s.

use agcore::display::{escape_for_terminal, escape_keeping_lines};

use std::sync::Arc;

use agcore::llm::providers::Connection;
use agcore::llm::{
    ChatModel, CycleConfig, FallbackModel, LlmCycle, OpenaiChatMessage, ReasoningEffort,
    TransportSettings,
};
use agcore::tools::ToolRegistry;
use agcore::tools::builtin::{BuiltinOptions, Workspace, builtin_tools_with};
use agcore::tools::mcp::{McpClient, McpHandle, McpServerStatus, register_mcp_tools};
use anyhow::{Context, bail};

use crate::approve::approver_for;
use crate::cli::{ModelArgs, ToolArgs};
use crate::config::AgcoreConfig;
use crate::layers::Loaded;
use crate::mcp_connect::connect_servers;
use crate::secrets::Secrets;
use crate::settings::{Reasoning, Target, fallback_targets, mcp_servers, secret_env_names, target};

/// The timeout of a tool call whose tool sets none of its own (MCP tools; the built-in tools
/// have their own, `run_command` its per-command timeout).
pub const TOOL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// How many calls of one turn run at once.
pub const TOOL_CONCURRENCY: usize = 8;

/// A cycle for the model the arguments (then the config, then the environment) describe.
/// The key comes from `secrets`: the variable itself was removed from the environment.
pub fn build_cycle(
    args: &ModelArgs,
    config: &AgcoreConfig,
    secrets: &Secrets,
) -> anyhow::Result<LlmCycle> {
    let (client, cycle_config, system) = cycle_parts(args, config, secrets)?;
    let mut cycle = LlmCycle::new(client, cycle_config);
    if let Some(system) = system {
        cycle.set_system_prompt(system);
    }
    Ok(cycle)
}

/// [`build_cycle`] continuing a stored session's `history` (each run records into the
/// session's journal). The system prompt of the arguments or the config replaces the stored
/// one (the journal stores the change).
pub fn build_session_cycle(
    args: &ModelArgs,
    config: &AgcoreConfig,
    secrets: &Secrets,
    history: Vec<OpenaiChatMessage>,
) -> anyhow::Result<LlmCycle> {
    let (client, cycle_config, system) = cycle_parts(args, config, secrets)?;
    let mut cycle = LlmCycle::from_history(client, cycle_config, history);
    if let Some(system) = system
        && cycle.system_prompt().as_deref() != Some(system.as_str())
    {
        cycle.set_system_prompt(system);
    }
    Ok(cycle)
}

/// The model, the cycle's configuration and the system prompt the arguments describe.
fn cycle_parts(
    args: &ModelArgs,
    config: &AgcoreConfig,
    secrets: &Secrets,
) -> anyhow::Result<(Arc<dyn ChatModel>, CycleConfig, Option<String>)> {
    let section = &config.model;
    let target = target(args, config)?;
    let fallbacks = fallback_targets(config)?;
    let primary = client_for(&target, section, secrets)?;
    let model: Arc<dyn ChatModel> = if fallbacks.is_empty() {
        primary
    } else {
        let mut chain = FallbackModel::new(primary, target.model.clone());
        for fallback in &fallbacks {
            chain = chain.with_fallback(
                client_for(fallback, section, secrets)?,
                fallback.model.clone(),
            );
        }
        Arc::new(chain)
    };
    // MCP servers allowed to sample use this model (after the user approves each request).
    crate::sampling::offer_model(&model, &target.model);
    let mut cycle_config = CycleConfig::new(target.model.clone());
    cycle_config.max_turns = args.max_turns.or(section.max_turns);
    cycle_config.accepts_images = section.accepts_images.unwrap_or(false);
    cycle_config.usage_limits = crate::usage::limits(args, config);
    cycle_config.prices = config.prices.get(&cycle_config.model).copied();
    // `--restricted` is folded into the config (`settings::load_config`).
    cycle_config.hooks = crate::hooks::chain(&config.hooks, config.tools.restricted);
    cycle_config.reply_limits = agcore::llm::ReplyLimits::default()
        .with_max_message_bytes(16 * MIB)
        .with_max_tool_calls(256);
    if let Some(reasoning) = args.reasoning.or(section.reasoning) {
        apply_reasoning(&mut cycle_config.options, reasoning);
    }
    let hosted = crate::hosted_tools::chosen(&args.hosted_tools, section, &target.provider)?;
    crate::hosted_tools::check(&hosted, target.api.provider().api)?;
    cycle_config.options.hosted_tools = hosted;
    crate::context_cli::configure(&mut cycle_config, args, config);
    let composed = crate::system_prompt::compose(args, config)?;
    for note in &composed.notes {
        eprintln!("note: {}", escape_keeping_lines(note));
    }
    Ok((model, cycle_config, composed.text))
}

const MIB: usize = 1024 * 1024;

/// The client of one model: its API's backend, with the `[model]` timeouts and the bounds
/// every backend gets.
pub(crate) fn client_for(
    target: &Target,
    section: &crate::config::ModelSection,
    secrets: &Secrets,
) -> anyhow::Result<Arc<dyn ChatModel>> {
    // A hostile or broken server gets bounded memory and time (issue 10, item 8): far above
    // any real reply, far below what would hurt the machine.
    let seconds = |value: Option<crate::config::Seconds>, default: u64| {
        value.map_or(std::time::Duration::from_secs(default), |seconds| seconds.0)
    };
    let key = target.key(secrets);
    let transport = TransportSettings::default()
        .with_max_event_bytes(4 * MIB)
        .with_max_response_bytes(16 * MIB)
        .with_request_timeout(seconds(section.request_timeout, 600))
        .with_stream_idle_timeout(seconds(section.stream_idle_timeout, 300))
        .with_response_deadline(seconds(section.response_deadline, 15 * 60));
    let transport = TransportSettings {
        propagate_trace_context: section.propagate_trace_context.unwrap_or(false),
        ..transport
    };
    let mut connection =
        Connection::new(target.provider.clone(), target.base_url.clone()).with_transport(transport);
    connection.api_key = key.map(str::to_owned);
    connection.cloud.region = section.region.clone();
    connection.cloud.profile = section.profile.clone();
    if target.api.name() == agcore::llm::bedrock::PROVIDER.name && connection.api_key.is_none() {
        return bedrock_client(connection, secrets);
    }
    target
        .api
        .provider()
        .connect(connection)
        .context("could not create the HTTP client")
}

/// A Bedrock client: SigV4 with the AWS keys agcore took out of its environment when they were
/// set and no `[model] profile` is named (the default chain cannot see them any more), else
/// with the default chain (profile,
/// SSO, web identity, container, instance metadata).
fn bedrock_client(connection: Connection, secrets: &Secrets) -> anyhow::Result<Arc<dyn ChatModel>> {
    use agcore::llm::bedrock::{BedrockClient, BedrockConfig};
    // A profile named in the config wins over keys in the environment.
    let profile_named = connection.cloud.profile.is_some();
    let mut config = BedrockConfig::from_connection(connection, crate::settings::env)
        .context("could not set up Bedrock")?;
    if let (false, Some(id), Some(secret)) = (
        profile_named,
        secrets.get("AWS_ACCESS_KEY_ID"),
        secrets.get("AWS_SECRET_ACCESS_KEY"),
    ) {
        config = config.with_static_keys(
            id,
            secret,
            secrets.get("AWS_SESSION_TOKEN").map(str::to_owned),
        );
    }
    Ok(Arc::new(
        BedrockClient::new(config).context("could not create the HTTP client")?,
    ))
}

/// `--reasoning` into the request options: an effort, or a budget in tokens (sent as the
/// API's budget where it has one, with the nearest effort for the APIs that have none).
fn apply_reasoning(options: &mut agcore::vocab::RequestOptions, reasoning: Reasoning) {
    let effort = match reasoning {
        Reasoning::Off => ReasoningEffort::Off,
        Reasoning::Low => ReasoningEffort::Low,
        Reasoning::Medium => ReasoningEffort::Medium,
        Reasoning::High => ReasoningEffort::High,
        // An API without a budget gets the effort nearest to it.
        Reasoning::Budget(tokens) => {
            options.reasoning_budget_tokens = Some(tokens);
            match tokens {
                0..4_096 => ReasoningEffort::Low,
                4_096..16_384 => ReasoningEffort::Medium,
                _ => ReasoningEffort::High,
            }
        }
    };
    options.reasoning_effort = Some(effort);
}

/// The registry the arguments and config describe, and the status of each MCP server
/// (a server that fails is reported, not fatal). `check_profiles` makes profile problems
/// errors (`agcore tools` shows them in its report instead). `model` names the API key
/// variable `run_command` must not pass on (besides `OPENAI_API_KEY` and the config's).
pub async fn build_registry(
    tool_args: &ToolArgs,
    model: Option<&ModelArgs>,
    loaded: &Loaded,
    check_profiles: bool,
) -> anyhow::Result<(ToolRegistry, Vec<McpServerStatus>)> {
    let (registry, statuses, _) =
        build_registry_with_mcp(tool_args, model, loaded, check_profiles).await?;
    Ok((registry, statuses))
}

/// The config's tool settings with the arguments' profile, restricted mode and flags applied.
pub fn effective_tools(config: &AgcoreConfig, tool_args: &ToolArgs) -> agcore::tools::ToolsConfig {
    let mut tools = config.tools.clone();
    if let Some(profile) = &tool_args.profile {
        tools.profile = Some(profile.clone());
    }
    if tool_args.restricted {
        tools.restricted = true;
    }
    tools.flags.extend(tool_args.flags.iter().cloned());
    tools
}

/// The built-in tools' options the config and arguments give (`tools`: the config's tool
/// settings with the arguments applied, restricted mode included).
pub fn builtin_options(
    config: &AgcoreConfig,
    model: Option<&ModelArgs>,
    tools: &agcore::tools::ToolsConfig,
    tool_args: &ToolArgs,
) -> anyhow::Result<BuiltinOptions> {
    // Commands the model runs must not see the model's API key.
    Ok(BuiltinOptions::default()
        .withholding(secret_env_names(config, model))
        .allow_private_network(config.builtin.allow_private_network)
        .protecting_files(agent_files(config))
        .sandbox(crate::sandbox_cmd::policy(tools, tool_args.sandbox))
        .sandbox_helper(crate::sandbox_cmd::helper()?))
}

/// [`build_registry`], and a handle of each connected MCP server (for `/resources`, `/prompt`).
pub async fn build_registry_with_mcp(
    tool_args: &ToolArgs,
    model: Option<&ModelArgs>,
    loaded: &Loaded,
    check_profiles: bool,
) -> anyhow::Result<(ToolRegistry, Vec<McpServerStatus>, Vec<McpHandle>)> {
    let config = &loaded.config;
    let mut tools = effective_tools(config, tool_args);
    // MCP tools that say nothing about what they do are offered and asked per call, unless
    // the config says `unannotated = "hide"`.
    tools
        .unannotated
        .get_or_insert(agcore::tools::UnannotatedTools::Ask);
    let approver = approver_for(tool_args.yes);
    // Bounded by default: a tool without a timeout of its own gets TOOL_TIMEOUT, and one turn's
    // calls run at most TOOL_CONCURRENCY at a time (run_command caps its processes itself too).
    let registry = ToolRegistry::new()
        .with_default_timeout(TOOL_TIMEOUT)
        .with_concurrency_limit(TOOL_CONCURRENCY);
    let mut registry = tools.apply(registry)?.with_approver(approver);

    let named = |set: &str| tool_args.tools.iter().any(|t| t == set);
    if named("none") {
        if named("builtin") {
            bail!("--tools none cannot be combined with --tools builtin");
        }
        // No tools at all: nothing is offered, so there is nothing for profiles to gate.
        return Ok((registry, Vec::new(), Vec::new()));
    }
    if named("builtin") || config.builtin.enabled {
        let root = tool_args
            .workspace
            .clone()
            .or_else(|| config.builtin.root.clone())
            .map(Ok)
            .unwrap_or_else(std::env::current_dir)?;
        let workspace = Workspace::new(&root)
            .with_context(|| format!("cannot use {} as the workspace", root.display()))?;
        let options = builtin_options(config, model, &tools, tool_args)?;
        registry.register_all(builtin_tools_with(&workspace, &options))?;
    }
    if let Some(dir) = crate::context_cli::spill_dir(config) {
        registry.register(std::sync::Arc::new(agcore::context::ReadOutput::new(dir)))?;
    }

    let servers = mcp_servers(loaded, tool_args.mcp_config.as_deref())?;
    let mut statuses = Vec::new();
    let mut connected = Vec::new();
    // MCP servers must not see the model's API key either.
    let secrets = secret_env_names(config, model);
    for (name, result) in connect_servers(&servers, &secrets, tools.restricted).await {
        statuses.push(McpServerStatus::of(&name, &result));
        match result {
            Ok(client) => connected.push(client),
            Err(error) => eprintln!(
                "warning: MCP server '{}' is unavailable: {}",
                escape_for_terminal(&name),
                escape_keeping_lines(&error.to_string())
            ),
        }
    }
    let handles: Vec<McpHandle> = connected.iter().map(McpClient::handle).collect();
    register_mcp_tools(&mut registry, connected)?;
    // Servers with `"deferLoading": true` (those that started): their tools are found with
    // tool_search.
    let started = |entry: &agcore::tools::profile::ProfileEntry| {
        handles.iter().any(|handle| {
            matches!(entry, agcore::tools::profile::ProfileEntry::McpServer(server) if server == handle.server_name())
        })
    };
    registry = registry.with_deferred_tools(servers.deferred_tools().into_iter().filter(started));
    // Servers with resources get read-only list/read tools for the model; prompts only where
    // the user asked (`"promptTools": true`), since MCP prompts are for the user to pick.
    let wants_prompts = |handle: &McpHandle| {
        servers
            .servers
            .get(handle.server_name())
            .is_some_and(|entry| entry.prompt_tools)
    };
    let prompt_tools = handles
        .iter()
        .filter(|handle| wants_prompts(handle))
        .flat_map(McpHandle::prompt_tools);
    for tool in handles
        .iter()
        .flat_map(McpHandle::resource_tools)
        .chain(prompt_tools)
    {
        let name = tool.name().to_owned();
        if let Err(error) = registry.register(tool) {
            eprintln!(
                "warning: MCP tool '{}' not registered: {}",
                escape_for_terminal(&name),
                escape_keeping_lines(&error.to_string())
            );
        }
    }
    if check_profiles {
        // A typo in a profile, or a tool no profile reaches, is an error, not a silent no-op.
        registry.check_exposure()?;
    }
    Ok((registry, statuses, handles))
}

/// The files the config's agents read (instructions, output schemas): the write tools refuse
/// them like agcore's own config — a model must not rewrite its own guardrail.
fn agent_files(config: &AgcoreConfig) -> Vec<std::path::PathBuf> {
    config
        .agents
        .values()
        .flat_map(|agent| {
            let schema = match &agent.output_schema {
                Some(crate::agents_config::SchemaSource::File(file)) => Some(file.clone()),
                _ => None,
            };
            agent.instructions_file.clone().into_iter().chain(schema)
        })
        .collect()
}
