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
}

/// Where the model is.
#[derive(Debug, Args, Clone)]
pub struct ModelArgs {
    /// Base URL of the OpenAI-compatible server [env: OPENAI_BASE_URL; default https://api.openai.com/v1].
    #[arg(long)]
    pub base_url: Option<String>,
    /// Model name [env: AGCORE_MODEL].
    #[arg(long)]
    pub model: Option<String>,
    /// Environment variable holding the API key (none is fine for local servers).
    #[arg(long, default_value = "OPENAI_API_KEY")]
    pub api_key_env: String,
    /// System prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// Most model requests per prompt in the tool loop (default 10).
    #[arg(long)]
    pub max_turns: Option<u32>,
}

/// `agcore run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where the model is.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Wait for the whole answer instead of streaming it.
    #[arg(long)]
    pub no_stream: bool,
    /// Machine output: one JSON object per event per line (with --no-stream: the final response).
    #[arg(long)]
    pub json: bool,
    /// Write the conversation (all messages, tool messages included) as JSON to FILE at the end.
    #[arg(long, value_name = "FILE")]
    pub transcript: Option<PathBuf>,
    /// The prompt.
    pub prompt: String,
}
