//! AWS Signature Version 4 on every Bedrock request ([`SigV4Signer`]), with credentials found
//! the way the AWS CLI and SDKs find them (`aws-config`'s default chain: environment, shared
//! config and credentials files with the profile, SSO, web identity, container and instance
//! metadata) or from a provider you give it. Credentials are cached and fetched again only
//! when they are within [`REFRESH_MARGIN`] of their expiry — once, however many requests are
//! waiting — so a retried request is signed again with a fresh timestamp but not a fresh fetch.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest as AwsSignable, SigningSettings};
use aws_sigv4::sign::v4;
use reqwest::header::{HeaderName, HeaderValue};
use tokio::sync::{Mutex, OnceCell};

use crate::llm::error::ProviderError;
use crate::llm::transport::{RequestSigner, SignableRequest};

/// Credentials this close to their expiry are fetched again before the next request.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// The signing name of Bedrock's runtime API.
pub const SIGNING_NAME: &str = "bedrock";

/// Where a [`SigV4Signer`] gets its credentials.
#[derive(Clone, Debug)]
pub enum CredentialSource {
    /// `aws-config`'s default chain, for this profile (`None`: `AWS_PROFILE`, else `default`).
    DefaultChain {
        /// The shared-config profile.
        profile: Option<String>,
    },
    /// A provider of your own (static keys, an assumed role, a test's fixed keys).
    Provider(SharedCredentialsProvider),
}

/// Signs each request with SigV4 for `bedrock` in one region (see the module docs).
#[derive(Debug)]
pub struct SigV4Signer {
    region: String,
    source: CredentialSource,
    chain: OnceCell<SharedCredentialsProvider>,
    cached: Mutex<Option<Credentials>>,
}

impl SigV4Signer {
    /// A signer for `region` with credentials from `source`. Nothing is looked up until the
    /// first request.
    pub fn new(region: impl Into<String>, source: CredentialSource) -> Self {
        SigV4Signer {
            region: region.into(),
            source,
            chain: OnceCell::new(),
            cached: Mutex::new(None),
        }
    }

    async fn provider(&self) -> &SharedCredentialsProvider {
        self.chain
            .get_or_init(|| async {
                match &self.source {
                    CredentialSource::Provider(provider) => provider.clone(),
                    CredentialSource::DefaultChain { profile } => {
                        let mut chain = aws_config::default_provider::credentials::DefaultCredentialsChain::builder()
                            .region(aws_config::Region::new(self.region.clone()));
                        if let Some(profile) = profile {
                            chain = chain.profile_name(profile);
                        }
                        SharedCredentialsProvider::new(chain.build().await)
                    }
                }
            })
            .await
    }

    /// Valid credentials: the cached ones while they are fresh, else fetched once.
    ///
    /// # Errors
    /// [`ProviderError::Authentication`] saying which sources were tried and what failed.
    pub async fn credentials(&self) -> Result<Credentials, ProviderError> {
        let mut cached = self.cached.lock().await;
        if let Some(credentials) = cached.as_ref().filter(|c| fresh(c, SystemTime::now())) {
            return Ok(credentials.clone());
        }
        let credentials = self
            .provider()
            .await
            .provide_credentials()
            .await
            .map_err(|error| self.missing(&error))?;
        *cached = Some(credentials.clone());
        Ok(credentials)
    }

    fn missing(&self, error: &dyn std::error::Error) -> ProviderError {
        let tried = match &self.source {
            CredentialSource::DefaultChain { profile } => format!(
                "no AWS credentials: tried env (AWS_ACCESS_KEY_ID), profile '{}', SSO, web identity, container, instance metadata",
                profile
                    .clone()
                    .or_else(|| std::env::var("AWS_PROFILE").ok())
                    .unwrap_or_else(|| "default".to_owned())
            ),
            CredentialSource::Provider(_) => {
                "no AWS credentials from the configured provider".to_owned()
            }
        };
        let detail = crate::llm::transport::error_chain(error);
        ProviderError::Authentication {
            status: 0,
            message: crate::llm::transport::truncate(&format!("{tried}: {detail}")),
        }
    }
}

/// Whether `credentials` are good for more than [`REFRESH_MARGIN`] at `now`.
fn fresh(credentials: &Credentials, now: SystemTime) -> bool {
    credentials
        .expiry()
        .is_none_or(|expiry| expiry > now + REFRESH_MARGIN)
}

#[async_trait]
impl RequestSigner for SigV4Signer {
    async fn sign(&self, request: &mut SignableRequest<'_>) -> Result<(), ProviderError> {
        let credentials = self.credentials().await?;
        let identity = credentials.into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(SIGNING_NAME)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|error| ProviderError::Other(format!("could not sign the request: {error}")))?
            .into();
        let headers: Vec<(&str, &str)> = request
            .headers
            .iter()
            .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
            .collect();
        let signable = AwsSignable::new(
            request.method.as_str(),
            request.url.as_str(),
            headers.into_iter(),
            SignableBody::Bytes(request.body),
        )
        .map_err(|error| ProviderError::Other(format!("could not sign the request: {error}")))?;
        let (instructions, _) = aws_sigv4::http_request::sign(signable, &params)
            .map_err(|error| ProviderError::Other(format!("could not sign the request: {error}")))?
            .into_parts();
        let (headers, _) = instructions.into_parts();
        for header in headers {
            let name = HeaderName::from_bytes(header.name().as_bytes()).map_err(|_| {
                ProviderError::Other(format!("invalid signature header {}", header.name()))
            })?;
            let mut value = HeaderValue::from_str(header.value()).map_err(|_| {
                ProviderError::Other(format!("the {} header is not a valid value", header.name()))
            })?;
            value.set_sensitive(header.sensitive() || name == reqwest::header::AUTHORIZATION);
            request.headers.insert(name, value);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_near_their_expiry_are_not_fresh() {
        let now = SystemTime::now();
        let expiring =
            |after: Duration| Credentials::new("AKID", "secret", None, Some(now + after), "test");
        assert!(fresh(&expiring(Duration::from_secs(3600)), now));
        assert!(!fresh(&expiring(Duration::from_secs(60)), now));
        assert!(fresh(
            &Credentials::new("AKID", "secret", None, None, "test"),
            now
        ));
    }
}
