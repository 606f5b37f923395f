//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Build and run LLM agents: OpenAI-compatible models, MCP servers, permission-checked tools.
#[derive(Debug, Parser)]
#[command(name = "agcore", version, about)]
pub struct Cli {
    /// More logging on stderr (-v info, -vv debug); AGCORE_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Send one prompt and print the answer (tools run automatically when available).
    Run(RunArgs),
    /// An interactive session: streaming answers, live tool calls, approvals, /tools /clear /save.
    Chat(ChatArgs),
    /// List every tool with its source, kind, permissions, and whether the model sees it (and why not).
    Tools(ToolsArgs),
    /// Inspect and call MCP servers.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// The whole pipeline offline: a scripted model, built-in tools, a real MCP server, a denial.
    Demo(DemoArgs),
    /// Trust a workspace's agcore.toml (shows what it does first), revoke or list trust.
    Trust(TrustArgs),
    /// Stored conversations (`run --session`, `chat --session`): list, show, rm.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Serve the Agent Client Protocol on stdio: agcore as an agent inside Zed, JetBrains or
    /// Neovim (CodeCompanion). The editor starts it; see docs/15-editors.md.
    Acp(AcpArgs),
    /// The team of agents of agcore.toml (`[agents.NAME]`, run with `run --agent NAME`).
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// Agent runs on Restate: serve the AgentSession endpoint, register it.
    #[command(subcommand)]
    Restate(RestateCommand),
    /// Run a command under an OS sandbox policy, to try it (the exit status is the command's).
    Sandbox(SandboxArgs),
    /// Serve agcore's demo MCP server on stdio (used by `agcore demo`).
    #[command(hide = true)]
    McpDemoServer {
        /// The demo server's own arguments (`--test-tools`, `--page-size N`, `--fault MODE`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// `agcore sandbox`.
#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// read-only, workspace-write or full (no sandbox).
    #[arg(long, default_value = "workspace-write")]
    pub policy: agcore::tools::sandbox::SandboxMode,
    /// Let the command use the network (default: off).
    #[arg(long)]
    pub network_on: bool,
    /// With the network off, let the command reach HOST through agcore's HTTPS proxy (an
    /// exact name, `*.example.com` for subdomains, or an IP address); repeatable.
    #[arg(
        long = "allow-host",
        value_name = "HOST",
        conflicts_with = "network_on"
    )]
    pub allow_hosts: Vec<String>,
    /// The workspace (writable under workspace-write; the command's directory). Default: the
    /// current directory.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// The command and its arguments (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub command: Vec<String>,
}

/// `agcore restate`: agent runs on a Restate cluster.
#[derive(Debug, Subcommand)]
pub enum RestateCommand {
    /// Serve the AgentSession Virtual Object (handlers run, approve, state) over HTTP/2
    /// cleartext; register the endpoint with Restate (`agcore restate register`).
    // Boxed: the model and tool flags make it far larger than `Register`.
    Serve(Box<RestateServeArgs>),
    /// Register an endpoint with Restate through its admin API (`POST /deployments`): Restate
    /// dials the endpoint and discovers its services. Prints them.
    Register(RestateRegisterArgs),
}

/// `agcore restate register`.
#[derive(Debug, Args)]
pub struct RestateRegisterArgs {
    /// Restate's admin API (`http://restate:9070`).
    #[arg(long, value_name = "URL")]
    pub admin: String,
    /// The endpoint's URL as Restate reaches it (`http://agent-endpoints:9080`).
    #[arg(long, value_name = "URL")]
    pub endpoint: String,
    /// Replace an existing deployment at the same URL (its services may have changed).
    #[arg(long)]
    pub force: bool,
    /// Give up after this many seconds (Restate dials the endpoint within it).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub timeout: f64,
}

/// `agcore restate serve`.
#[derive(Debug, Args)]
pub struct RestateServeArgs {
    /// The address to listen on (`127.0.0.1:9080`). An address other than loopback needs
    /// --identity-key: without it the endpoint refuses to start.
    #[arg(long, value_name = "ADDR")]
    pub bind: std::net::SocketAddr,
    /// Serve only requests Restate signed with this request identity key (`publickeyv1_…`,
    /// the public half of Restate's `request-identity-private-key-pem-file`); repeat it to
    /// rotate keys. Required unless --bind is a loopback address [config:
    /// restate.identity_keys].
    #[arg(long, value_name = "KEY")]
    pub identity_key: Vec<String>,
    /// Where the model is.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Which tools (`--yes` runs calls that need approval without waiting for `approve`).
    #[command(flatten)]
    pub tools: ToolArgs,
}

/// Where the model is.
#[derive(Debug, Args, Clone, Default)]
pub struct ModelArgs {
    /// The model API: openai (chat completions, any OpenAI-compatible server),
    /// openai-responses, anthropic (Messages) or gemini [config: model.provider; env:
    /// AGCORE_PROVIDER; default openai].
    #[arg(long, value_name = "PROVIDER", value_parser = clap::builder::PossibleValuesParser::new(crate::provider::Api::names()))]
    pub provider: Option<String>,
    /// The API's base URL, up to where its resource path begins: OpenAI `…/v1`, Anthropic
    /// `…/v1`, Gemini `…/v1beta` [config: model.base_url; env: OPENAI_BASE_URL (OpenAI APIs
    /// only); default: the vendor's public URL].
    #[arg(long)]
    pub base_url: Option<String>,
    /// Model name, or PROVIDER:NAME (`anthropic:claude-sonnet-4-5`) to pick the provider too
    /// [config: model.model; env: AGCORE_MODEL].
    #[arg(long)]
    pub model: Option<String>,
    /// Environment variable holding the API key (default: OPENAI_API_KEY; ANTHROPIC_API_KEY for
    /// anthropic; GEMINI_API_KEY, then GOOGLE_API_KEY for gemini; none is fine for local servers).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Reasoning effort: off, low, medium, high, or a budget in tokens (`8000`), mapped to each
    /// API's own parameter [config: model.reasoning; default: the API's].
    #[arg(long, value_name = "EFFORT", value_parser = crate::provider::parse_reasoning)]
    pub reasoning: Option<crate::provider::Reasoning>,
    /// Turn on a tool the provider runs itself (repeatable): web_search, web_fetch,
    /// code_execution (anthropic); web_search, code_interpreter, file_search
    /// (openai-responses); google_search, code_execution, url_context (gemini)
    /// [config: model.hosted_tools].
    #[arg(long = "hosted-tool", value_name = "NAME")]
    pub hosted_tools: Vec<String>,
    /// The system prompt, a minijinja template (variables from --var), after agcore's base
    /// instructions and the workspace's AGENTS.md [config: model.system].
    #[arg(long, conflicts_with = "system_file")]
    pub system: Option<String>,
    /// The system prompt from FILE, a minijinja template like --system.
    #[arg(long, value_name = "FILE")]
    pub system_file: Option<PathBuf>,
    /// A variable of the system prompt template (repeatable); an undefined one is an error.
    #[arg(long = "var", value_name = "KEY=VALUE")]
    pub vars: Vec<String>,
    /// With --restricted, put the workspace's AGENTS.md in the system prompt anyway (it is
    /// untrusted text; without --restricted it is always read).
    #[arg(long)]
    pub agents_md: bool,
    /// Most model requests per prompt in the tool loop (default 10).
    #[arg(long)]
    pub max_turns: Option<u32>,
    /// The model's context window in tokens [config: model.context_window; default: asked of the server, else known models, else 8192].
    #[arg(long, value_name = "N")]
    pub context_window: Option<u32>,
    /// Usage budget per prompt: most model requests, sub-agents' included [config:
    /// limits.max_requests; default 200].
    #[arg(long, value_name = "N")]
    pub max_requests: Option<u32>,
    /// Usage budget per prompt: most input + output tokens [config: limits.max_total_tokens].
    #[arg(long, value_name = "N")]
    pub max_total_tokens: Option<u64>,
    /// Usage budget per prompt: most cost in USD at the model's [prices] [config: limits.max_cost].
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<f64>,
}

/// Which tools, and the gates around them.
#[derive(Debug, Args, Clone, Default)]
pub struct ToolArgs {
    /// Config file, trusted, read after the user's ~/.config/agcore/config.toml (default:
    /// ./agcore.toml, but only when `agcore trust` recorded it and it has not changed since).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// An mcpServers JSON file (Claude Desktop / Cursor / VS Code format).
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// Tool sets: `builtin` (file, search, command and fetch tools), or `none` (no tools at
    /// all: no built-ins and no MCP servers, whatever agcore.toml enables).
    #[arg(long, value_delimiter = ',', value_parser = ["builtin", "none"])]
    pub tools: Vec<String>,
    /// Workspace root for the built-in tools (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Tool profile: ask (read-only), write, minimal, or one from agcore.toml.
    #[arg(long)]
    pub profile: Option<String>,
    /// Untrusted workspace: no tool that needs Network or Shell is offered or run, and
    /// ./agcore.toml is not loaded (pass --config to use it anyway).
    #[arg(long)]
    pub restricted: bool,
    /// The OS sandbox of run_command: read-only, workspace-write or full (no sandbox). Default:
    /// `[tools.sandbox]` of agcore.toml, else workspace-write with the network off.
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<agcore::tools::sandbox::SandboxMode>,
    /// Feature flags that tools may require (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub flags: Vec<String>,
    /// Allow every call that needs approval (`ask` permissions) without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `agcore run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where the model is.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Which tools.
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Wait for the whole answer instead of streaming it.
    #[arg(long)]
    pub no_stream: bool,
    /// Machine output: one JSON object per event per line (with --no-stream: the final response).
    #[arg(long)]
    pub json: bool,
    /// Write the conversation (all messages, tool messages included) as JSON to FILE at the end.
    #[arg(long, value_name = "FILE")]
    pub transcript: Option<PathBuf>,
    /// The stored conversation to continue or create.
    #[command(flatten)]
    pub session: SessionArgs,
    /// Continue the session's interrupted run without a new prompt: unanswered tool calls are
    /// run, an unanswered message is sent again.
    #[arg(long, requires = "session", conflicts_with = "prompt")]
    pub resume: bool,
    /// Approve a call the suspended run waits for (its id, as printed when it suspended;
    /// repeatable). `--yes` approves them all.
    #[arg(long, value_name = "CALL_ID", requires = "resume")]
    pub approve: Vec<String>,
    /// Deny a call the suspended run waits for (repeatable); the model is told it was denied.
    #[arg(long, value_name = "CALL_ID", requires = "resume")]
    pub deny: Vec<String>,
    /// Answer the question an MCP server asks inside a call (or a task) the suspended run waits
    /// for: a JSON object of the form's fields, e.g. '{"name": "Ada"}'; for a question that asks
    /// you to open a URL, `accept` once you opened it yourself (agcore never opens it) or
    /// `decline`; `decline` refuses a form too. The call goes on from the server's stored state
    /// (it is not started again).
    #[arg(long, value_name = "JSON|accept|decline", requires = "resume")]
    pub answer: Option<String>,
    /// Print the composed system prompt and exit.
    #[arg(long)]
    pub print_system_prompt: bool,
    /// The answer must be JSON matching this JSON Schema: printed validated on stdout (with
    /// --json, as an `output` event); an answer that stays invalid exits non-zero.
    #[arg(long, value_name = "FILE.json", conflicts_with = "resume")]
    pub output_schema: Option<PathBuf>,
    /// How --output-schema gets the answer: auto (native, else tool), native
    /// (response_format), tool (a final-answer tool), prompted (schema in the prompt).
    #[arg(long, value_name = "MODE", default_value = "auto", requires = "output_schema",
          value_parser = ["auto", "native", "tool", "prompted"])]
    pub output_mode: String,
    /// Run as the agent NAME of the config's team (`[agents.NAME]`): its instructions, tools,
    /// sub-agents and handoffs (default: a plain run). With --session, the next run continues
    /// with the agent the last handoff left.
    #[arg(long, value_name = "NAME", conflicts_with = "output_schema")]
    pub agent: Option<String>,
    /// The prompt.
    #[arg(required_unless_present_any = ["resume", "print_system_prompt"])]
    pub prompt: Option<String>,
}

/// `agcore acp`: the options of `agcore run` that an editor session needs.
#[derive(Debug, Args)]
pub struct AcpArgs {
    /// Where the model is.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Which tools (the workspace is each session's `cwd`; `--workspace` is ignored).
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Where the editor's sessions are stored (each ACP session is a stored session).
    #[command(flatten)]
    pub store: StoreArgs,
    /// Run as the agent NAME of the config's team (`[agents.NAME]`).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
}

/// A stored conversation.
#[derive(Debug, Args, Clone, Default)]
pub struct SessionArgs {
    /// Continue (or create) the stored conversation NAME: its history is loaded first and each
    /// committed turn is stored as it completes.
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
    /// When another agcore process holds the session, wait up to SECONDS for it (default: fail
    /// at once).
    #[arg(long, value_name = "SECONDS", requires = "session")]
    pub wait_session: Option<u64>,
}

/// Where sessions are stored.
#[derive(Debug, Args, Clone, Default)]
pub struct StoreArgs {
    /// The session store: sqlite:PATH or postgres://... [config: session.store; default
    /// sqlite:$XDG_DATA_HOME/agcore/sessions.db].
    #[arg(
        long = "store",
        value_name = "URL",
        env = "AGCORE_STORE",
        hide_env_values = true
    )]
    pub url: Option<String>,
}

/// `agcore sessions ...`.
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Every stored session: name, steps, last update.
    List(SessionsListArgs),
    /// One session's history (the same JSON shape as `run --transcript`).
    Show(SessionsNameArgs),
    /// Delete a session.
    Rm(SessionsNameArgs),
}

/// `agcore sessions list`.
#[derive(Debug, Args)]
pub struct SessionsListArgs {
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Config file (for `[session] store`; default: ./agcore.toml when it is trusted).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// `agcore sessions show|rm NAME`.
#[derive(Debug, Args)]
pub struct SessionsNameArgs {
    /// The session.
    pub name: String,
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Config file (for `[session] store`; default: ./agcore.toml when it is trusted).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// `agcore chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Where the model is.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Which tools.
    #[command(flatten)]
    pub tools: ToolArgs,
    /// The stored conversation to continue or create.
    #[command(flatten)]
    pub session: SessionArgs,
    /// Show the model's reasoning (summaries or thinking text) as it streams, dimmed on
    /// stderr (default: not shown).
    #[arg(long)]
    pub show_reasoning: bool,
    /// Chat with the agent NAME of the config's team (`[agents.NAME]`); a handoff switches
    /// the agent for the following prompts (default: a plain chat).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
}

/// `agcore agents ...`.
#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// Each agent: its tools, sub-agents and handoffs, and every hidden tool with its gate and
    /// reason (like `agcore tools`).
    List(AgentsListArgs),
}

/// `agcore agents list`.
#[derive(Debug, Args)]
pub struct AgentsListArgs {
    /// Which tools.
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Check provider support against this provider (default: config's, else `openai`).
    #[arg(long)]
    pub provider: Option<String>,
    /// Check provider support against this model.
    #[arg(long)]
    pub model: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// `agcore tools`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Which tools.
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Check provider support against this provider (default: config's, else `openai`).
    #[arg(long)]
    pub provider: Option<String>,
    /// Check provider support against this model.
    #[arg(long)]
    pub model: Option<String>,
    /// Also list this hosted tool (repeatable) [config: model.hosted_tools].
    #[arg(long = "hosted-tool", value_name = "NAME")]
    pub hosted_tools: Vec<String>,
    /// Also show which deferred tools this session's searches loaded.
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Where sessions are stored (with --session).
    #[command(flatten)]
    pub store: StoreArgs,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// `agcore mcp ...`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Each server, its status (or error) and its tools.
    List(McpListArgs),
    /// Call one tool of one server and print the result.
    Call(McpCallArgs),
    /// Authorize to an OAuth-protected HTTP server (browser, 127.0.0.1 redirect) and store the tokens.
    Login(McpLoginArgs),
    /// Forget the stored OAuth tokens of a server.
    Logout(McpLogoutArgs),
    /// List a server's resources and resource templates, or read one resource (URI).
    Resources(McpResourcesArgs),
    /// List a server's prompts, or render one (NAME, with --arg KEY=VALUE).
    Prompts(McpPromptsArgs),
    /// List the skills (SEP-2640) of one server or of every server; no skill file is fetched.
    Skills(McpSkillsArgs),
    /// Fetch one skill's SKILL.md, verify it (size, digest, frontmatter) and print it.
    Skill(McpSkillArgs),
}

/// Where the MCP servers are configured.
#[derive(Debug, Args)]
pub struct McpSourceArgs {
    /// The mcpServers JSON file.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// Config file with [mcp] servers (default: ./agcore.toml when it is trusted).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// JSON output (for `call`: the result value as JSON even when it is a string).
    #[arg(long)]
    pub json: bool,
}

/// `agcore mcp list`.
#[derive(Debug, Args)]
pub struct McpListArgs {
    /// Where the servers are configured.
    #[command(flatten)]
    pub source: McpSourceArgs,
}

/// `agcore mcp call`.
#[derive(Debug, Args)]
pub struct McpCallArgs {
    /// Where the servers are configured.
    #[command(flatten)]
    pub source: McpSourceArgs,
    /// The server's name in the config.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// The arguments as a JSON object (default `{}`).
    pub args: Option<String>,
    /// How long the whole call may take, a task it starts included, in seconds (default: the
    /// server entry's `timeout`, else 30); past it the call is cancelled on the server.
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
}

/// `agcore mcp login`.
#[derive(Debug, Args)]
pub struct McpLoginArgs {
    /// Where the servers are configured.
    #[command(flatten)]
    pub source: McpSourceArgs,
    /// The server's name in the config.
    pub server: String,
    /// The 127.0.0.1 port of the redirect listener (default: any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
}

/// `agcore mcp logout`.
#[derive(Debug, Args)]
pub struct McpLogoutArgs {
    /// The server's name in the config.
    pub server: String,
}

/// `agcore mcp resources`.
#[derive(Debug, Args)]
pub struct McpResourcesArgs {
    /// Where the servers are configured.
    #[command(flatten)]
    pub source: McpSourceArgs,
    /// The server's name in the config.
    pub server: String,
    /// Read this resource instead of listing.
    pub uri: Option<String>,
}

/// `agcore mcp prompts`.
#[derive(Debug, Args)]
pub struct McpPromptsArgs {
    /// Where the servers are configured.
    #[command(flatten)]
    pub source: McpSourceArgs,
    /// The server's name in the config.
    pub server: String,
    /// Render this prompt instead of listing.
    pub name: Option<String>,
    /// A prompt argument (repeatable).
    #[arg(long = "arg", value_name = "KEY=VALUE")]
    pub args: Vec<String>,
}

/// `agcore mcp skills`.
#[derive(Debug, Args)]
pub struct McpSkillsArgs {
    /// Where the servers are configured.
    #[command(flatten)]
    pub source: McpSourceArgs,
    /// Only this server (default: every server that offers skills).
    pub server: Option<String>,
}

/// `agcore mcp skill`.
#[derive(Debug, Args)]
pub struct McpSkillArgs {
    /// Where the servers are configured.
    #[command(flatten)]
    pub source: McpSourceArgs,
    /// The server's name in the config.
    pub server: String,
    /// The skill's name, or the URI of its SKILL.md (for one the server does not list, or two
    /// with one name).
    pub name: String,
}

/// `agcore trust`.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The workspace whose agcore.toml to trust (default: the current directory).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Remove the trust record instead.
    #[arg(long, conflicts_with = "list")]
    pub revoke: bool,
    /// List the trusted configs.
    #[arg(long)]
    pub list: bool,
}

/// `agcore demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Print events as JSON lines instead of the human view.
    #[arg(long)]
    pub json: bool,
}
