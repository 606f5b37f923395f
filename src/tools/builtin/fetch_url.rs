//! `fetch_url`: an HTTP(S) GET, returned as text — HTML converted to Markdown-like text
//! ([`html_text`]), text and JSON as they are, binary refused.

pub(crate) mod dial;
mod errors;
mod html_text;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::argument_kind::ArgumentKind;
use crate::tools::base::ToolSource;
use crate::tools::builtin::limits::{MODEL_OUTPUT_BUDGET, OutputLimits, truncate_head};
use crate::tools::builtin::net_guard::{self, GuardedResolver, PrivateAddress};

use crate::tools::context::{IDEMPOTENCY_HEADER, ToolContext};
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::recheck;
use crate::tools::typed::Tool;
pub use dial::{DialCheck, HostLookup, LoopbackOnly};

/// How many bytes at the start of an untyped body are checked for binary content.
const SNIFF_BYTES: usize = 8 * 1024;

/// Fetch a web page or other text resource over HTTP(S) with GET. HTML is converted to plain
/// text; text and JSON are returned as they are; binary content is refused. Long content is cut
/// with a marker.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct FetchUrlInput {
    /// The `http://` or `https://` URL.
    pub url: String,
}

/// What `fetch_url` returns to the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchUrlOutput {
    /// The URL after redirects.
    pub url: String,
    /// The HTTP status code.
    pub status: u16,
    /// The `Content-Type` header, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The content as text (HTML converted), cut with a marker when long.
    pub content: String,
    /// Whether the download or the text was cut.
    pub truncated: bool,
}

/// The most redirects followed.
const MAX_REDIRECTS: usize = 5;

/// The `fetch_url` tool. Defaults: 30 s timeout, 2 MiB download, 2,000 lines and 26 KiB of
/// text (below the loop's tool-output limit), at most 5 redirects. It runs under the Network permission and is hidden in restricted
/// mode.
///
/// **The timeout covers the whole call**: connecting, downloading and converting HTML to text.
/// Past it the call ends at once with [`ToolError::Timeout`]. The conversion runs on a blocking
/// thread (never on the async workers), is linear in the page size, stops at the download cap,
/// and is told to stop when the call ends, so a hostile page (200,000 nested `<div>`s) cannot
/// stall other tools.
///
/// **Failures say why**: the host name that did not resolve, the address that refused the
/// connection, a failed TLS handshake, the blocked address and the rule that blocked it, the
/// limit that was hit, or the HTTP status.
///
/// **Public addresses only, by default.** A page the model reads can ask it to fetch
/// `http://169.254.169.254/` (cloud metadata) or an admin page on `127.0.0.1`, so `fetch_url`
/// refuses loopback, unspecified, private (RFC 1918), shared (RFC 6598), link-local, unique-local
/// (fc00::/7), multicast and broadcast addresses — and IPv6 forms that carry such an IPv4
/// address (IPv4-mapped and -compatible, NAT64 `64:ff9b::/96` and `64:ff9b:1::/48`, 6to4
/// `2002::/16`, Teredo `2001::/32`) — with [`ToolError::PermissionDenied`] naming the host,
/// the address class and, for an IPv6 form, the IPv4 address it carries. It checks IP literals
/// in the URL and in every redirect hop, and host names through its own DNS resolver, which
/// never hands a non-public address to the connector (so a name cannot resolve to a public
/// address for the check and a private one for the connection). For the same reason it ignores `HTTP_PROXY`/`HTTPS_PROXY` in this mode: the
/// proxy, not agcore, would resolve the name. To fetch from your own machine or network, opt out
/// with [`allow_private_network`](Self::allow_private_network).
///
/// ```
/// use agcore::tools::builtin::FetchUrl;
///
/// let public_only = FetchUrl::new();
/// let local_too = FetchUrl::new().allow_private_network(true);
/// # let _ = (public_only, local_too);
/// ```
#[derive(Debug)]
pub struct FetchUrl {
    timeout: Duration,
    max_download: usize,
    limits: OutputLimits,
    allow_private_network: bool,
    /// Tests only: a loopback port treated as public, to serve an "outside" first hop locally.
    #[cfg(test)]
    public_port: Option<u16>,
    lookup: Option<Arc<dyn HostLookup>>,
    dial_check: Option<Arc<dyn DialCheck>>,
    /// Send the call's idempotency key as `Idempotency-Key`.
    send_idempotency_key: bool,
    client: OnceLock<Result<reqwest::Client, String>>,
}

/// The IP-literal check of [`FetchUrl`], copied into the redirect policy.
#[derive(Debug, Clone, Copy)]
struct LiteralGuard {
    allow_private_network: bool,
    #[cfg(test)]
    public_port: Option<u16>,
}

impl LiteralGuard {
    /// The refusal for an IP-literal `url` of a non-public address, unless allowed.
    fn check(&self, url: &reqwest::Url) -> Result<(), PrivateAddress> {
        if self.allow_private_network {
            return Ok(());
        }
        #[cfg(test)]
        if self.public_port.is_some() && url.port() == self.public_port {
            return Ok(());
        }
        net_guard::check_literal(url)
    }
}

impl Default for FetchUrl {
    fn default() -> Self {
        Self::new()
    }
}

impl FetchUrl {
    /// A fetcher with the default limits.
    pub fn new() -> Self {
        FetchUrl {
            timeout: Duration::from_secs(30),
            max_download: 2 * 1024 * 1024,
            // Below the loop's tool-output limit (with room for the JSON fields and escaping), so the
            // loop never cuts a page's middle: the model is told where the text was cut instead.
            limits: OutputLimits::new(2000, MODEL_OUTPUT_BUDGET - 4 * 1024),
            allow_private_network: false,
            #[cfg(test)]
            public_port: None,
            lookup: None,
            dial_check: None,
            send_idempotency_key: false,
            client: OnceLock::new(),
        }
    }

    /// Allow (`true`) or refuse (`false`, the default) loopback, private, link-local and other
    /// non-public addresses — e.g. to fetch from a development server on `127.0.0.1`. Only for
    /// a model you trust with your local network: anything a fetched page says can steer it.
    /// Allowing also honours the `HTTP_PROXY`/`HTTPS_PROXY` variables again.
    pub fn allow_private_network(mut self, allow: bool) -> Self {
        self.allow_private_network = allow;
        self.client = OnceLock::new();
        self
    }

    /// Whether non-public addresses are allowed (see [`allow_private_network`](Self::allow_private_network)).
    pub fn allows_private_network(&self) -> bool {
        self.allow_private_network
    }

    /// Resolve host names with `lookup` instead of the system's resolver (the non-public
    /// filter and the dial check still apply to what it returns) — e.g. a test's names, so
    /// that no DNS query leaves the machine.
    pub fn with_lookup(mut self, lookup: Arc<dyn HostLookup>) -> Self {
        self.lookup = Some(lookup);
        self.client = OnceLock::new();
        self
    }

    /// Run `check` before every connection: on the addresses a host name resolved to (after
    /// the non-public filter) and on every IP literal of the URL and its redirect hops. A
    /// refused connection is never made. It sits after `fetch_url`'s own guard and holds
    /// even when that guard is off or wrong, so tests use [`LoopbackOnly`] to make sure no
    /// packet leaves the machine. With a check, `HTTP_PROXY`/`HTTPS_PROXY` are ignored.
    ///
    /// ```
    /// use agcore::tools::builtin::{FetchUrl, LoopbackOnly};
    ///
    /// let dials = LoopbackOnly::new();
    /// let tool = FetchUrl::new().with_dial_check(dials.clone());
    /// // ... run the tool ...
    /// assert!(dials.refused().is_empty(), "tried to reach {:?}", dials.refused());
    /// # let _ = tool;
    /// ```
    pub fn with_dial_check(mut self, check: Arc<dyn DialCheck>) -> Self {
        self.dial_check = Some(check);
        self.client = OnceLock::new();
        self
    }

    fn literal_guard(&self) -> LiteralGuard {
        LiteralGuard {
            allow_private_network: self.allow_private_network,
            #[cfg(test)]
            public_port: self.public_port,
        }
    }

    /// The refusal for an IP-literal `url` of a non-public address, unless allowed.
    fn check_literal(&self, url: &reqwest::Url) -> Result<(), PrivateAddress> {
        self.literal_guard().check(url)
    }

    /// Give up on a call after `timeout`: connecting, downloading and converting together.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.client = OnceLock::new();
        self
    }

    /// Send (`true`) or not (`false`, the default) the call's idempotency key
    /// ([`ToolContext::idempotency_key`]) as the `Idempotency-Key` request header, so that a
    /// server can recognise a GET repeated after a crash (a GET is meant to be safe, but some
    /// endpoints are not). Outside a run there is no key and no header.
    pub fn with_idempotency_key(mut self, send: bool) -> Self {
        self.send_idempotency_key = send;
        self
    }

    /// Stop downloading after `bytes` bytes.
    pub fn with_max_download(mut self, bytes: usize) -> Self {
        self.max_download = bytes.max(1);
        self
    }

    /// Cap the returned text at these limits.
    pub fn with_limits(mut self, limits: OutputLimits) -> Self {
        self.limits = limits;
        self
    }

    fn connect_timeout(&self) -> Duration {
        self.timeout.min(Duration::from_secs(10))
    }

    fn client(&self) -> Result<&reqwest::Client, ToolError> {
        self.client
            .get_or_init(|| {
                let guard = self.literal_guard();
                // No overall reqwest timeout: `run` puts one deadline over the whole call.
                let builder = reqwest::Client::builder()
                    .connect_timeout(self.connect_timeout())
                    .user_agent(concat!(
                        "agcore/",
                        env!("CARGO_PKG_VERSION"),
                        " (fetch_url)"
                    ))
                    .dns_resolver(GuardedResolver {
                        public_only: !self.allow_private_network,
                        lookup: self.lookup.clone(),
                        dial_check: self.dial_check.clone(),
                    })
                    .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                        if attempt.previous().len() >= MAX_REDIRECTS {
                            let url = attempt.url().to_string();
                            attempt.error(errors::TooManyRedirects {
                                limit: MAX_REDIRECTS,
                                url,
                            })
                        } else if let Err(refusal) = guard.check(attempt.url()) {
                            attempt.error(refusal)
                        } else if let Err(refusal) = recheck::recheck("url", attempt.url().as_str())
                        {
                            // The rules on `url` hold for every hop, not only the first.
                            attempt.error(refusal)
                        } else {
                            attempt.follow()
                        }
                    }));
                let builder = if self.allow_private_network {
                    builder
                } else {
                    builder.no_proxy()
                };
                // IP literals never reach the resolver: the check sees them as a proxy rule.
                let builder = match &self.dial_check {
                    Some(check) => builder.proxy(dial::literal_trap(Arc::clone(check))),
                    None => builder,
                };
                builder.build().map_err(|error| error.to_string())
            })
            .as_ref()
            .map_err(|error| failed(format!("could not build the HTTP client: {error}")))
    }

    /// The call without its deadline; `cancel` is set when the call ends (or is dropped).
    async fn fetch(
        &self,
        input: FetchUrlInput,
        cancel: Arc<AtomicBool>,
    ) -> Result<FetchUrlOutput, ToolError> {
        let url = reqwest::Url::parse(&input.url).map_err(|error| {
            ToolError::InvalidArguments(
                Self::NAME.to_owned(),
                format!("'{}' is not a valid URL: {error}", input.url),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ToolError::InvalidArguments(
                Self::NAME.to_owned(),
                format!(
                    "only http and https URLs can be fetched, not '{}'",
                    url.scheme()
                ),
            ));
        }
        self.check_literal(&url)
            .map_err(|refusal| refused(&refusal))?;
        let mut request = self.client()?.get(url.clone()).header(
            reqwest::header::ACCEPT,
            "text/html, text/plain, application/json;q=0.9, */*;q=0.5",
        );
        if self.send_idempotency_key
            && let Some(context) = ToolContext::current()
        {
            request = request.header(IDEMPOTENCY_HEADER, context.idempotency_key());
        }
        let mut response = request
            .send()
            .await
            .map_err(|error| errors::describe(&url, &error, self.connect_timeout()))?;
        let status = response.status();
        let final_url = response.url().clone();
        if !status.is_success() {
            return Err(failed(format!("GET {final_url} returned HTTP {status}")));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let mut body = classify(content_type.as_deref());
        if body == Body::Binary {
            return Err(failed(format!(
                "{final_url} is binary ({}); fetch_url only returns text",
                content_type.as_deref().unwrap_or_default()
            )));
        }
        let announced = response.content_length();
        let mut bytes: Vec<u8> = Vec::new();
        let mut download_cut = false;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| errors::describe(&final_url, &error, self.connect_timeout()))?
        {
            let room = self.max_download - bytes.len();
            if chunk.len() > room {
                bytes.extend_from_slice(&chunk[..room]);
                download_cut = true;
                break;
            }
            bytes.extend_from_slice(&chunk);
        }
        if body == Body::Unknown {
            body = if !looks_like_text(&bytes) {
                return Err(failed(format!(
                    "{final_url} looks binary (no Content-Type, not UTF-8 text); fetch_url only returns text"
                )));
            } else if bytes.trim_ascii_start().starts_with(b"<") {
                Body::Html
            } else {
                Body::Text
            };
        }
        let (text, text_cut) = match body {
            Body::Html => self.html_to_text(bytes, &final_url, cancel).await?,
            _ => (String::from_utf8_lossy(&bytes).into_owned(), false),
        };
        let cut = truncate_head(&text, self.limits);
        let mut content = cut.render();
        if text_cut && !cut.is_cut() {
            content.push_str(&format!(
                "\n[... the text stopped after {} bytes; the rest was cut ...]",
                self.max_download
            ));
        }
        if download_cut {
            let of = announced
                .map(|total| format!(" of {total}"))
                .unwrap_or_default();
            content.push_str(&format!(
                "\n[... download stopped after {} bytes{of}; the rest was cut ...]",
                self.max_download
            ));
        }
        Ok(FetchUrlOutput {
            url: final_url.to_string(),
            status: status.as_u16(),
            content_type,
            content,
            truncated: download_cut || text_cut || cut.is_cut(),
        })
    }

    /// HTML to text on a blocking thread, at most as long as the download cap; links made
    /// absolute against `base`. `(text, whether it was cut)`.
    async fn html_to_text(
        &self,
        bytes: Vec<u8>,
        base: &reqwest::Url,
        cancel: Arc<AtomicBool>,
    ) -> Result<(String, bool), ToolError> {
        let max_bytes = self.max_download;
        let page = base.clone();
        let converted = tokio::task::spawn_blocking(move || {
            let html = String::from_utf8_lossy(&bytes);
            let resolve = |href: &str| page.join(href).ok().map(String::from);
            html_text::html_to_text(&html, max_bytes, &resolve, &cancel)
        })
        .await
        .map_err(|error| failed(format!("converting {base} to text failed: {error}")))?;
        match converted {
            Some(converted) => Ok((converted.text, converted.cut)),
            // Only a call that is ending sets the flag; say so if anyone still listens.
            None => Err(self.timed_out()),
        }
    }

    fn timed_out(&self) -> ToolError {
        ToolError::Timeout {
            tool: Self::NAME.to_owned(),
            limit: self.timeout,
        }
    }
}

/// Sets the flag when dropped: a call that ends — done, timed out, or dropped by its caller —
/// tells its conversion thread to stop.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn failed(reason: String) -> ToolError {
    ToolError::ExecutionFailed(FetchUrl::NAME.to_owned(), reason)
}

/// `PermissionDenied`, not `InvalidArguments`: the URL is well-formed, the policy refuses where
/// it leads (as the workspace refuses paths outside it) — and a redirect or a DNS answer, not
/// the model's arguments, may be what leads there.
fn refused(refusal: &PrivateAddress) -> ToolError {
    ToolError::PermissionDenied(
        FetchUrl::NAME.to_owned(),
        format!(
            "a public address, but {refusal}; fetch_url refuses non-public addresses unless \
             allowed (FetchUrl::allow_private_network, or `allow_private_network = true` in \
             agcore.toml's [builtin])"
        ),
    )
}

/// How a body is turned into text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    Html,
    Text,
    Unknown,
    Binary,
}

fn classify(content_type: Option<&str>) -> Body {
    let Some(content_type) = content_type else {
        return Body::Unknown;
    };
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match mime.as_str() {
        "text/html" | "application/xhtml+xml" => Body::Html,
        "" => Body::Unknown,
        "application/json"
        | "application/xml"
        | "application/javascript"
        | "application/x-javascript"
        | "application/ecmascript"
        | "application/yaml"
        | "application/x-yaml"
        | "application/toml"
        | "application/x-ndjson"
        | "application/sql"
        | "application/graphql" => Body::Text,
        _ if mime.starts_with("text/") || mime.ends_with("+json") || mime.ends_with("+xml") => {
            Body::Text
        }
        _ => Body::Binary,
    }
}

/// Whether an untyped body looks like text: no NUL byte and valid UTF-8 (a character cut at
/// the end of the sample is fine).
fn looks_like_text(bytes: &[u8]) -> bool {
    let sample = &bytes[..bytes.len().min(SNIFF_BYTES)];
    !sample.contains(&0)
        && match std::str::from_utf8(sample) {
            Ok(_) => true,
            Err(error) => error.error_len().is_none(),
        }
}

impl Tool for FetchUrl {
    type Input = FetchUrlInput;
    type Output = FetchUrlOutput;
    const NAME: &'static str = "fetch_url";

    fn kind() -> ToolKind {
        ToolKind::Fetch
    }

    fn source() -> ToolSource {
        ToolSource::Builtin
    }

    fn argument_kind(argument: &str) -> ArgumentKind {
        match argument {
            "url" => ArgumentKind::Url,
            _ => ArgumentKind::Text,
        }
    }

    fn title(&self, input: Result<&FetchUrlInput, &Value>) -> String {
        let url = match input {
            Ok(input) => Some(input.url.as_str()),
            Err(raw) => raw.get("url").and_then(Value::as_str),
        };
        format!("Fetch {}", url.unwrap_or("URL"))
    }

    fn model_content(output: &FetchUrlOutput) -> String {
        output.content.clone()
    }

    async fn run(&self, input: FetchUrlInput) -> Result<FetchUrlOutput, ToolError> {
        let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
        match tokio::time::timeout(self.timeout, self.fetch(input, Arc::clone(&cancel.0))).await {
            Ok(result) => result,
            Err(_) => Err(self.timed_out()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_classified() {
        assert_eq!(classify(Some("text/html; charset=utf-8")), Body::Html);
        assert_eq!(classify(Some("application/json")), Body::Text);
        assert_eq!(classify(Some("application/vnd.api+json")), Body::Text);
        assert_eq!(classify(Some("text/plain")), Body::Text);
        assert_eq!(classify(Some("image/png")), Body::Binary);
        assert_eq!(classify(Some("application/octet-stream")), Body::Binary);
        assert_eq!(classify(None), Body::Unknown);
    }

    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// A server that redirects `/start` to `location`.
    async fn redirecting_to(location: &str) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/start"))
            .respond_with(ResponseTemplate::new(302).insert_header("location", location))
            .mount(&server)
            .await;
        server
    }

    /// A fetcher that treats `outside`'s port as a public host (the first hop), everything
    /// else on loopback as what it is.
    fn guarded_with_outside(outside: &MockServer) -> FetchUrl {
        // Nothing beyond loopback, whatever the guard does.
        let mut tool = FetchUrl::new().with_dial_check(LoopbackOnly::new());
        tool.public_port = Some(outside.address().port());
        tool
    }

    #[tokio::test]
    async fn a_redirect_from_an_allowed_host_to_loopback_is_refused_before_connecting() {
        let inside = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_string("secret"))
            .mount(&inside)
            .await;
        let target = format!("http://127.0.0.1:{}/admin", inside.address().port());
        let outside = redirecting_to(&target).await;
        let tool = guarded_with_outside(&outside);
        let error = tool
            .run(FetchUrlInput {
                url: format!("{}/start", outside.uri()),
            })
            .await
            .unwrap_err();
        let ToolError::PermissionDenied(name, reason) = &error else {
            panic!("expected PermissionDenied, got {error:?}");
        };
        assert_eq!(name, "fetch_url");
        assert!(
            reason.contains("'127.0.0.1' is a loopback address"),
            "{reason}"
        );
        assert_eq!(outside.received_requests().await.unwrap().len(), 1);
        assert!(
            inside.received_requests().await.unwrap().is_empty(),
            "the refused hop was never requested"
        );
    }

    #[tokio::test]
    async fn a_redirect_to_a_name_resolving_to_loopback_is_refused_by_the_resolver() {
        let inside = MockServer::start().await;
        let target = format!("http://localhost:{}/admin", inside.address().port());
        let outside = redirecting_to(&target).await;
        let error = guarded_with_outside(&outside)
            .run(FetchUrlInput {
                url: format!("{}/start", outside.uri()),
            })
            .await
            .unwrap_err();
        assert!(
            matches!(&error, ToolError::PermissionDenied(_, reason) if reason.contains("'localhost' is a loopback address")),
            "{error:?}"
        );
        assert!(inside.received_requests().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn the_test_hook_alone_lets_the_first_hop_through() {
        // Guards the two tests above: without a refused target the redirect is followed.
        let outside = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/start"))
            .respond_with(ResponseTemplate::new(302).insert_header("location", "/end"))
            .mount(&outside)
            .await;
        Mock::given(method("GET"))
            .and(path("/end"))
            .respond_with(ResponseTemplate::new(200).set_body_string("fine"))
            .mount(&outside)
            .await;
        let output = guarded_with_outside(&outside)
            .run(FetchUrlInput {
                url: format!("{}/start", outside.uri()),
            })
            .await
            .unwrap();
        assert_eq!(output.content, "fine");
    }

    #[test]
    fn binary_sniffing_refuses_nul_and_invalid_utf8() {
        assert!(looks_like_text(b"hello"));
        assert!(!looks_like_text(b"he\0llo"));
        assert!(!looks_like_text(&[0xff, 0xfe, 0x41]));
    }
}
