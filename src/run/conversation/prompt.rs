//! A cycle whose system prompt is composed: [`Conversation::with_composer`].

use serde::Serialize;

use crate::prompt::composer::PromptComposer;
use crate::prompt::template::PromptError;
use crate::run::conversation::Conversation;

impl Conversation {
    /// Render `composer` with `variables` and make the result the system prompt (builder
    /// form of [`Conversation::set_composed_system_prompt`]). See [`crate::prompt::SystemPrompt`]
    /// for agcore's own composition (base instructions, `AGENTS.md`, the user's template).
    ///
    /// ```
    /// use agcore::llm::testing::ScriptedModel;
    /// use agcore::{Conversation, CycleConfig};
    /// use agcore::prompt::PromptComposer;
    /// use serde_json::json;
    ///
    /// let composer = PromptComposer::new().section("role", "You are {{ name }}.")?;
    /// let cycle = Conversation::new(ScriptedModel::new(), CycleConfig::new("m"))
    ///     .with_composer(&composer, &json!({"name": "a reviewer"}))?;
    /// assert_eq!(cycle.system_prompt().as_deref(), Some("You are a reviewer."));
    /// # Ok::<(), agcore::prompt::PromptError>(())
    /// ```
    ///
    /// # Errors
    /// Whatever rendering fails with ([`PromptError::MissingVariable`], ...); the cycle is
    /// dropped then, as with any builder that fails.
    pub fn with_composer<S: Serialize>(
        mut self,
        composer: &PromptComposer,
        variables: &S,
    ) -> Result<Self, PromptError> {
        self.set_composed_system_prompt(composer, variables)?;
        Ok(self)
    }

    /// Render `composer` with `variables` and set or replace the system prompt with it; an
    /// empty result removes the system prompt. On error the cycle is unchanged.
    pub fn set_composed_system_prompt<S: Serialize>(
        &mut self,
        composer: &PromptComposer,
        variables: &S,
    ) -> Result<(), PromptError> {
        let prompt = composer.render(variables)?;
        if prompt.is_empty() {
            if self.system_prompt().is_some() {
                self.messages.remove(0);
            }
        } else {
            self.set_system_prompt(prompt);
        }
        Ok(())
    }
}
