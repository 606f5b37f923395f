//! [`BedrockClient`]: a [`ChatModel`](crate::llm::ChatModel) for Amazon Bedrock's Converse API
//! (`POST /model/{modelId}/converse`, and `converse-stream` with AWS event-stream frames),
//! every request signed with SigV4 or sent with a Bedrock API key.
//!
//! What it keeps, like the Anthropic backend: the `reasoningContent` blocks of each reply
//! (reasoning text with its signature, or redacted content), stored byte-exact as
//! [`crate::vocab::Artifact`]s of [`ArtifactProvider::Bedrock`](crate::vocab::ArtifactProvider)
//! and sent back in place to the same model only; tool results by `toolUseId`; `cachePoint`
//! markers. Request mapping in `request.rs`, the stream in `stream.rs`, errors in `errors.rs`
//! (`ThrottlingException` retried with backoff, `ValidationException` not), credentials and
//! signing in [`signer`].
//!
//! Where it connects: [`BedrockConfig::base_url`] if set, else `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`,
//! else `AWS_ENDPOINT_URL`, else `https://bedrock-runtime.{region}.amazonaws.com`; the region
//! from the config, else `AWS_REGION`, else `AWS_DEFAULT_REGION`. How it signs: with a Bedrock
//! API key (`AWS_BEARER_TOKEN_BEDROCK`) as `Authorization: Bearer`, else SigV4 with the
//! credentials of `aws-config`'s default chain for the profile (`AWS_PROFILE`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), agcore::llm::ProviderError> {
//! use agcore::llm::bedrock::{BedrockClient, BedrockConfig};
//! use agcore::llm::{ChatModel, ChatRequest, OpenaiChatMessage};
//! use agcore::llm::types::RequestOptions;
//!
//! let client = BedrockClient::new(BedrockConfig::from_env()?)?;
//! let messages = [OpenaiChatMessage::user_text("Say hi")];
//! let options = RequestOptions::default();
//! let model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
//! let request = ChatRequest { model, messages: &messages, tools: &[], options: &options };
//! println!("{}", client.chat(request).await?.text());
//! # Ok(()) }
//! ```

mod codec;
mod errors;
mod request;
mod response;
pub mod signer;
mod stream;

use std::sync::Arc;

use aws_credential_types::provider::SharedCredentialsProvider;

use crate::llm::error::ProviderError;
use crate::llm::http_model::HttpModel;
use crate::llm::model::WireApi;
use crate::llm::provider::{Connection, Provider};
use crate::llm::transport::TransportSettings;

pub use codec::BedrockConverse;
pub use request::DEFAULT_MAX_TOKENS;
pub use signer::{CredentialSource, SigV4Signer};

/// The endpoint of a region (`{region}` replaced).
pub const DEFAULT_ENDPOINT: &str = "https://bedrock-runtime.{region}.amazonaws.com";

/// The variable of a Bedrock API key, sent as a bearer token instead of signing.
pub const BEARER_TOKEN_VARIABLE: &str = "AWS_BEARER_TOKEN_BEDROCK";

/// Bedrock in the provider table: `bedrock`, `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, and a Bedrock
/// API key in `AWS_BEARER_TOKEN_BEDROCK` (without one: SigV4 with the default credential chain).
pub const PROVIDER: Provider = Provider {
    name: "bedrock",
    api: WireApi::BedrockConverse,
    default_base_url: DEFAULT_ENDPOINT,
    base_url_variable: "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    key_variables: &[BEARER_TOKEN_VARIABLE],
    connect: |connection| {
        let config = BedrockConfig::from_connection(connection, |name| std::env::var(name).ok())?;
        Ok(Arc::new(BedrockClient::new(config)?))
    },
};

/// How Bedrock requests are authorised.
#[derive(Clone)]
pub enum BedrockAuth {
    /// A Bedrock API key, sent as `Authorization: Bearer`; never printed.
    ApiKey(String),
    /// SigV4 with credentials from this source.
    SigV4(CredentialSource),
}

impl std::fmt::Debug for BedrockAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BedrockAuth::ApiKey(_) => f.write_str("ApiKey(<redacted>)"),
            BedrockAuth::SigV4(CredentialSource::DefaultChain { profile }) => {
                write!(f, "SigV4(default chain, profile {profile:?})")
            }
            BedrockAuth::SigV4(CredentialSource::Provider(_)) => f.write_str("SigV4(provider)"),
        }
    }
}

/// Connection settings of a [`BedrockClient`].
///
/// ```
/// use agcore::llm::bedrock::BedrockConfig;
///
/// let config = BedrockConfig::new("eu-west-1");
/// assert_eq!(config.endpoint(), "https://bedrock-runtime.eu-west-1.amazonaws.com");
/// let config = config.with_api_key("ABSK-secret");
/// assert!(!format!("{config:?}").contains("ABSK"));
/// ```
#[derive(Clone, Debug)]
pub struct BedrockConfig {
    /// The AWS region (`us-east-1`): the signing region and, without a base URL, the endpoint's.
    pub region: String,
    /// The endpoint, up to where `/model/...` begins (`None`: the region's public endpoint).
    pub base_url: Option<String>,
    /// How requests are authorised.
    pub auth: BedrockAuth,
    /// Timeouts, size limits, extra headers and query.
    pub transport: TransportSettings,
    /// Mark `cachePoint`s (`None`: for Anthropic and Nova models, which take them).
    pub cache: Option<bool>,
}

impl BedrockConfig {
    /// Settings for `region`: its public endpoint, SigV4 with the default credential chain.
    pub fn new(region: impl Into<String>) -> Self {
        BedrockConfig {
            region: region.into(),
            base_url: None,
            auth: BedrockAuth::SigV4(CredentialSource::DefaultChain { profile: None }),
            transport: TransportSettings::default(),
            cache: None,
        }
    }

    /// Settings from the environment (see the module docs).
    ///
    /// # Errors
    /// [`ProviderError::Other`] when no region is set.
    pub fn from_env() -> Result<Self, ProviderError> {
        BedrockConfig::from_connection(PROVIDER.from_env(), |name| std::env::var(name).ok())
    }

    /// Settings from a [`Connection`] (its `cloud` region and profile, its key as an API
    /// key), with `lookup` for what the connection leaves open (`AWS_REGION`,
    /// `AWS_DEFAULT_REGION`, `AWS_ENDPOINT_URL`, `AWS_PROFILE`).
    ///
    /// # Errors
    /// [`ProviderError::Other`] when no region is set anywhere.
    pub fn from_connection(
        connection: Connection,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ProviderError> {
        let var = |name: &str| lookup(name).filter(|value| !value.is_empty());
        let region = connection
            .cloud
            .region
            .clone()
            .or_else(|| var("AWS_REGION"))
            .or_else(|| var("AWS_DEFAULT_REGION"))
            .ok_or_else(|| {
                ProviderError::Other(
                    "no AWS region: set [model] region, AWS_REGION or AWS_DEFAULT_REGION".into(),
                )
            })?;
        let base_url = if connection.base_url == DEFAULT_ENDPOINT {
            var("AWS_ENDPOINT_URL")
        } else {
            Some(connection.base_url)
        };
        let auth = match connection.api_key {
            Some(key) => BedrockAuth::ApiKey(key),
            None => BedrockAuth::SigV4(CredentialSource::DefaultChain {
                profile: connection.cloud.profile.or_else(|| var("AWS_PROFILE")),
            }),
        };
        Ok(BedrockConfig {
            region,
            base_url,
            auth,
            transport: connection.transport,
            cache: None,
        })
    }

    /// The endpoint requests go to.
    pub fn endpoint(&self) -> String {
        match &self.base_url {
            Some(url) => url.clone(),
            None => DEFAULT_ENDPOINT.replace("{region}", &self.region),
        }
    }

    /// Send to `url` instead of the region's endpoint.
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// Authorise with a Bedrock API key (bearer) instead of SigV4.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.auth = BedrockAuth::ApiKey(key.into());
        self
    }

    /// Sign with credentials from `provider` (static keys, an assumed role, ...).
    pub fn with_credentials_provider(mut self, provider: SharedCredentialsProvider) -> Self {
        self.auth = BedrockAuth::SigV4(CredentialSource::Provider(provider));
        self
    }

    /// Sign with these static keys (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and, for
    /// temporary credentials, `AWS_SESSION_TOKEN`), e.g. ones a caller took out of the
    /// environment so that child processes cannot read them.
    pub fn with_static_keys(
        self,
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
        session_token: Option<String>,
    ) -> Self {
        let credentials = aws_credential_types::Credentials::new(
            access_key_id,
            secret_access_key,
            session_token,
            None,
            "agcore-static",
        );
        self.with_credentials_provider(SharedCredentialsProvider::new(credentials))
    }

    /// Sign with the default chain's credentials of this shared-config profile.
    pub fn with_profile(mut self, profile: impl Into<String>) -> Self {
        self.auth = BedrockAuth::SigV4(CredentialSource::DefaultChain {
            profile: Some(profile.into()),
        });
        self
    }

    /// Use these transport settings.
    pub fn with_transport(mut self, transport: TransportSettings) -> Self {
        self.transport = transport;
        self
    }

    /// Turn the `cachePoint` markers on or off (default: on for Anthropic and Nova models).
    pub fn with_cache(mut self, cache: bool) -> Self {
        self.cache = Some(cache);
        self
    }
}

/// A client for Bedrock's Converse API: the generic [`HttpModel`] over the [`BedrockConverse`]
/// codec, which signs every request. Cheap to clone.
pub type BedrockClient = HttpModel<BedrockConverse>;

/// Decode a ConverseStream body (AWS event-stream frames) into a [`crate::llm::ModelStream`],
/// for replaying a recorded stream and for benchmarks: default size limits, no deadline.
pub fn decode_stream<S, E>(bytes: S, model: &str) -> crate::llm::ModelStream
where
    S: futures::Stream<Item = Result<bytes::Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let limits = crate::llm::transport::BodyLimits {
        idle: None,
        deadline: None,
        max_event_bytes: crate::llm::transport::DEFAULT_MAX_EVENT_BYTES,
        max_body_bytes: crate::llm::transport::DEFAULT_MAX_RESPONSE_BYTES,
    };
    crate::llm::transport::decode_frames(bytes, limits, stream::EventDecoder::new(model, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_endpoint_and_key_come_from_the_connection_then_the_environment() {
        let env = |name: &str| match name {
            "AWS_REGION" => Some("eu-central-1".to_owned()),
            "AWS_ENDPOINT_URL" => Some("http://127.0.0.1:9".to_owned()),
            "AWS_PROFILE" => Some("work".to_owned()),
            _ => None,
        };
        let config = BedrockConfig::from_connection(PROVIDER.from_lookup(|_| None), env).unwrap();
        assert_eq!(config.region, "eu-central-1");
        assert_eq!(config.endpoint(), "http://127.0.0.1:9");
        assert!(matches!(
            &config.auth,
            BedrockAuth::SigV4(CredentialSource::DefaultChain { profile: Some(p) }) if p == "work"
        ));
        let connection = PROVIDER.from_lookup(|name| match name {
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME" => Some("http://127.0.0.1:8".into()),
            "AWS_BEARER_TOKEN_BEDROCK" => Some("ABSK-key".into()),
            _ => None,
        });
        let config = BedrockConfig::from_connection(connection, env).unwrap();
        assert_eq!(config.endpoint(), "http://127.0.0.1:8");
        assert!(matches!(config.auth, BedrockAuth::ApiKey(_)));
        assert!(!format!("{config:?}").contains("ABSK"));
        let error =
            BedrockConfig::from_connection(PROVIDER.from_lookup(|_| None), |_| None).unwrap_err();
        assert!(error.to_string().contains("AWS_REGION"), "{error}");
    }

    #[test]
    fn the_model_id_is_one_encoded_path_segment() {
        let client =
            BedrockClient::new(BedrockConfig::new("us-east-1").with_base_url("http://127.0.0.1:9"))
                .unwrap();
        assert_eq!(
            client
                .url(
                    "arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude",
                    true
                )
                .unwrap()
                .as_str(),
            "http://127.0.0.1:9/model/arn:aws:bedrock:us-east-1:1:inference-profile%2Fus.anthropic.claude/converse-stream"
        );
    }
}
