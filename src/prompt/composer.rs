//! [`PromptComposer`]: a system prompt from ordered, named sections — templates, or literal
//! text.

use serde::Serialize;

use crate::prompt::template::{PromptError, PromptTemplate};

/// A system prompt made of named sections (e.g. `role`, `instructions`, `tool_guidance`,
/// `context`), kept in order. Sections can be added, replaced or removed; each is a template
/// rendered with the same variables. Empty sections are left out.
///
/// ```
/// use agcore::prompt::PromptComposer;
/// use serde_json::json;
///
/// let mut composer = PromptComposer::new()
///     .section("role", "You are {{ name }}, a careful assistant.")?
///     .section("instructions", "Answer briefly.")?;
/// composer.replace("instructions", "Answer in {{ language }}.")?;
/// composer.insert_before("instructions", "context", "Today is {{ date }}.")?;
/// let prompt = composer.render(&json!({"name": "Ada", "language": "French", "date": "Monday"}))?;
/// assert_eq!(prompt, "You are Ada, a careful assistant.\n\nToday is Monday.\n\nAnswer in French.");
/// # Ok::<(), agcore::prompt::PromptError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct PromptComposer {
    sections: Vec<(String, Section)>,
    separator: String,
}

/// One section: a template, or text used as it is (never rendered, so text from a file such
/// as `AGENTS.md` can hold `{{` and cannot reach the variables).
#[derive(Debug, Clone)]
enum Section {
    Template {
        // Boxed: a compiled template is large next to a text.
        template: Box<PromptTemplate>,
        /// Where the template came from, named in its errors.
        origin: Option<String>,
    },
    Text(String),
}

impl Section {
    fn template(source: &str, origin: Option<String>) -> Result<Self, PromptError> {
        match PromptTemplate::new(source) {
            Ok(template) => Ok(Section::Template {
                template: Box::new(template),
                origin,
            }),
            Err(error) => Err(in_origin(error, origin.as_deref())),
        }
    }

    fn render<S: Serialize>(&self, variables: &S) -> Result<String, PromptError> {
        match self {
            Section::Template { template, origin } => template
                .render(variables)
                .map_err(|error| in_origin(error, origin.as_deref())),
            Section::Text(text) => Ok(text.clone()),
        }
    }
}

fn in_origin(error: PromptError, origin: Option<&str>) -> PromptError {
    match origin {
        Some(origin) => PromptError::InTemplate {
            origin: origin.to_owned(),
            source: Box::new(error),
        },
        None => error,
    }
}

impl PromptComposer {
    /// An empty composer; sections are joined with a blank line.
    pub fn new() -> Self {
        PromptComposer {
            sections: Vec::new(),
            separator: "\n\n".to_owned(),
        }
    }

    /// Join sections with `separator` instead of a blank line.
    pub fn with_separator(mut self, separator: impl Into<String>) -> Self {
        self.separator = separator.into();
        self
    }

    /// Append a section (builder form of [`PromptComposer::push`]).
    pub fn section(mut self, name: impl Into<String>, template: &str) -> Result<Self, PromptError> {
        self.push(name, template)?;
        Ok(self)
    }

    /// Append a section whose template came from `origin` (e.g. `--system-file prompt.md`):
    /// its errors, at compile or render time, are [`PromptError::InTemplate`] naming it.
    pub fn section_from(
        mut self,
        name: impl Into<String>,
        template: &str,
        origin: impl Into<String>,
    ) -> Result<Self, PromptError> {
        let section = Section::template(template, Some(origin.into()))?;
        self.put(name.into(), section);
        Ok(self)
    }

    /// Append a section of literal text, used as it is: never rendered as a template (builder
    /// form of [`PromptComposer::push_text`]).
    pub fn text_section(mut self, name: impl Into<String>, text: impl Into<String>) -> Self {
        self.push_text(name, text);
        self
    }

    /// Append a section, or replace the section of that name in place.
    pub fn push(&mut self, name: impl Into<String>, template: &str) -> Result<(), PromptError> {
        let section = Section::template(template, None)?;
        self.put(name.into(), section);
        Ok(())
    }

    /// Append a section of literal text, or replace the section of that name in place.
    pub fn push_text(&mut self, name: impl Into<String>, text: impl Into<String>) {
        self.put(name.into(), Section::Text(text.into()));
    }

    fn put(&mut self, name: String, section: Section) {
        match self.position(&name) {
            Some(index) => self.sections[index].1 = section,
            None => self.sections.push((name, section)),
        }
    }

    /// Replace an existing section; an unknown name is an error.
    pub fn replace(&mut self, name: &str, template: &str) -> Result<(), PromptError> {
        let index = self
            .position(name)
            .ok_or_else(|| PromptError::UnknownSection(name.to_owned()))?;
        self.sections[index].1 = Section::template(template, None)?;
        Ok(())
    }

    /// Insert a section right before the section `before`; a section already named `name`
    /// moves there. On error the composer is unchanged.
    pub fn insert_before(
        &mut self,
        before: &str,
        name: impl Into<String>,
        template: &str,
    ) -> Result<(), PromptError> {
        let unknown = || PromptError::UnknownSection(before.to_owned());
        let name = name.into();
        let template = Section::template(template, None)?;
        let at = self.position(before).ok_or_else(unknown)?;
        if name == before {
            self.sections[at].1 = template;
            return Ok(());
        }
        if let Some(existing) = self.position(&name) {
            self.sections.remove(existing);
        }
        // Looked up after the removal, which may have shifted it.
        let index = self.position(before).ok_or_else(unknown)?;
        self.sections.insert(index, (name, template));
        Ok(())
    }

    /// Remove a section; returns whether it existed.
    pub fn remove(&mut self, name: &str) -> bool {
        match self.position(name) {
            Some(index) => {
                self.sections.remove(index);
                true
            }
            None => false,
        }
    }

    /// The section names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.sections
            .iter()
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// Whether there is no section.
    pub fn is_empty(&self) -> bool {
        self.sections.is_empty()
    }

    /// Render every template section with `variables` (text sections are used as they are)
    /// and join them, leaving out empty ones. [`crate::run::Conversation::with_composer`] sets the
    /// result as a cycle's system prompt.
    pub fn render<S: Serialize>(&self, variables: &S) -> Result<String, PromptError> {
        let mut prompt = String::new();
        for (_, section) in &self.sections {
            let text = section.render(variables)?;
            let text = text.trim();
            if !text.is_empty() {
                if !prompt.is_empty() {
                    prompt.push_str(&self.separator);
                }
                prompt.push_str(text);
            }
        }
        Ok(prompt)
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.sections
            .iter()
            .position(|(existing, _)| existing == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sections_keep_order_and_can_be_removed() {
        let mut composer = PromptComposer::new()
            .section("a", "A")
            .unwrap()
            .section("b", "{% if show %}B{% endif %}")
            .unwrap()
            .section("c", "C")
            .unwrap();
        assert_eq!(composer.render(&json!({"show": false})).unwrap(), "A\n\nC");
        assert!(composer.remove("a"));
        assert!(!composer.remove("a"));
        assert_eq!(composer.names(), vec!["b", "c"]);
        assert_eq!(composer.render(&json!({"show": true})).unwrap(), "B\n\nC");
    }

    #[test]
    fn replacing_an_unknown_section_is_an_error() {
        let mut composer = PromptComposer::new();
        assert!(
            matches!(composer.replace("x", "y"), Err(PromptError::UnknownSection(name)) if name == "x")
        );
    }

    #[test]
    fn insert_before_moves_an_existing_section_right_before_the_other() {
        let mut composer = PromptComposer::new()
            .section("a", "A")
            .unwrap()
            .section("b", "B")
            .unwrap()
            .section("c", "C")
            .unwrap();
        composer.insert_before("c", "a", "A2").unwrap();
        assert_eq!(composer.names(), vec!["b", "a", "c"]);
        composer.insert_before("b", "c", "C").unwrap();
        assert_eq!(composer.names(), vec!["c", "b", "a"]);
        assert_eq!(composer.render(&json!({})).unwrap(), "C\n\nB\n\nA2");
    }

    #[test]
    fn a_failed_insert_before_leaves_the_composer_unchanged() {
        let mut composer = PromptComposer::new()
            .section("a", "A")
            .unwrap()
            .section("b", "B")
            .unwrap();
        assert!(matches!(
            composer.insert_before("b", "a", "{{ unclosed"),
            Err(PromptError::Syntax(_))
        ));
        assert!(matches!(
            composer.insert_before("x", "a", "A"),
            Err(PromptError::UnknownSection(name)) if name == "x"
        ));
        assert_eq!(composer.names(), vec!["a", "b"]);
        composer.insert_before("b", "b", "B2").unwrap();
        assert_eq!(composer.render(&json!({})).unwrap(), "A\n\nB2");
    }

    #[test]
    fn text_sections_are_used_as_they_are() {
        let composer = PromptComposer::new()
            .text_section("agents", "Use {{ braces }} and {% raw %} freely.")
            .section("user", "Hi {{ name }}")
            .unwrap();
        assert_eq!(
            composer.render(&json!({"name": "Ada"})).unwrap(),
            "Use {{ braces }} and {% raw %} freely.\n\nHi Ada"
        );
    }

    #[test]
    fn a_section_with_an_origin_names_it_in_its_errors() {
        let composer = PromptComposer::new()
            .section_from("user", "Work on {{ project }}.", "--system-file p.md")
            .unwrap();
        let error = composer.render(&json!({})).unwrap_err();
        assert_eq!(
            error.to_string(),
            "--system-file p.md: missing template variable 'project'"
        );
        assert!(matches!(error.root(), PromptError::MissingVariable { name } if name == "project"));
        let syntax = PromptComposer::new()
            .section_from("user", "{{ x", "--system")
            .unwrap_err();
        assert!(
            syntax
                .to_string()
                .starts_with("--system: template syntax error"),
            "{syntax}"
        );
    }

    #[test]
    fn a_missing_variable_in_any_section_fails_the_render() {
        let composer = PromptComposer::new()
            .section("role", "You are {{ name }}")
            .unwrap();
        assert!(matches!(
            composer.render(&json!({})),
            Err(PromptError::MissingVariable { .. })
        ));
    }
}
