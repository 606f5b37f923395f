//! [`DpopKeyStore`]: keeps a server's DPoP key with its stored OAuth credentials, so that a
//! DPoP-bound token (useless without the key it is bound to) keeps working in the next
//! process. The key (PKCS#8, base64url) rides in the stored token answer as
//! [`KEY_FIELD`] — in the same file or row as the refresh token it protects, as secret as
//! that, and never in `Debug` output (rmcp redacts the whole token answer).

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde_json::Value;

use crate::tools::mcp::auth::dpop::DpopKey;
use crate::tools::mcp::auth::store::SharedCredentialStore;

/// The member of the stored token answer that holds the key.
pub(crate) const KEY_FIELD: &str = "agcore_dpop_key";

/// A [`CredentialStore`] adding the DPoP key to every DPoP-bound token it saves (the first
/// one and each refresh).
pub(crate) struct DpopKeyStore {
    inner: SharedCredentialStore,
    /// The key, PKCS#8 base64url.
    key: String,
}

impl DpopKeyStore {
    pub(crate) fn new(inner: SharedCredentialStore, key: &DpopKey) -> Result<Self, AuthError> {
        let der = key
            .to_pkcs8()
            .map_err(|error| AuthError::InternalError(error.to_string()))?;
        Ok(DpopKeyStore {
            inner,
            key: URL_SAFE_NO_PAD.encode(der),
        })
    }
}

#[async_trait]
impl CredentialStore for DpopKeyStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.inner.load().await
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.inner.save(with_key(credentials, &self.key)?).await
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.inner.clear().await
    }

    async fn on_refresh_token_rejected(
        &self,
        credentials: &StoredCredentials,
    ) -> Result<(), AuthError> {
        self.inner.0.on_refresh_token_rejected(credentials).await
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        self.inner.0.acquire_refresh_guard().await
    }
}

/// `credentials` with `key` in their token answer when that is DPoP-bound (a bearer token
/// needs no key, and gets none written next to it).
fn with_key(credentials: StoredCredentials, key: &str) -> Result<StoredCredentials, AuthError> {
    let failed = |error: serde_json::Error| {
        AuthError::CredentialStoreError(format!("cannot keep the DPoP key: {error}"))
    };
    let mut value = serde_json::to_value(&credentials).map_err(failed)?;
    let Some(token) = value
        .get_mut("token_response")
        .and_then(Value::as_object_mut)
    else {
        return Ok(credentials);
    };
    let bound = token
        .get("token_type")
        .and_then(Value::as_str)
        .is_some_and(|kind| kind.eq_ignore_ascii_case("dpop"));
    if !bound {
        return Ok(credentials);
    }
    token.insert(KEY_FIELD.into(), Value::String(key.to_owned()));
    serde_json::from_value(value).map_err(failed)
}

/// The DPoP key kept with `credentials`, if they hold a valid one.
pub(crate) fn stored_key(credentials: &StoredCredentials) -> Option<DpopKey> {
    let value = serde_json::to_value(credentials).ok()?;
    let encoded = value.get("token_response")?.get(KEY_FIELD)?.as_str()?;
    DpopKey::from_pkcs8(&URL_SAFE_NO_PAD.decode(encoded).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::transport::auth::InMemoryCredentialStore;

    use super::*;

    fn credentials(token_type: &str) -> StoredCredentials {
        serde_json::from_value(serde_json::json!({
            "client_id": "client-1",
            "token_response": {"access_token": "tok-secret", "token_type": token_type},
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_bound_token_is_saved_with_its_key_and_a_bearer_token_without() {
        let key = DpopKey::generate().unwrap();
        let inner = SharedCredentialStore(Arc::new(InMemoryCredentialStore::new()));
        let store = DpopKeyStore::new(inner.clone(), &key).unwrap();

        store.save(credentials("DPoP")).await.unwrap();
        let saved = inner.load().await.unwrap().unwrap();
        let again = stored_key(&saved).expect("the key is kept");
        assert_eq!(again.thumbprint(), key.thumbprint());
        let debug = format!("{saved:?}");
        assert!(!debug.contains(KEY_FIELD) && !debug.contains("tok-secret"));

        store.save(credentials("Bearer")).await.unwrap();
        let saved = inner.load().await.unwrap().unwrap();
        assert!(stored_key(&saved).is_none());
        assert!(!serde_json::to_string(&saved).unwrap().contains(KEY_FIELD));
    }
}
