//! [`PromptComposer`]: a system prompt from ordered, named sections.

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
    sections: Vec<(String, PromptTemplate)>,
    separator: String,
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

    /// Append a section, or replace the section of that name in place.
    pub fn push(&mut self, name: impl Into<String>, template: &str) -> Result<(), PromptError> {
        let name = name.into();
        let template = PromptTemplate::new(template)?;
        match self.position(&name) {
            Some(index) => self.sections[index].1 = template,
            None => self.sections.push((name, template)),
        }
        Ok(())
    }

    /// Replace an existing section; an unknown name is an error.
    pub fn replace(&mut self, name: &str, template: &str) -> Result<(), PromptError> {
        let index = self
            .position(name)
            .ok_or_else(|| PromptError::UnknownSection(name.to_owned()))?;
        self.sections[index].1 = PromptTemplate::new(template)?;
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
        let template = PromptTemplate::new(template)?;
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

    /// Render every section with `variables` and join them. Pass the result to
    /// [`crate::llm::LlmCycle::set_system_prompt`].
    pub fn render<S: Serialize>(&self, variables: &S) -> Result<String, PromptError> {
        let mut prompt = String::new();
        for (_, template) in &self.sections {
            let text = template.render(variables)?;
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
