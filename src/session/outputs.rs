//! [`SessionOutputs`]: the large tool outputs a session keeps (the context engine cut them for
//! the model), as a source for the `read_output` tool — the same pages after a resume, in
//! another process or on another machine of the same database.

use std::sync::Arc;

use async_trait::async_trait;

use crate::context::spill::{KeptOutput, OutputSource, SpillError, check_id};
use crate::session::store::SessionStore;

/// The outputs of one session of a store.
pub struct SessionOutputs {
    store: Arc<dyn SessionStore>,
    session: String,
}

impl SessionOutputs {
    /// The outputs of session `session` in `store`.
    pub fn new(store: Arc<dyn SessionStore>, session: impl Into<String>) -> Self {
        SessionOutputs {
            store,
            session: session.into(),
        }
    }
}

impl std::fmt::Debug for SessionOutputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionOutputs")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl OutputSource for SessionOutputs {
    async fn load(&self, id: &str) -> Result<Option<KeptOutput>, SpillError> {
        check_id(id)?;
        self.store
            .get_output(&self.session, id)
            .await
            .map_err(|error| SpillError::Io {
                id: id.to_owned(),
                source: std::io::Error::other(error.to_string()),
            })
    }
}
