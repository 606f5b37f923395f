//! The context engine in the CLI: `--context-window`, `[model] context_window` and `[context]`
//! into the cycle's configuration; the window asked of the server when none is known. (The
//! chat prompt's `[12.3k/32k]` label and the line printed for each compaction are
//! [`crate::render`]'s.)

use agcore::context::{discover_window, known_window, probes_apply};
use agcore::llm::{CycleConfig, LlmCycle};

use crate::cli::ModelArgs;
use crate::config::AgcoreConfig;
use crate::secrets::Secrets;

/// Apply the arguments' and the config's context settings to `cycle`.
pub fn configure(cycle: &mut CycleConfig, args: &ModelArgs, config: &AgcoreConfig) {
    cycle.context_window = args.context_window.or(config.model.context_window);
    let section = &config.context;
    let context = &mut cycle.context;
    if let Some(enabled) = section.enabled {
        context.enabled = enabled;
    }
    if let Some(threshold) = section.threshold {
        context.threshold = threshold.clamp(0.05, 1.0);
        context.target = context.target.min(context.threshold * 0.75);
    }
    if let Some(keep) = section.keep_last_turns {
        context.keep_last_turns = keep;
    }
    if let Some(model) = &section.summary_model {
        context.summary_model = Some(model.clone());
    }
    if let Some(limit) = section.tool_output_limit {
        cycle.tool_output_limit = limit;
    }
    context
        .tool_output_limits
        .extend(section.tool_output_limits.clone());
    context.spill_dir = spill_dir(config);
}

/// Where large tool outputs are kept (`[context] keep_large_outputs = true`).
pub fn spill_dir(config: &AgcoreConfig) -> Option<std::path::PathBuf> {
    if config.context.keep_large_outputs != Some(true) {
        return None;
    }
    let dir = crate::layers::base_dir("XDG_DATA_HOME", ".local/share")
        .map(|dir| dir.join("agcore").join("outputs"))?;
    // agcore's own folders: outputs hold whatever a tool read, so one left open to other users
    // (by an older agcore, a umask) is made owner-only before anything is kept there.
    for folder in [dir.parent(), Some(dir.as_path())].into_iter().flatten() {
        match agcore::owner_only::tighten(folder) {
            Ok(Some(tightened)) => eprintln!(
                "note: made the output folder owner-only: {}",
                agcore::display::escape_for_terminal(&tightened.to_string())
            ),
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "the output folder could not be made owner-only"),
        }
    }
    Some(dir)
}

/// With a stored session, `read_output` reads the session's outputs first (a run with a session
/// keeps its large outputs there), then the spill files.
pub fn read_outputs_from_session(
    registry: &mut agcore::tools::ToolRegistry,
    config: &AgcoreConfig,
    journal: &agcore::session::SessionJournal,
) {
    if let Some(dir) = spill_dir(config)
        && registry.unregister("read_output").is_some()
    {
        let tool = agcore::context::ReadOutput::new(dir)
            .with_source(std::sync::Arc::new(journal.outputs()));
        if let Err(error) = registry.register(std::sync::Arc::new(tool)) {
            tracing::warn!(%error, "read_output is unavailable");
        }
    }
}

/// When neither the arguments nor the config give a window and the model is not a known one,
/// ask the server (a short, bounded probe; `[context] discover = false` turns it off).
pub async fn discover(
    cycle: &mut LlmCycle,
    args: &ModelArgs,
    config: &AgcoreConfig,
    secrets: &Secrets,
) {
    discover_tokenizer(cycle, args, config, secrets).await;
    let settings = cycle.config();
    if settings.context_window.is_some()
        || !settings.context.enabled
        || config.context.discover == Some(false)
        || known_window(&settings.model).is_some()
    {
        return;
    }
    let Some(target) = probed_target(cycle, args, config) else {
        return;
    };
    let key = target.key(secrets);
    let model = settings.model.clone();
    if let Some(window) = discover_window(&target.base_url, &model, key).await {
        tracing::info!(window, "context window reported by the server");
        cycle.config_mut().context_window = Some(window);
    }
}

/// For a model tiktoken does not know, use the server's own tokenizer when it is a llama.cpp
/// server (`POST /tokenize`, one bounded probe; `[context] discover = false` turns it off).
async fn discover_tokenizer(
    cycle: &mut LlmCycle,
    args: &ModelArgs,
    config: &AgcoreConfig,
    secrets: &Secrets,
) {
    let settings = cycle.config();
    if !settings.context.enabled
        || config.context.discover == Some(false)
        || settings.context.tokenizer != agcore::context::TokenizerChoice::Auto
        || agcore::context::tiktoken_encoding(&settings.model).is_some()
    {
        return;
    }
    let Some(target) = probed_target(cycle, args, config) else {
        return;
    };
    let key = target.key(secrets);
    if let Some(counter) = agcore::context::LlamaCppTokenizer::discover(&target.base_url, key).await
    {
        tracing::info!("counting tokens with the server's /tokenize");
        cycle.config_mut().context.tokenizer =
            agcore::context::TokenizerChoice::Custom(std::sync::Arc::new(counter));
    }
}

/// The model's server, when the discovery probes may ask it ([`probes_apply`]: only an
/// OpenAI-compatible chat completions server; a native provider's host never gets a probe).
fn probed_target(
    cycle: &LlmCycle,
    args: &ModelArgs,
    config: &AgcoreConfig,
) -> Option<crate::settings::Target> {
    if !probes_apply(cycle.model().as_ref()) {
        return None;
    }
    crate::settings::target(args, config).ok()
}
