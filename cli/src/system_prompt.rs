//! The system prompt the arguments and config describe: agcore's base instructions, the
//! workspace's `AGENTS.md` (in restricted mode only with `--agents-md`), then `--system` /
//! `--system-file` / `model.system` as a strict template with `--var` variables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agcore::display::escape_keeping_lines;
use agcore::prompt::{AgentsMd, DEFAULT_AGENTS_MD_LIMIT, PromptError, SectionInUse, SystemPrompt};
use anyhow::{Context, bail};

use crate::cli::ModelArgs;
use crate::config::AgcoreConfig;

/// The composed system prompt, what it is made of, and what could not be used.
#[derive(Debug)]
pub struct Composed {
    /// The prompt; `None` when no section is in use.
    pub text: Option<String>,
    /// The sections in use, in order.
    pub sections: Vec<SectionInUse>,
    /// Why an `AGENTS.md` that exists was left out (said, never silent).
    pub notes: Vec<String>,
}

impl Composed {
    /// One line naming the sections in use (for `agcore chat`), escaped for the terminal.
    pub fn summary(&self) -> String {
        let sections: Vec<String> = self
            .sections
            .iter()
            .map(|section| format!("{}: {}", section.name, section.origin))
            .collect();
        let line = if sections.is_empty() {
            "system prompt: none".to_owned()
        } else {
            format!("system prompt: {}", sections.join(" · "))
        };
        escape_keeping_lines(&line).into_owned()
    }
}

/// Compose the system prompt of `args` and `config` (restricted mode and the workspace root
/// come from the config, where `--restricted` and `--workspace` were folded in).
pub fn compose(args: &ModelArgs, config: &AgcoreConfig) -> anyhow::Result<Composed> {
    let user = match (&args.system, &args.system_file, &config.model.system) {
        (Some(text), _, _) => Some((text.clone(), "--system".to_owned())),
        (None, Some(file), _) => Some((
            read_template(file)?,
            format!("--system-file {}", file.display()),
        )),
        (None, None, Some(text)) => Some((text.clone(), "agcore.toml model.system".to_owned())),
        (None, None, None) => None,
    };
    compose_with(args, config, user)
}

/// [`compose`] with `user` — a template and where it comes from (`[agents.main]
/// instructions`) — in place of `--system`, `--system-file` and `model.system`: an agent's
/// instructions.
pub fn compose_with(
    args: &ModelArgs,
    config: &AgcoreConfig,
    user: Option<(String, String)>,
) -> anyhow::Result<Composed> {
    let mut prompt = SystemPrompt::new();
    if let Some(base) = &config.model.base_instructions {
        prompt = prompt.with_base(base.clone());
    }
    let mut notes = Vec::new();
    let restricted = config.tools.restricted;
    if restricted && !args.agents_md {
        if let Some(path) = find_agents_md(config) {
            notes.push(format!(
                "{} not read: restricted mode (pass --agents-md to read it)",
                path.display()
            ));
        }
    } else {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        match AgentsMd::discover(&cwd, &workspace_root(config, &cwd), DEFAULT_AGENTS_MD_LIMIT) {
            Ok(Some(agents_md)) => prompt = prompt.with_agents_md(agents_md, restricted),
            Ok(None) => {}
            Err(error) => notes.push(format!("AGENTS.md not used: {error}")),
        }
    }
    if let Some((template, origin)) = user {
        prompt = prompt
            .with_user_template(template, origin)
            .map_err(explain)?;
    }
    let variables = variables(&args.vars)?;
    let text = prompt.render(&variables).map_err(explain)?;
    Ok(Composed {
        text: (!text.is_empty()).then_some(text),
        sections: prompt.sections(),
        notes,
    })
}

/// `agcore run --print-system-prompt`: the composed prompt on stdout (escaped: `AGENTS.md`
/// is text from the workspace), what was left out on stderr.
pub fn print(args: &ModelArgs, config: &AgcoreConfig) -> anyhow::Result<ExitCode> {
    let composed = compose(args, config)?;
    for note in &composed.notes {
        eprintln!("note: {}", escape_keeping_lines(note));
    }
    if let Some(text) = &composed.text {
        println!("{}", escape_keeping_lines(text));
    }
    Ok(ExitCode::SUCCESS)
}

/// The workspace root `AGENTS.md` is looked for up to: the built-in tools' root (`--workspace`
/// or `builtin.root`), else the nearest directory holding `.git`, else the current one.
fn workspace_root(config: &AgcoreConfig, cwd: &Path) -> PathBuf {
    if let Some(root) = &config.builtin.root {
        return cwd.join(root);
    }
    cwd.ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(cwd)
        .to_path_buf()
}

fn find_agents_md(config: &AgcoreConfig) -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    AgentsMd::find(&cwd, &workspace_root(config, &cwd))
}

/// The template file, bounded like any input read whole.
fn read_template(file: &Path) -> anyhow::Result<String> {
    const LIMIT: u64 = 1024 * 1024;
    let size = std::fs::metadata(file)
        .with_context(|| format!("cannot read --system-file {}", file.display()))?
        .len();
    if size > LIMIT {
        bail!(
            "--system-file {} is {size} bytes; a system prompt template may have at most {LIMIT}",
            file.display()
        );
    }
    std::fs::read_to_string(file)
        .with_context(|| format!("cannot read --system-file {}", file.display()))
}

/// `--var KEY=VALUE` pairs; the last of a key wins.
fn variables(pairs: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                Ok((key.trim().to_owned(), value.to_owned()))
            }
            _ => bail!("--var {pair}: expected KEY=VALUE"),
        })
        .collect()
}

/// A template error, with how to give a missing variable.
fn explain(error: PromptError) -> anyhow::Error {
    let hint = match error.root() {
        PromptError::MissingVariable { name } => format!(" (pass --var {name}=VALUE)"),
        _ => String::new(),
    };
    anyhow::anyhow!("{error}{hint}")
}
