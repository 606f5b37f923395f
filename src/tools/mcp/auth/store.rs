//! [`FileCredentialStore`]: OAuth credentials (client ID, tokens) kept in a JSON file only its
//! owner can read, so that a server authorized once stays authorized across runs.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};

/// A [`CredentialStore`] in one JSON file, written atomically with mode `0600` (on Unix).
#[derive(Debug, Clone)]
pub struct FileCredentialStore {
    path: PathBuf,
}

impl FileCredentialStore {
    /// A store at `path` (created on the first save, with its parent directory).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileCredentialStore { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn failure(&self, what: &str, error: impl fmt::Display) -> AuthError {
        AuthError::CredentialStoreError(format!("cannot {what} {}: {error}", self.path.display()))
    }

    fn write(&self, text: &[u8]) -> Result<(), AuthError> {
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        // Folders it creates are owner-only; an existing one is the caller's.
        crate::owner_only::create_dir_all(dir)
            .map_err(|error| self.failure("create the directory of", error))?;
        // The temporary file is created 0600 by tempfile, so the tokens are never readable by
        // others, not even between the write and the rename.
        let mut file =
            tempfile::NamedTempFile::new_in(dir).map_err(|error| self.failure("write", error))?;
        file.write_all(text)
            .and_then(|()| file.as_file().sync_all())
            .map_err(|error| self.failure("write", error))?;
        file.persist(&self.path)
            .map_err(|error| self.failure("write", error.error))?;
        Ok(())
    }
}

#[async_trait]
impl CredentialStore for FileCredentialStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let text = match std::fs::read(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(self.failure("read", error)),
        };
        // The serde error names a position only, never the file's (secret) content.
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|error| self.failure("parse", error))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let text = serde_json::to_vec_pretty(&credentials)
            .map_err(|error| self.failure("encode", error))?;
        self.write(&text)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(self.failure("remove", error)),
        }
    }
}

/// A shared [`CredentialStore`], as [`McpAuth`](crate::tools::mcp::auth::McpAuth) holds it.
#[derive(Clone)]
pub struct SharedCredentialStore(pub Arc<dyn CredentialStore>);

impl fmt::Debug for SharedCredentialStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedCredentialStore(..)")
    }
}

#[async_trait]
impl CredentialStore for SharedCredentialStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.0.load().await
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.0.save(credentials).await
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.0.clear().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn saves_owner_only_loads_and_clears() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileCredentialStore::new(dir.path().join("servers/x.json"));
        assert!(store.load().await.unwrap().is_none());
        let credentials: StoredCredentials = serde_json::from_value(serde_json::json!({
            "client_id": "client-1",
            "token_response": {"access_token": "tok-secret", "token_type": "bearer"},
        }))
        .unwrap();
        store.save(credentials).await.unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
        }
        let loaded = store.load().await.unwrap().unwrap();
        assert_eq!(loaded.client_id, "client-1");
        assert!(!format!("{loaded:?}").contains("tok-secret"));
        store.clear().await.unwrap();
        assert!(store.load().await.unwrap().is_none());
        store.clear().await.unwrap();
    }
}
