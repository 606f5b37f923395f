//! [`SystemPrompt`]: agcore's system prompt, composed in a fixed order — base instructions,
//! the workspace's `AGENTS.md`, the user's template.

use serde::Serialize;

use crate::prompt::agents_md::AgentsMd;
use crate::prompt::composer::PromptComposer;
use crate::prompt::template::PromptError;

/// agcore's own base instructions: short, and replaceable ([`SystemPrompt::with_base`]).
pub const BASE_INSTRUCTIONS: &str = "You are an agent working for the user, with the tools you are offered. \
Be accurate and brief. Look before you change anything, and say what you did. \
When a tool fails or you are unsure, say so instead of guessing.";

/// The section names, in their order.
pub const SECTIONS: [&str; 3] = ["base", "agents_md", "user"];

/// The system prompt as agcore composes it, in a fixed order of sections:
///
/// 1. `base`: [`BASE_INSTRUCTIONS`], or your own, or none;
/// 2. `agents_md`: the workspace's `AGENTS.md` ([`AgentsMd`]), as literal text (never
///    rendered: it can hold `{{`, and it cannot read the variables);
/// 3. `user`: the user's prompt, a strict `minijinja` template rendered with the variables —
///    an undefined variable is an error naming it and the template's origin.
///
/// ```
/// use agcore::llm::testing::ScriptedModel;
/// use agcore::{Conversation, CycleConfig};
/// use agcore::prompt::SystemPrompt;
/// use serde_json::json;
///
/// let prompt = SystemPrompt::new()
///     .with_base("You review code.")
///     .with_user_template("Focus on {{ area }}.", "--system")?;
/// let cycle = Conversation::new(ScriptedModel::new(), CycleConfig::new("m"))
///     .with_composer(&prompt.composer()?, &json!({"area": "error handling"}))?;
/// assert_eq!(cycle.system_prompt().as_deref(), Some("You review code.\n\nFocus on error handling."));
///
/// let error = prompt.render(&json!({})).unwrap_err();
/// assert_eq!(error.to_string(), "--system: missing template variable 'area'");
/// # Ok::<(), agcore::prompt::PromptError>(())
/// ```
#[derive(Debug, Clone)]
pub struct SystemPrompt {
    base: Option<String>,
    agents_md: Option<(AgentsMd, bool)>,
    user: Option<(String, String)>,
}

impl Default for SystemPrompt {
    fn default() -> Self {
        SystemPrompt {
            base: Some(BASE_INSTRUCTIONS.to_owned()),
            agents_md: None,
            user: None,
        }
    }
}

/// One section in use, for a summary (`agcore chat` shows them at startup).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionInUse {
    /// The section name (one of [`SECTIONS`]).
    pub name: &'static str,
    /// Where it comes from, in words: `agcore's base instructions`, `AGENTS.md (1234 bytes)`,
    /// `--system-file prompt.md`.
    pub origin: String,
}

impl SystemPrompt {
    /// [`BASE_INSTRUCTIONS`] only.
    pub fn new() -> Self {
        SystemPrompt::default()
    }

    /// Replace the base instructions (an empty text leaves them out).
    pub fn with_base(mut self, text: impl Into<String>) -> Self {
        let text = text.into();
        self.base = (!text.trim().is_empty()).then_some(text);
        self
    }

    /// Leave the base instructions out.
    pub fn without_base(mut self) -> Self {
        self.base = None;
        self
    }

    /// Add the workspace's `AGENTS.md`; `untrusted`: the workspace is not trusted (restricted
    /// mode), which its section says.
    pub fn with_agents_md(mut self, agents_md: AgentsMd, untrusted: bool) -> Self {
        self.agents_md = Some((agents_md, untrusted));
        self
    }

    /// Add the user's template; `origin` names it in errors (`--system-file prompt.md`).
    /// Syntax errors are reported here.
    pub fn with_user_template(
        mut self,
        template: impl Into<String>,
        origin: impl Into<String>,
    ) -> Result<Self, PromptError> {
        let template = template.into();
        let origin = origin.into();
        crate::prompt::template::PromptTemplate::new(template.as_str()).map_err(|error| {
            PromptError::InTemplate {
                origin: origin.clone(),
                source: Box::new(error),
            }
        })?;
        self.user = Some((template, origin));
        Ok(self)
    }

    /// The `AGENTS.md` in use, if any.
    pub fn agents_md(&self) -> Option<&AgentsMd> {
        self.agents_md.as_ref().map(|(agents_md, _)| agents_md)
    }

    /// The sections in use, in order.
    pub fn sections(&self) -> Vec<SectionInUse> {
        let mut sections = Vec::new();
        if let Some(base) = &self.base {
            let origin = if base == BASE_INSTRUCTIONS {
                "agcore's base instructions".to_owned()
            } else {
                "base instructions (replaced)".to_owned()
            };
            sections.push(SectionInUse {
                name: SECTIONS[0],
                origin,
            });
        }
        if let Some((agents_md, _)) = &self.agents_md {
            let cut = if agents_md.is_cut() {
                format!(", cut to {} bytes", agents_md.text().len())
            } else {
                String::new()
            };
            sections.push(SectionInUse {
                name: SECTIONS[1],
                origin: format!(
                    "{} ({} bytes{cut})",
                    agents_md.path().display(),
                    agents_md.size()
                ),
            });
        }
        if let Some((_, origin)) = &self.user {
            sections.push(SectionInUse {
                name: SECTIONS[2],
                origin: origin.clone(),
            });
        }
        sections
    }

    /// The composer: sections in the fixed order. Pass it to
    /// [`crate::run::Conversation::with_composer`] with the variables.
    pub fn composer(&self) -> Result<PromptComposer, PromptError> {
        let mut composer = PromptComposer::new();
        if let Some(base) = &self.base {
            composer.push_text(SECTIONS[0], base.clone());
        }
        if let Some((agents_md, untrusted)) = &self.agents_md {
            composer.push_text(SECTIONS[1], agents_md.section(*untrusted));
        }
        if let Some((template, origin)) = &self.user {
            composer = composer.section_from(SECTIONS[2], template, origin.clone())?;
        }
        Ok(composer)
    }

    /// The composed prompt, rendered with `variables`; empty when no section is in use.
    pub fn render<S: Serialize>(&self, variables: &S) -> Result<String, PromptError> {
        self.composer()?.render(variables)
    }
}
