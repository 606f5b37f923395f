//! DPoP (RFC 9449, SEP-1932) against the local OAuth fake of `tests/support/oauth_fake.rs`:
//! a server that advertises DPoP gets proofs on its token requests and on every MCP request,
//! a DPoP-bound token presented as `DPoP`, and its nonces honoured after one challenge each
//! (token endpoint and MCP endpoint), for the authorization-code flow, a machine client, a
//! workload identity and cross-app access (whose IdP never sees a proof); a stored DPoP token
//! works in the next client with its stored key; a server without DPoP still sees `Bearer`
//! and no proof.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::sync::Arc;

use agcore::tools::mcp::auth::{
    ClientCredentials, ClientIdentity, CrossAppAccess, FileCredentialStore, IdTokenSource, McpAuth,
    OAuthClient, WorkloadIdentity,
};
use agcore::tools::mcp::{McpClient, McpTransport};
use serde_json::json;

use crate::support::mcp::before_10s;
use crate::support::oauth_fake::{AS_NONCE, OAuthFake, Options, RS_NONCE, Seen, TOKEN};

const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// A workload presenting a platform JWT as the public client `workload-1`.
fn workload() -> McpAuth {
    McpAuth::workload_identity(WorkloadIdentity::new(
        OAuthClient::public("workload-1"),
        IdTokenSource::Value("eyJ.workload.jwt".into()),
    ))
}

/// Connect with the authorization-code flow (pre-registered public client), list the tools
/// and call the one there is; its answer.
async fn connect_and_call(fake: &OAuthFake) -> String {
    connect_and_call_with(fake, None).await
}

/// [`connect_and_call`], keeping the credentials in `store`.
async fn connect_and_call_with(fake: &OAuthFake, store: Option<&FileCredentialStore>) -> String {
    let mut auth = McpAuth::authorization_code("http://127.0.0.1:8765/callback").with_identity(
        ClientIdentity::Preregistered {
            client_id: "client-1".into(),
            client_secret: None,
        },
    );
    if let Some(store) = store {
        auth = auth.with_store(Arc::new(store.clone()));
    }
    connect_and_call_as(fake, auth).await
}

/// [`connect_and_call`] with `auth`.
async fn connect_and_call_as(fake: &OAuthFake, auth: McpAuth) -> String {
    let mut client = McpClient::new("dpop-fake", McpTransport::http(fake.url()))
        .with_protocol_version("2025-06-18")
        .with_auth(auth);
    before_10s(client.connect()).await.unwrap();
    let tools = before_10s(client.list_tools()).await.unwrap();
    assert_eq!(tools.len(), 1);
    let answer = before_10s(client.call_tool(tools[0].name(), json!({})))
        .await
        .unwrap();
    before_10s(client.close()).await.unwrap();
    answer.to_string()
}

fn token_requests(seen: &[Seen]) -> Vec<&Seen> {
    seen.iter().filter(|s| s.path == "/token").collect()
}

/// The MCP POSTs that carried a token.
fn authorized_posts(seen: &[Seen]) -> Vec<&Seen> {
    seen.iter()
        .filter(|s| s.path == "/mcp" && s.method == "POST" && s.authorization.is_some())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dpop_server_gets_proofs_a_bound_token_and_its_nonces_honoured() {
    let fake = OAuthFake::start(Options {
        dpop: true,
        as_nonce: true,
        rs_nonce: true,
        ..Options::default()
    })
    .await;
    let answer = connect_and_call(&fake).await;
    assert!(answer.contains("authorized by DPoP"), "{answer}");
    let seen = fake.seen();

    // The token endpoint: a valid proof without a nonce, refused with `use_dpop_nonce`, then
    // one proof more with the nonce — and no third request.
    let tokens = token_requests(&seen);
    assert_eq!(tokens.len(), 2, "{tokens:#?}");
    let first = tokens[0].proof.as_ref().expect("a verified proof");
    assert_eq!(tokens[0].status, 400);
    assert!(first.get("nonce").is_none() && first.get("ath").is_none());
    let second = tokens[1].proof.as_ref().expect("a verified proof");
    assert_eq!(second["nonce"], AS_NONCE);
    assert_eq!(tokens[1].status, 200);

    // The MCP endpoint: every request with the token presents it as DPoP with a verified,
    // fresh proof; the first was refused for its nonce, the ping asked for the nonce, and
    // from then on every proof carries it and is accepted.
    let posts = authorized_posts(&seen);
    assert!(posts.len() >= 4, "{posts:#?}");
    for post in &posts {
        assert_eq!(
            post.authorization.as_deref(),
            Some(format!("DPoP {TOKEN}").as_str())
        );
        assert!(post.proof.is_some(), "unverified proof: {post:#?}");
    }
    let jtis: HashSet<String> = posts
        .iter()
        .map(|post| post.proof.as_ref().unwrap()["jti"].to_string())
        .collect();
    assert_eq!(jtis.len(), posts.len(), "a proof was reused");
    assert_eq!(posts[0].status, 401);
    // One origin serves both here: the first proof carries the token endpoint's nonce.
    assert_eq!(posts[0].proof.as_ref().unwrap()["nonce"], AS_NONCE);
    assert_eq!(posts[1].rpc.as_deref(), Some("ping"));
    assert_eq!(
        posts[2].rpc, posts[0].rpc,
        "the refused request is sent again"
    );
    for post in &posts[2..] {
        assert_eq!(post.status / 100, 2, "{post:#?}");
        assert_eq!(post.proof.as_ref().unwrap()["nonce"], RS_NONCE);
    }
    let nonce_challenges = posts.iter().filter(|post| post.status == 401).count();
    assert_eq!(
        nonce_challenges, 2,
        "the refused request and the ping, once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_dpop_still_gets_bearer_and_no_proof() {
    let fake = OAuthFake::start(Options::default()).await;
    let answer = connect_and_call(&fake).await;
    assert!(answer.contains("authorized by Bearer"), "{answer}");
    let seen = fake.seen();
    assert!(
        seen.iter().all(|s| !s.had_proof),
        "no request carries a DPoP proof"
    );
    assert_eq!(token_requests(&seen).len(), 1);
    let posts = authorized_posts(&seen);
    assert!(posts.len() >= 3, "{posts:#?}");
    for post in posts {
        assert_eq!(
            post.authorization.as_deref(),
            Some(format!("Bearer {TOKEN}").as_str())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_from_a_dpop_server_is_presented_as_bearer() {
    let fake = OAuthFake::start(Options {
        dpop: true,
        bearer_tokens: true,
        ..Options::default()
    })
    .await;
    let answer = connect_and_call(&fake).await;
    assert!(answer.contains("authorized by Bearer"), "{answer}");
    let seen = fake.seen();
    let tokens = token_requests(&seen);
    assert_eq!(tokens.len(), 1);
    assert!(
        tokens[0].proof.is_some(),
        "the token request carries a proof"
    );
    for post in authorized_posts(&seen) {
        assert_eq!(
            post.authorization.as_deref(),
            Some(format!("Bearer {TOKEN}").as_str())
        );
        assert!(!post.had_proof, "{post:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_dpop_token_works_in_the_next_client_with_its_stored_key() {
    let fake = OAuthFake::start(Options {
        dpop: true,
        rs_nonce: true,
        ..Options::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store = FileCredentialStore::new(dir.path().join("credentials.json"));
    let first = connect_and_call_with(&fake, Some(&store)).await;
    assert!(first.contains("authorized by DPoP"), "{first}");
    let after_first = fake.seen().len();
    assert_eq!(token_requests(&fake.seen()).len(), 1);

    // A new client (a new authorization state, as in the next process) with the same store:
    // no token request, and its proofs verify against the key the token was issued to (the
    // fake refuses any other key).
    let second = connect_and_call_with(&fake, Some(&store)).await;
    assert!(second.contains("authorized by DPoP"), "{second}");
    let seen = fake.seen();
    assert_eq!(token_requests(&seen).len(), 1, "no second authorization");
    let later = authorized_posts(&seen[after_first..]);
    assert!(later.len() >= 3, "{later:#?}");
    assert!(later.iter().all(|post| post.proof.is_some()));
    assert!(
        later
            .iter()
            .any(|post| post.rpc.as_deref() == Some("tools/call") && post.status == 200)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_client_of_a_dpop_resource_gets_a_bound_token_too() {
    let fake = OAuthFake::start(Options {
        dpop: true,
        as_nonce: true,
        rs_nonce: true,
        ..Options::default()
    })
    .await;
    let auth = McpAuth::client_credentials(ClientCredentials::Secret {
        client_id: "machine-1".into(),
        client_secret: "s3cret".into(),
    });
    let answer = connect_and_call_as(&fake, auth).await;
    assert!(answer.contains("authorized by DPoP"), "{answer}");
    let seen = fake.seen();
    let tokens = token_requests(&seen);
    assert_eq!(tokens.len(), 2, "one nonce challenge: {tokens:#?}");
    assert_eq!(tokens[1].proof.as_ref().unwrap()["nonce"], AS_NONCE);
    let posts = authorized_posts(&seen);
    assert!(posts.iter().all(|post| post.proof.is_some()), "{posts:#?}");
    assert!(
        posts
            .iter()
            .any(|post| post.rpc.as_deref() == Some("tools/call") && post.status == 200)
    );
}

/// The token requests of a JWT bearer grant: a proof without a nonce refused with
/// `use_dpop_nonce`, then one with the nonce, granted; the MCP requests present the bound
/// token with verified proofs.
fn assert_bound_jwt_bearer(seen: &[Seen]) {
    let tokens = token_requests(seen);
    assert_eq!(tokens.len(), 2, "one nonce challenge: {tokens:#?}");
    for token in &tokens {
        assert_eq!(token.grant_type.as_deref(), Some(JWT_BEARER));
    }
    assert_eq!(tokens[0].status, 400);
    let first = tokens[0].proof.as_ref().expect("a verified proof");
    assert!(first.get("nonce").is_none() && first.get("ath").is_none());
    assert_eq!(tokens[1].status, 200);
    assert_eq!(tokens[1].proof.as_ref().unwrap()["nonce"], AS_NONCE);
    let posts = authorized_posts(seen);
    assert!(posts.len() >= 4, "{posts:#?}");
    for post in &posts {
        assert_eq!(
            post.authorization.as_deref(),
            Some(format!("DPoP {TOKEN}").as_str())
        );
        assert!(post.proof.is_some(), "unverified proof: {post:#?}");
    }
    assert!(
        posts
            .iter()
            .any(|post| post.rpc.as_deref() == Some("tools/call") && post.status == 200)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_identity_of_a_dpop_server_gets_a_bound_token_and_proofs() {
    let fake = OAuthFake::start(Options {
        dpop: true,
        as_nonce: true,
        rs_nonce: true,
        ..Options::default()
    })
    .await;
    let answer = connect_and_call_as(&fake, workload()).await;
    assert!(answer.contains("authorized by DPoP"), "{answer}");
    assert_bound_jwt_bearer(&fake.seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_app_client_of_a_dpop_server_gets_a_bound_token_and_the_idp_no_proof() {
    let fake = OAuthFake::start(Options {
        dpop: true,
        as_nonce: true,
        rs_nonce: true,
        ..Options::default()
    })
    .await;
    let auth = McpAuth::cross_app_access(CrossAppAccess::new(
        format!("{}/idp/token", fake.server.uri()),
        OAuthClient::confidential("idp-client", "idp-secret"),
        IdTokenSource::Value("eyJ.id.token".into()),
        OAuthClient::public("app-1"),
    ));
    let answer = connect_and_call_as(&fake, auth).await;
    assert!(answer.contains("authorized by DPoP"), "{answer}");
    let seen = fake.seen();
    let idp: Vec<&Seen> = seen.iter().filter(|s| s.path == "/idp/token").collect();
    assert_eq!(idp.len(), 1, "{idp:#?}");
    assert_eq!(
        idp[0].grant_type.as_deref(),
        Some("urn:ietf:params:oauth:grant-type:token-exchange")
    );
    assert!(!idp[0].had_proof, "the IdP's exchange carries no proof");
    assert_bound_jwt_bearer(&seen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_identity_of_a_server_without_dpop_sends_no_proof() {
    let fake = OAuthFake::start(Options::default()).await;
    let answer = connect_and_call_as(&fake, workload()).await;
    assert!(answer.contains("authorized by Bearer"), "{answer}");
    let seen = fake.seen();
    assert!(seen.iter().all(|s| !s.had_proof), "{seen:#?}");
    let tokens = token_requests(&seen);
    assert_eq!(tokens.len(), 1);
    assert_eq!(tokens[0].grant_type.as_deref(), Some(JWT_BEARER));
    // One discovery, as before DPoP: the authorization server's metadata is fetched once.
    let metadata = seen
        .iter()
        .filter(|s| s.path == "/.well-known/oauth-authorization-server")
        .count();
    assert_eq!(metadata, 1, "{seen:#?}");
    for post in authorized_posts(&seen) {
        assert_eq!(
            post.authorization.as_deref(),
            Some(format!("Bearer {TOKEN}").as_str())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_workload_dpop_token_works_in_the_next_client_with_its_stored_key() {
    let fake = OAuthFake::start(Options {
        dpop: true,
        rs_nonce: true,
        ..Options::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store = FileCredentialStore::new(dir.path().join("credentials.json"));
    let auth = || workload().with_store(Arc::new(store.clone()));
    let first = connect_and_call_as(&fake, auth()).await;
    assert!(first.contains("authorized by DPoP"), "{first}");
    let after_first = fake.seen().len();
    assert_eq!(token_requests(&fake.seen()).len(), 1);
    let second = connect_and_call_as(&fake, auth()).await;
    assert!(second.contains("authorized by DPoP"), "{second}");
    let seen = fake.seen();
    assert_eq!(token_requests(&seen).len(), 1, "no second authorization");
    let later = authorized_posts(&seen[after_first..]);
    assert!(later.len() >= 3, "{later:#?}");
    assert!(later.iter().all(|post| post.proof.is_some()));
    assert!(
        later
            .iter()
            .any(|post| post.rpc.as_deref() == Some("tools/call") && post.status == 200)
    );
}

/// The checking fake's DPoP verifier is shown to refuse (issue 33, item 10): a proof whose
/// signature was edited, one re-keyed (its `jwk` names another key than the one that signed),
/// one with a stale `iat`, and one sent twice (a replay) — while a fresh, well-signed proof
/// passes once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dpop_verifier_refuses_forged_rekeyed_stale_and_replayed_proofs() {
    use crate::support::oauth_fake::{public_jwk, signed_proof, verified_claims};
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let key = |rng| {
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, rng).unwrap();
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap()
    };
    let (mine, other) = (key(&rng), key(&rng));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let fake = OAuthFake::start(Options {
        dpop: true,
        ..Options::default()
    })
    .await;
    let htu = format!("{}/token", fake.server.uri());
    let claims = |iat: u64, jti: &str| json!({"htm": "POST", "htu": htu, "iat": iat, "jti": jti});
    let good = signed_proof(&mine, &public_jwk(&mine), &claims(now, "a"));
    assert!(verified_claims(&good).is_some());
    let mut forged = good.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    let rekeyed = signed_proof(&mine, &public_jwk(&other), &claims(now, "b"));
    let stale = signed_proof(&mine, &public_jwk(&mine), &claims(now - 3_600, "c"));
    for (what, proof) in [
        ("forged", &forged),
        ("re-keyed", &rekeyed),
        ("stale", &stale),
    ] {
        assert!(verified_claims(proof).is_none(), "a {what} proof verified");
    }
    // Through the fake: the fresh proof gets a token once; sent again it is refused.
    let token = |proof: String| {
        let url = htu.clone();
        async move {
            reqwest::Client::new()
                .post(url)
                .header("DPoP", proof)
                .header("content-type", "application/x-www-form-urlencoded")
                .body("grant_type=authorization_code&code=c")
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(token(good.clone()).await, 200);
    assert_eq!(token(good).await, 400, "a replayed proof got a token");
    assert_eq!(token(stale).await, 400);
}
