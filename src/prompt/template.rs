//! [`PromptTemplate`]: named variables, rendered with `minijinja`; a missing variable is an error.

use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

/// Why a template could not be compiled or rendered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PromptError {
    /// The template text is not valid (syntax error).
    #[error("template syntax error: {0}")]
    Syntax(String),
    /// The template uses a variable that was not given.
    #[error("missing template variable '{name}'")]
    MissingVariable {
        /// The variable's name.
        name: String,
    },
    /// Rendering failed for another reason (a filter error, a wrong type, ...).
    #[error("template render error: {0}")]
    Render(String),
    /// A section with this name does not exist.
    #[error("no prompt section named '{0}'")]
    UnknownSection(String),
    /// The template from `origin` (a file, a command-line flag) failed.
    #[error("{origin}: {source}")]
    InTemplate {
        /// Where the template came from, e.g. `--system-file prompt.md`.
        origin: String,
        /// What went wrong.
        source: Box<PromptError>,
    },
}

impl PromptError {
    /// The error itself, without the [`PromptError::InTemplate`] that says where it happened.
    pub fn root(&self) -> &PromptError {
        match self {
            PromptError::InTemplate { source, .. } => source.root(),
            other => other,
        }
    }
}

/// A prompt template with named variables (`{{ name }}`), `minijinja` syntax, strict about
/// undefined variables.
///
/// ```
/// use agcore::prompt::PromptTemplate;
/// use serde_json::json;
///
/// let template = PromptTemplate::new("Hello {{ user }}, you have {{ tools | length }} tools.")?;
/// let text = template.render(&json!({"user": "Ada", "tools": ["a", "b"]}))?;
/// assert_eq!(text, "Hello Ada, you have 2 tools.");
/// assert!(template.render(&json!({"tools": []})).is_err()); // `user` missing
/// # Ok::<(), agcore::prompt::PromptError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PromptTemplate {
    env: Environment<'static>,
    source: String,
}

const NAME: &str = "prompt";

impl PromptTemplate {
    /// Compile `source`; syntax errors are reported here, not at render time.
    pub fn new(source: impl Into<String>) -> Result<Self, PromptError> {
        let source = source.into();
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_keep_trailing_newline(true);
        env.add_template_owned(NAME, source.clone())
            .map_err(|error| PromptError::Syntax(describe(&error)))?;
        Ok(PromptTemplate { env, source })
    }

    /// The template text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The names of the variables the template reads (undeclared at the top level), sorted.
    pub fn variables(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .env
            .get_template(NAME)
            .map(|template| template.undeclared_variables(false).into_iter().collect())
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Render with `variables` (any `Serialize` value: a map, a struct, `json!({...})`).
    pub fn render<S: Serialize>(&self, variables: &S) -> Result<String, PromptError> {
        let template = self
            .env
            .get_template(NAME)
            .map_err(|error| PromptError::Render(describe(&error)))?;
        let context = minijinja::Value::from_serialize(variables);
        template.render(&context).map_err(|error| {
            if error.kind() == minijinja::ErrorKind::UndefinedError {
                let missing = self.variables().into_iter().find(|name| {
                    context
                        .get_attr(name)
                        .map(|v| v.is_undefined())
                        .unwrap_or(true)
                });
                if let Some(name) = missing {
                    return PromptError::MissingVariable { name };
                }
            }
            PromptError::Render(describe(&error))
        })
    }
}

fn describe(error: &minijinja::Error) -> String {
    match (error.detail(), error.line()) {
        (Some(detail), Some(line)) => format!("{} (line {line}): {detail}", error.kind()),
        (Some(detail), None) => format!("{}: {detail}", error.kind()),
        (None, Some(line)) => format!("{} (line {line})", error.kind()),
        (None, None) => error.kind().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_named_variables_and_loops() {
        let template = PromptTemplate::new("{% for t in tools %}- {{ t }}\n{% endfor %}").unwrap();
        assert_eq!(
            template.render(&json!({"tools": ["a", "b"]})).unwrap(),
            "- a\n- b\n"
        );
    }

    #[test]
    fn a_missing_variable_is_an_error_naming_it() {
        let template = PromptTemplate::new("You are {{ role }} working on {{ project }}.").unwrap();
        let error = template.render(&json!({"role": "a reviewer"})).unwrap_err();
        assert!(
            matches!(&error, PromptError::MissingVariable { name } if name == "project"),
            "{error}"
        );
        assert_eq!(template.variables(), vec!["project", "role"]);
    }

    #[test]
    fn a_syntax_error_is_reported_at_compile_time() {
        assert!(matches!(
            PromptTemplate::new("{{ unclosed"),
            Err(PromptError::Syntax(_))
        ));
    }
}
