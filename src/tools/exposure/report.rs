//! [`ExposureReport`]: every exposure decision for one registry, as data and as text.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::tools::capability::Permission;
use crate::tools::kind::ToolKind;
use crate::tools::reasons::{ExposureError, HiddenBecause, SkipReason, describe_reasons, join};
use crate::tools::source::ToolSource;

/// One tool's exposure decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolExposure {
    /// The tool.
    pub name: String,
    /// Where it comes from.
    pub source: ToolSource,
    /// Its kind.
    pub kind: ToolKind,
    /// Its declared permissions.
    pub permissions: Vec<Permission>,
    /// The permissions that will be asked before each call (approvals).
    pub ask: Vec<Permission>,
    /// Whether the model is offered the tool.
    pub exposed: bool,
    /// Every gate that hid it (empty when exposed).
    pub hidden_because: Vec<HiddenBecause>,
    /// The rules on its arguments, explained ([`crate::tools::rules`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
}

/// Every exposure decision for one registry, provider and model — as data (serde) and as text
/// (`Display`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExposureReport {
    /// The provider.
    pub provider: String,
    /// The model.
    pub model: String,
    /// The active profile.
    pub profile: Option<String>,
    /// Whether restricted mode is on.
    pub restricted: bool,
    /// The enabled flags.
    pub flags: Vec<String>,
    /// One entry per registered tool, in registration order (then any tools their source
    /// offers that were not registered, see [`ExposureReport::with_unregistered`]).
    pub tools: Vec<ToolExposure>,
    /// Typos in profiles (tools or MCP servers that do not exist).
    pub problems: Vec<ExposureError>,
}

impl ExposureReport {
    /// The names of the exposed tools.
    pub fn exposed(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter(|t| t.exposed)
            .map(|t| t.name.as_str())
            .collect()
    }

    /// The hidden tools with every reason.
    pub fn hidden(&self) -> Vec<(&str, &[HiddenBecause])> {
        self.tools
            .iter()
            .filter(|t| !t.exposed)
            .map(|t| (t.name.as_str(), t.hidden_because.as_slice()))
            .collect()
    }

    /// The report with a hidden row for each tool its source offers that was not registered
    /// ([`HiddenBecause::NotRegistered`]: `(name as on its source, source, why)`) — so every
    /// tool a source offers has a line and a reason. MCP servers' skipped tools:
    /// `with_skipped_mcp_tools`.
    pub fn with_unregistered(
        mut self,
        unregistered: impl IntoIterator<Item = (String, ToolSource, SkipReason)>,
    ) -> Self {
        self.tools.extend(
            unregistered
                .into_iter()
                .map(|(name, source, reason)| ToolExposure {
                    name,
                    source: source.clone(),
                    kind: ToolKind::Other,
                    permissions: Vec::new(),
                    ask: Vec::new(),
                    rules: Vec::new(),
                    exposed: false,
                    hidden_because: vec![HiddenBecause::NotRegistered { source, reason }],
                }),
        );
        self
    }

    /// The decision for one tool.
    pub fn tool(&self, name: &str) -> Option<&ToolExposure> {
        self.tools.iter().find(|t| t.name == name)
    }
}

impl fmt::Display for ExposureReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "provider: {}/{} · profile: {} · restricted: {} · flags: {}",
            self.provider,
            if self.model.is_empty() {
                "(any model)"
            } else {
                &self.model
            },
            self.profile.as_deref().unwrap_or("(none)"),
            if self.restricted { "yes" } else { "no" },
            if self.flags.is_empty() {
                "(none)".to_owned()
            } else {
                self.flags.join(", ")
            }
        )?;
        let rows: Vec<[String; 5]> = self
            .tools
            .iter()
            .map(|t| {
                let mut permissions = join(&t.permissions);
                if !t.ask.is_empty() {
                    permissions.push_str(&format!(" (ask: {})", join(&t.ask)));
                }
                [
                    if t.exposed { "exposed" } else { "hidden" }.to_owned(),
                    t.name.clone(),
                    t.source.to_string(),
                    t.kind.to_string(),
                    if permissions.is_empty() {
                        "-".to_owned()
                    } else {
                        permissions
                    },
                ]
            })
            .collect();
        let mut widths = [0usize; 5];
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        for (row, tool) in rows.iter().zip(&self.tools) {
            let mut line = String::new();
            for (cell, width) in row.iter().zip(widths) {
                line.push_str(&format!("{cell:<width$}  "));
            }
            if !tool.exposed {
                line.push_str(&describe_reasons(&tool.hidden_because));
            }
            writeln!(f, "{}", line.trim_end())?;
            for rule in &tool.rules {
                writeln!(f, "    {rule}")?;
            }
        }
        if !self.problems.is_empty() {
            writeln!(f, "problems:")?;
            for problem in &self.problems {
                writeln!(f, "  {problem}")?;
            }
        }
        Ok(())
    }
}
