//! A fake OAuth-protected MCP server on 127.0.0.1 — authorization server and MCP endpoint on
//! one port — that speaks DPoP (RFC 9449) when asked to, for `suite::mcp_dpop`.
//!
//! Authorization server: RFC 9728 / RFC 8414 metadata (with `dpop_signing_alg_values_supported:
//! ["ES256"]` under [`Options::dpop`]), `/authorize` redirecting at once with a code, `/token`
//! answering a token — `token_type: DPoP` when the request carried a valid proof (unless
//! [`Options::bearer_tokens`]), after a `400 use_dpop_nonce` when [`Options::as_nonce`] and the
//! proof lacks [`AS_NONCE`]. MCP endpoint (`/mcp`, JSON answers, 2025-06-18): `401` with a
//! `DPoP` (or `Bearer`) challenge without a token; with one, under DPoP, the proof must verify
//! with its own `jwk`, name `POST` and this URL, carry `ath` of the token and the key the token
//! was issued to, and, when [`Options::rs_nonce`], [`RS_NONCE`] — else `401 DPoP
//! error="use_dpop_nonce"` with the nonce. `/idp/token` plays the enterprise IdP of cross-app
//! access (an [`ID_JAG`] for any token exchange). Every request is recorded ([`Seen`]).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The nonce the authorization server hands out.
pub const AS_NONCE: &str = "as-nonce-1";
/// The nonce the MCP endpoint hands out.
pub const RS_NONCE: &str = "rs-nonce-1";
/// The access token issued.
pub const TOKEN: &str = "tok-dpop-1";
/// The ID-JAG the IdP endpoint (`/idp/token`) issues.
pub const ID_JAG: &str = "id-jag-1";

/// What the fake demands.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Advertise DPoP and demand it on `/mcp`.
    pub dpop: bool,
    /// The token endpoint wants its nonce in the proof.
    pub as_nonce: bool,
    /// The MCP endpoint wants its nonce in the proof.
    pub rs_nonce: bool,
    /// Answer proofs with `token_type: Bearer` anyway (RFC 9449 §5 allows it).
    pub bearer_tokens: bool,
}

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// The `Authorization` header.
    pub authorization: Option<String>,
    /// The `DPoP` header's claims, when it verified (signature with its own `jwk`).
    pub proof: Option<Value>,
    /// Whether a `DPoP` header was sent at all.
    pub had_proof: bool,
    /// The JSON-RPC method of an `/mcp` POST.
    pub rpc: Option<String>,
    /// The `grant_type` of a token request (`/token`, `/idp/token`).
    pub grant_type: Option<String>,
    /// The status answered.
    pub status: u16,
}

#[derive(Default)]
struct State {
    seen: Vec<Seen>,
    /// The `jti` of every proof that verified: a proof sent again is a replay.
    jtis: std::collections::HashSet<String>,
    /// The thumbprint of the key the token was issued to.
    jkt: Option<String>,
}

/// The running fake.
pub struct OAuthFake {
    pub server: MockServer,
    state: Arc<Mutex<State>>,
}

impl OAuthFake {
    pub async fn start(options: Options) -> Self {
        let server = MockServer::start().await;
        let state = Arc::new(Mutex::new(State::default()));
        Mock::given(any())
            .respond_with(Responder {
                options,
                base: server.uri(),
                state: state.clone(),
            })
            .mount(&server)
            .await;
        OAuthFake { server, state }
    }

    /// The MCP endpoint.
    pub fn url(&self) -> String {
        format!("{}/mcp", self.server.uri())
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }
}

struct Responder {
    options: Options,
    base: String,
    state: Arc<Mutex<State>>,
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let header = |name: &str| {
            request
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let proof_header = header("dpop");
        // A proof verifies once: its `jti` sent again is a replay, refused like a bad proof.
        let proof = proof_header
            .as_deref()
            .and_then(verified_claims)
            .filter(|(claims, _)| {
                let jti = claims["jti"].as_str().unwrap_or_default().to_owned();
                self.state.lock().unwrap().jtis.insert(jti)
            });
        let rpc = (request.url.path() == "/mcp" && request.method.as_str() == "POST")
            .then(|| serde_json::from_slice::<Value>(&request.body).ok())
            .flatten();
        let grant_type = request.url.path().ends_with("/token").then(|| {
            url::form_urlencoded::parse(&request.body)
                .find(|(name, _)| name == "grant_type")
                .map(|(_, value)| value.into_owned())
        });
        let response = self.route(request, proof.as_ref(), rpc.as_ref());
        self.state.lock().unwrap().seen.push(Seen {
            method: request.method.to_string(),
            path: request.url.path().to_owned(),
            authorization: header("authorization"),
            proof: proof.map(|(claims, _)| claims),
            had_proof: proof_header.is_some(),
            rpc: rpc.and_then(|body| body["method"].as_str().map(str::to_owned)),
            grant_type: grant_type.flatten(),
            status: response.0,
        });
        response.1
    }
}

impl Responder {
    fn route(
        &self,
        request: &Request,
        proof: Option<&(Value, String)>,
        rpc: Option<&Value>,
    ) -> (u16, ResponseTemplate) {
        let base = &self.base;
        let json =
            |status: u16, body: Value| (status, ResponseTemplate::new(status).set_body_json(body));
        match (request.method.as_str(), request.url.path()) {
            ("GET", "/.well-known/oauth-protected-resource/mcp") => json(
                200,
                json!({ "resource": format!("{base}/mcp"), "authorization_servers": [base] }),
            ),
            ("GET", "/.well-known/oauth-authorization-server") => {
                let mut metadata = json!({
                    "issuer": base,
                    "authorization_endpoint": format!("{base}/authorize"),
                    "token_endpoint": format!("{base}/token"),
                    "response_types_supported": ["code"],
                    "grant_types_supported": [
                        "authorization_code",
                        "refresh_token",
                        "client_credentials",
                        "urn:ietf:params:oauth:grant-type:jwt-bearer",
                    ],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
                });
                if self.options.dpop {
                    metadata["dpop_signing_alg_values_supported"] = json!(["ES256"]);
                }
                json(200, metadata)
            }
            ("GET", "/authorize") => {
                let query = |name: &str| {
                    request
                        .url
                        .query_pairs()
                        .find(|(key, _)| key == name)
                        .map(|(_, value)| value.into_owned())
                        .unwrap_or_default()
                };
                let mut redirect = url::Url::parse(&query("redirect_uri")).unwrap();
                redirect
                    .query_pairs_mut()
                    .append_pair("code", "code-1")
                    .append_pair("state", &query("state"))
                    .append_pair("iss", base);
                (
                    302,
                    ResponseTemplate::new(302).insert_header("Location", redirect.as_str()),
                )
            }
            ("POST", "/token") => self.token(proof),
            // The enterprise IdP of cross-app access: any ID token for an ID-JAG.
            ("POST", "/idp/token") => json(
                200,
                json!({
                    "access_token": ID_JAG,
                    "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                    "token_type": "N_A",
                }),
            ),
            ("POST", "/mcp") => self.mcp(request, proof, rpc),
            // No server-initiated stream, no sessions to end.
            ("GET" | "DELETE", "/mcp") => (405, ResponseTemplate::new(405)),
            _ => json(404, json!({ "error": "not_found" })),
        }
    }

    fn token(&self, proof: Option<&(Value, String)>) -> (u16, ResponseTemplate) {
        let base = &self.base;
        let error = |status: u16, code: &str| {
            (
                status,
                ResponseTemplate::new(status).set_body_json(json!({ "error": code })),
            )
        };
        if !self.options.dpop {
            return (
                200,
                ResponseTemplate::new(200).set_body_json(
                    json!({ "access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600 }),
                ),
            );
        }
        let Some((claims, jkt)) = proof else {
            return error(400, "invalid_dpop_proof");
        };
        if claims["htm"] != "POST" || claims["htu"] != format!("{base}/token") {
            return error(400, "invalid_dpop_proof");
        }
        if self.options.as_nonce && claims["nonce"] != AS_NONCE {
            let (status, template) = error(400, "use_dpop_nonce");
            return (status, template.insert_header("DPoP-Nonce", AS_NONCE));
        }
        self.state.lock().unwrap().jkt = Some(jkt.clone());
        let token_type = if self.options.bearer_tokens {
            "Bearer"
        } else {
            "DPoP"
        };
        (
            200,
            ResponseTemplate::new(200).set_body_json(
                json!({ "access_token": TOKEN, "token_type": token_type, "expires_in": 3600 }),
            ),
        )
    }

    fn mcp(
        &self,
        request: &Request,
        proof: Option<&(Value, String)>,
        rpc: Option<&Value>,
    ) -> (u16, ResponseTemplate) {
        let base = &self.base;
        let metadata = format!("{base}/.well-known/oauth-protected-resource/mcp");
        let scheme = if self.options.dpop { "DPoP" } else { "Bearer" };
        let challenge = |status: u16, error: Option<&str>| {
            let value = match error {
                Some(error) => {
                    format!(r#"{scheme} error="{error}", resource_metadata="{metadata}""#)
                }
                None => format!(r#"{scheme} resource_metadata="{metadata}""#),
            };
            (
                status,
                ResponseTemplate::new(status).insert_header("WWW-Authenticate", value.as_str()),
            )
        };
        let authorization = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if authorization.is_empty() {
            return challenge(401, None);
        }
        let bound = self.options.dpop && !self.options.bearer_tokens;
        if !bound {
            if authorization != format!("Bearer {TOKEN}") {
                return challenge(401, Some("invalid_token"));
            }
        } else {
            let jkt = self.state.lock().unwrap().jkt.clone();
            let valid = authorization == format!("DPoP {TOKEN}")
                && proof.is_some_and(|(claims, key)| {
                    claims["htm"] == "POST"
                        && claims["htu"] == format!("{base}/mcp")
                        && claims["ath"] == URL_SAFE_NO_PAD.encode(Sha256::digest(TOKEN))
                        && Some(key) == jkt.as_ref()
                });
            if !valid {
                return challenge(401, Some("invalid_token"));
            }
            let nonce = proof.map(|(claims, _)| claims["nonce"].clone());
            if self.options.rs_nonce && nonce != Some(json!(RS_NONCE)) {
                let (status, template) = challenge(401, Some("use_dpop_nonce"));
                return (status, template.insert_header("DPoP-Nonce", RS_NONCE));
            }
        }
        let Some(rpc) = rpc else {
            return (400, ResponseTemplate::new(400));
        };
        let Some(id) = rpc.get("id").cloned() else {
            return (202, ResponseTemplate::new(202));
        };
        let result = match rpc["method"].as_str().unwrap_or_default() {
            "initialize" => json!({
                "protocolVersion": "2025-06-18",
                "capabilities": { "tools": {} },
                "serverInfo": { "name": "oauth-fake", "version": "1.0.0" },
            }),
            "tools/list" => json!({ "tools": [{
                "name": "whoami",
                "description": "Says how the request was authorized.",
                "inputSchema": { "type": "object" },
            }] }),
            "tools/call" => json!({
                "content": [{
                    "type": "text",
                    "text": format!("authorized by {}", authorization.split(' ').next().unwrap_or_default()),
                }],
            }),
            "ping" => json!({}),
            _ => {
                return (
                    200,
                    ResponseTemplate::new(200).set_body_json(json!({
                        "jsonrpc": "2.0", "id": id,
                        "error": { "code": -32601, "message": "method not found" },
                    })),
                );
            }
        };
        (
            200,
            ResponseTemplate::new(200)
                .set_body_json(json!({ "jsonrpc": "2.0", "id": id, "result": result })),
        )
    }
}

/// The claims of a DPoP proof and the RFC 7638 thumbprint of its key, when it is a
/// `dpop+jwt` ES256 JWT whose signature verifies with the `jwk` in its header (no private
/// part); `None` otherwise.
pub fn verified_claims(proof: &str) -> Option<(Value, String)> {
    let parts: Vec<&str> = proof.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return None;
    };
    let decode = |part: &str| -> Option<Value> {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).ok()?).ok()
    };
    let head = decode(header)?;
    if head["typ"] != "dpop+jwt" || head["alg"] != "ES256" || head["jwk"].get("d").is_some() {
        return None;
    }
    let jwk = &head["jwk"];
    let (x, y) = (jwk["x"].as_str()?, jwk["y"].as_str()?);
    let mut point = vec![4_u8];
    point.extend(URL_SAFE_NO_PAD.decode(x).ok()?);
    point.extend(URL_SAFE_NO_PAD.decode(y).ok()?);
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
        .verify(
            format!("{header}.{claims}").as_bytes(),
            &URL_SAFE_NO_PAD.decode(signature).ok()?,
        )
        .ok()?;
    let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
    let jkt = URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()));
    let claims = decode(claims)?;
    // Fresh (RFC 9449 §11.1: `iat` within an acceptable window; five minutes either way, far
    // from any test's speed) and with a `jti` to detect replays by.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs() as i64;
    if (claims["iat"].as_i64()? - now).abs() > 300
        || claims["jti"].as_str().is_none_or(str::is_empty)
    {
        return None;
    }
    Some((claims, jkt))
}

/// A `dpop+jwt` proof signed by `signer` with `jwk` in its header (any key: a re-keyed proof
/// names another key than the one that signed) and `claims`: for the verifier's own tests.
pub fn signed_proof(
    signer: &aws_lc_rs::signature::EcdsaKeyPair,
    jwk: &Value,
    claims: &Value,
) -> String {
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": jwk});
    let text = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = signer.sign(&rng, text.as_bytes()).unwrap();
    format!("{text}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
}

/// The public JWK of `key`.
pub fn public_jwk(key: &aws_lc_rs::signature::EcdsaKeyPair) -> Value {
    use aws_lc_rs::signature::KeyPair;
    let point = key.public_key().as_ref();
    json!({
        "kty": "EC",
        "crv": "P-256",
        "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
        "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
    })
}
