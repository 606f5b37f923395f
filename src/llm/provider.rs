//! [`Provider`]: one entry of the provider table ([`crate::llm::providers`]) — what each
//! backend declares about itself — and the [`Connection`] it makes. Apart from the table, so
//! that the backends depend on the entry's type and the table on the backends, not both ways.

use std::sync::Arc;

use crate::llm::error::ProviderError;
use crate::llm::model::{ChatModel, WireApi};
use crate::llm::transport::TransportSettings;
use crate::vocab::ArtifactProvider;

/// One model API agcore connects to by name.
#[derive(Debug)]
pub struct Provider {
    /// The name of `--provider`, `[model] provider` and the `PROVIDER:` prefix of `--model`.
    pub name: &'static str,
    /// The wire API it speaks.
    pub api: WireApi,
    /// The vendor's public base URL, up to where the API's resource paths begin.
    pub default_base_url: &'static str,
    /// The variable that overrides the base URL (`OPENAI_BASE_URL`, ...).
    pub base_url_variable: &'static str,
    /// The variables that hold the key, in the order they are read.
    pub key_variables: &'static [&'static str],
    /// A model for a connection.
    pub connect: fn(Connection) -> Result<Arc<dyn ChatModel>, ProviderError>,
}

impl Provider {
    /// The artifacts its API reads back.
    pub fn artifact_provider(&self) -> ArtifactProvider {
        self.api.artifact_provider()
    }

    /// The connection the environment describes: the base URL variable (else the default) and
    /// the first key variable set; empty variables count as unset.
    pub fn from_env(&self) -> Connection {
        self.from_lookup(|name| std::env::var(name).ok())
    }

    /// [`Provider::from_env`] over `lookup` instead of the process environment.
    pub fn from_lookup(&self, lookup: impl Fn(&str) -> Option<String>) -> Connection {
        let var = |name: &str| lookup(name).filter(|value| !value.is_empty());
        Connection {
            provider: self.name.to_owned(),
            base_url: var(self.base_url_variable)
                .unwrap_or_else(|| self.default_base_url.to_owned()),
            api_key: self.key_variables.iter().find_map(|name| var(name)),
            transport: TransportSettings::default(),
            cloud: CloudSettings::default(),
        }
    }

    /// A model for `connection`.
    ///
    /// # Errors
    /// [`ProviderError::Other`] when the base URL, the key or a header is invalid.
    pub fn connect(&self, connection: Connection) -> Result<Arc<dyn ChatModel>, ProviderError> {
        (self.connect)(connection)
    }
}

/// Where and how to reach one provider's server.
#[derive(Clone)]
pub struct Connection {
    /// The provider name the model reports (an OpenAI-compatible server may go by its own:
    /// `ollama`, `vllm`, ...).
    pub provider: String,
    /// The base URL, up to where the API's resource paths begin.
    pub base_url: String,
    /// The key, if any; never printed.
    pub api_key: Option<String>,
    /// Timeouts, limits, extra headers and query.
    pub transport: TransportSettings,
    /// Where a cloud's model lives (region, project, deployment, ...); unused by the others.
    pub cloud: CloudSettings,
}

/// The cloud settings of a [`Connection`]: `[model]` `region`, `profile`, `project`,
/// `location`, `deployment` and `api_version`. Each backend reads those it needs and documents
/// where it looks when one is unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CloudSettings {
    /// The AWS region (Bedrock).
    pub region: Option<String>,
    /// The AWS shared-config profile whose credentials sign (Bedrock).
    pub profile: Option<String>,
    /// The Google Cloud project (Vertex AI).
    pub project: Option<String>,
    /// The Google Cloud location (Vertex AI).
    pub location: Option<String>,
    /// The deployment name (Azure OpenAI).
    pub deployment: Option<String>,
    /// The `api-version` query parameter (Azure OpenAI).
    pub api_version: Option<String>,
}

impl Connection {
    /// A connection to `base_url` for the provider `provider`, without a key, default transport.
    pub fn new(provider: impl Into<String>, base_url: impl Into<String>) -> Self {
        Connection {
            provider: provider.into(),
            base_url: base_url.into(),
            api_key: None,
            transport: TransportSettings::default(),
            cloud: CloudSettings::default(),
        }
    }

    /// With `key`.
    #[must_use]
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// With these transport settings.
    #[must_use]
    pub fn with_transport(mut self, transport: TransportSettings) -> Self {
        self.transport = transport;
        self
    }

    /// With these cloud settings.
    #[must_use]
    pub fn with_cloud(mut self, cloud: CloudSettings) -> Self {
        self.cloud = cloud;
        self
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("transport", &self.transport)
            .field("cloud", &self.cloud)
            .finish()
    }
}
