//! A fake Bedrock runtime on 127.0.0.1 (`/model/{id}/converse` and `converse-stream`) that
//! checks every request the way AWS does before it answers:
//!
//! - the SigV4 signature: recomputed with AWS's own signer (`aws-sigv4`) from the request as
//!   received (method, URL, the signed headers, the body bytes, its `x-amz-date`) and the
//!   known test credentials; a mismatch is a 403 `InvalidSignatureException`;
//! - the Converse shape: roles alternating from `user`, no empty content, every `toolUse`
//!   answered by a `toolResult` with its id in the very next user message, and the
//!   `reasoningContent` blocks it served to the same model back byte-exact and in place
//!   (none sent to another model); a broken rule is a 400 `ValidationException`.
//!
//! A scripted [`Reply::Converse`] is a whole Converse reply; to a `converse-stream` request it
//! is sent as ConverseStream events in AWS event-stream frames (encoded with
//! `aws-smithy-eventstream`, each payload padded with a `p` field as AWS pads them).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::Bytes;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The test credentials the fake checks signatures against.
pub const ACCESS_KEY: &str = "AKIDEXAMPLE";
/// Their secret.
pub const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
/// Their session token.
pub const SESSION_TOKEN: &str = "session-token-example";
/// The region the fake signs for.
pub const REGION: &str = "us-west-2";

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A whole Converse reply (streamed as events to a stream request).
    Converse(Value),
    /// An HTTP error: status, `x-amzn-ErrorType`, message.
    Status(u16, &'static str, &'static str),
    /// A 200 stream whose first frame is this exception (`throttlingException`, ...).
    StreamException(&'static str, &'static str),
}

/// A request as received.
#[derive(Clone, Debug)]
pub struct Received {
    /// The path (`/model/.../converse-stream`).
    pub path: String,
    /// The parsed body.
    pub body: Value,
    /// The body's text.
    pub text: String,
    /// The access key id it was signed with, if signed.
    pub access_key: Option<String>,
    /// The `Authorization` header.
    pub authorization: Option<String>,
    /// Why the fake refused it, if it did.
    pub rejection: Option<String>,
}

#[derive(Default)]
struct State {
    script: VecDeque<Reply>,
    received: Vec<Received>,
    /// The content of each reply served, with the model it was served to.
    served: Vec<(String, Vec<Value>)>,
}

/// The running fake.
pub struct BedrockFake {
    server: MockServer,
    state: Arc<Mutex<State>>,
}

struct Responder(Arc<Mutex<State>>);

impl BedrockFake {
    /// Start the fake with `script`.
    pub async fn start(script: Vec<Reply>) -> Self {
        let server = MockServer::start().await;
        let state = Arc::new(Mutex::new(State {
            script: script.into(),
            ..State::default()
        }));
        Mock::given(method("POST"))
            .respond_with(Responder(state.clone()))
            .mount(&server)
            .await;
        BedrockFake { server, state }
    }

    /// The endpoint (`http://127.0.0.1:PORT`).
    pub fn base_url(&self) -> String {
        self.server.uri()
    }

    /// Queue another answer.
    pub fn push(&self, reply: Reply) {
        self.state.lock().unwrap().script.push_back(reply);
    }

    /// The requests so far.
    pub fn received(&self) -> Vec<Received> {
        self.state.lock().unwrap().received.clone()
    }

    /// Panic with the reasons when any request was refused.
    pub fn assert_no_rejections(&self) {
        let rejected: Vec<String> = self
            .received()
            .into_iter()
            .filter_map(|received| received.rejection)
            .collect();
        assert!(rejected.is_empty(), "the fake refused: {rejected:#?}");
    }
}

fn error(status: u16, kind: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .insert_header(
            "x-amzn-ErrorType",
            format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
        )
        .set_body_raw(json!({"message": message}).to_string(), "application/json")
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let path = request.url.path().to_owned();
        let text = String::from_utf8_lossy(&request.body).into_owned();
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let model = path
            .strip_prefix("/model/")
            .and_then(|rest| rest.rsplit_once('/'))
            .map(|(model, _)| percent_decode(model))
            .unwrap_or_default();
        let stream = path.ends_with("/converse-stream");
        let mut state = self.0.lock().unwrap();
        let signature = verify_signature(request);
        let shape = signature
            .as_ref()
            .err()
            .cloned()
            .map_or_else(|| check_shape(&body, &text, &model, &state.served), Err);
        let authorization = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let access_key = authorization.as_deref().and_then(|auth| {
            auth.split("Credential=")
                .nth(1)
                .and_then(|rest| rest.split('/').next())
                .map(str::to_owned)
        });
        let rejection = shape.err();
        state.received.push(Received {
            path,
            body,
            text,
            access_key,
            authorization,
            rejection: rejection.clone(),
        });
        if let Some(reason) = rejection {
            return match signature {
                Err(_) => error(403, "InvalidSignatureException", &reason),
                Ok(()) => error(400, "ValidationException", &reason),
            };
        }
        match state.script.pop_front() {
            None => error(500, "InternalServerException", "the fake's script is empty"),
            Some(Reply::Status(status, kind, message)) => error(status, kind, message),
            Some(Reply::StreamException(kind, message)) => {
                let frame = frame(
                    "exception",
                    ":exception-type",
                    kind,
                    &json!({"message": message}),
                );
                ResponseTemplate::new(200).set_body_raw(frame, "application/vnd.amazon.eventstream")
            }
            Some(Reply::Converse(reply)) => {
                let content = reply["output"]["message"]["content"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                state.served.push((model, content));
                if stream {
                    ResponseTemplate::new(200)
                        .set_body_raw(stream_frames(&reply), "application/vnd.amazon.eventstream")
                } else {
                    ResponseTemplate::new(200).set_body_json(reply)
                }
            }
        }
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// Recompute the request's SigV4 signature from the test credentials; `Err` says what differs.
pub fn verify_signature(request: &Request) -> Result<(), String> {
    let header = |name: &str| {
        request
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let authorization = header("authorization").ok_or("no Authorization header")?;
    let amz_date = header("x-amz-date").ok_or("no x-amz-date header")?;
    if header("x-amz-security-token").as_deref() != Some(SESSION_TOKEN) {
        return Err("the session token is missing or wrong".into());
    }
    let signed: Vec<String> = authorization
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .ok_or("no SignedHeaders")?
        .split(';')
        .map(str::to_owned)
        .collect();
    if !signed.iter().any(|name| name == "host") || !signed.iter().any(|name| name == "x-amz-date")
    {
        return Err(format!("host and x-amz-date must be signed: {signed:?}"));
    }
    // 20261208T010203Z -> 2026-12-08T01:02:03Z
    let d = &amz_date;
    if d.len() != 16 {
        return Err(format!("bad x-amz-date {d}"));
    }
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &d[0..4],
        &d[4..6],
        &d[6..8],
        &d[9..11],
        &d[11..13],
        &d[13..15]
    );
    let time =
        aws_smithy_types::DateTime::from_str(&iso, aws_smithy_types::date_time::Format::DateTime)
            .map_err(|e| e.to_string())?;
    let time = SystemTime::try_from(time).map_err(|e| e.to_string())?;
    let identity = Credentials::new(
        ACCESS_KEY,
        SECRET_KEY,
        Some(SESSION_TOKEN.into()),
        None,
        "test",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(REGION)
        .name("bedrock")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let values: Vec<(String, String)> = signed
        .iter()
        .filter(|name| {
            !matches!(
                name.as_str(),
                "host" | "x-amz-date" | "x-amz-security-token"
            )
        })
        .map(|name| (name.clone(), header(name).unwrap_or_default()))
        .collect();
    // wiremock's URL names `localhost`; the signature covers the Host header sent.
    let host = header("host").ok_or("no Host header")?;
    let url = match request.url.query() {
        Some(query) => format!("http://{host}{}?{query}", request.url.path()),
        None => format!("http://{host}{}", request.url.path()),
    };
    let signable = SignableRequest::new(
        request.method.as_str(),
        &url,
        values.iter().map(|(n, v)| (n.as_str(), v.as_str())),
        SignableBody::Bytes(&request.body),
    )
    .map_err(|e| e.to_string())?;
    let (instructions, _) = aws_sigv4::http_request::sign(signable, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    let expected = instructions
        .headers()
        .find(|(name, _)| *name == "authorization")
        .map(|(_, value)| value.to_owned())
        .ok_or("the signer made no Authorization")?;
    if expected == authorization {
        Ok(())
    } else {
        Err(format!(
            "The request signature we calculated does not match the signature you provided (expected {expected}, got {authorization})"
        ))
    }
}

/// The Converse rules the fake enforces (see the module docs).
pub fn check_shape(
    body: &Value,
    text: &str,
    model: &str,
    served: &[(String, Vec<Value>)],
) -> Result<(), String> {
    let messages = body["messages"].as_array().ok_or("no messages")?;
    if messages.is_empty() {
        return Err("messages is empty".into());
    }
    let mut expected_role = "user";
    let mut open_calls: Vec<String> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or("");
        if role != expected_role {
            return Err(format!("messages.{index}: roles must alternate from user"));
        }
        expected_role = if role == "user" { "assistant" } else { "user" };
        let content = message["content"].as_array().ok_or("no content")?;
        if content.is_empty() {
            return Err(format!("messages.{index}: empty content"));
        }
        if role == "user" {
            let results: Vec<String> = content
                .iter()
                .filter_map(|b| b.pointer("/toolResult/toolUseId").and_then(Value::as_str))
                .map(str::to_owned)
                .collect();
            let mut wanted = open_calls.clone();
            wanted.sort();
            let mut got = results.clone();
            got.sort();
            if wanted != got {
                return Err(format!(
                    "messages.{index}: toolResult ids {got:?} do not answer the toolUse ids {wanted:?}"
                ));
            }
            open_calls.clear();
        } else {
            open_calls = content
                .iter()
                .filter_map(|b| b.pointer("/toolUse/toolUseId").and_then(Value::as_str))
                .map(str::to_owned)
                .collect();
        }
        for block in content {
            if block.get("text").is_some_and(|t| t == "") {
                return Err(format!("messages.{index}: an empty text block"));
            }
        }
    }
    // A reply served earlier comes back (found by its first other block) with its reasoning
    // blocks equal, string for string, and before it — or, to another model, without them.
    for (served_model, served_content) in served {
        let Some(marker) = served_content
            .iter()
            .find(|block| block.get("reasoningContent").is_none())
        else {
            continue;
        };
        let reasoning: Vec<&Value> = served_content
            .iter()
            .filter(|block| block.get("reasoningContent").is_some())
            .collect();
        for message in messages.iter().filter(|m| m["role"] == "assistant") {
            let content = message["content"].as_array().unwrap();
            let Some(at) = content.iter().position(|block| block == marker) else {
                continue;
            };
            let sent: Vec<&Value> = content[..at]
                .iter()
                .filter(|block| block.get("reasoningContent").is_some())
                .collect();
            if served_model == model && sent != reasoning {
                return Err(format!(
                    "the reasoning blocks served to this model came back missing or edited: {sent:?}"
                ));
            }
            if served_model != model
                && content
                    .iter()
                    .any(|block| block.get("reasoningContent").is_some())
            {
                return Err(format!(
                    "a reasoning block of {served_model} was sent to {model}"
                ));
            }
        }
    }
    let _ = text;
    Ok(())
}

fn frame(kind: &str, name_header: &'static str, name: &str, payload: &Value) -> Vec<u8> {
    let message = Message::new(Bytes::from(payload.to_string()))
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String(kind.to_owned().into()),
        ))
        .add_header(Header::new(
            name_header,
            HeaderValue::String(name.to_owned().into()),
        ))
        .add_header(Header::new(
            ":content-type",
            HeaderValue::String("application/json".into()),
        ));
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut out).unwrap();
    out
}

fn event(name: &str, mut payload: Value) -> Vec<u8> {
    payload["p"] = json!("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ");
    frame("event", ":event-type", name, &payload)
}

/// A whole Converse reply as ConverseStream frames.
pub fn stream_frames(reply: &Value) -> Vec<u8> {
    let mut out = event("messageStart", json!({"role": "assistant"}));
    let content = reply["output"]["message"]["content"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (index, block) in content.iter().enumerate() {
        let delta = |delta: Value| {
            event(
                "contentBlockDelta",
                json!({"contentBlockIndex": index, "delta": delta}),
            )
        };
        if let Some(text) = block["text"].as_str() {
            let cut = text
                .char_indices()
                .nth(text.chars().count() / 2)
                .map_or(0, |(at, _)| at);
            out.extend(delta(json!({"text": &text[..cut]})));
            out.extend(delta(json!({"text": &text[cut..]})));
        } else if let Some(call) = block.get("toolUse") {
            out.extend(event(
                "contentBlockStart",
                json!({"contentBlockIndex": index, "start": {"toolUse": {"toolUseId": call["toolUseId"], "name": call["name"]}}}),
            ));
            let input = call["input"].to_string();
            let cut = input.len() / 2;
            out.extend(delta(json!({"toolUse": {"input": &input[..cut]}})));
            out.extend(delta(json!({"toolUse": {"input": &input[cut..]}})));
        } else if let Some(reasoning) = block.get("reasoningContent") {
            if let Some(text) = reasoning
                .pointer("/reasoningText/text")
                .and_then(Value::as_str)
            {
                let cut = text
                    .char_indices()
                    .nth(text.chars().count() / 2)
                    .map_or(0, |(at, _)| at);
                out.extend(delta(json!({"reasoningContent": {"text": &text[..cut]}})));
                out.extend(delta(json!({"reasoningContent": {"text": &text[cut..]}})));
                out.extend(delta(json!({"reasoningContent": {"signature": reasoning["reasoningText"]["signature"]}})));
            } else if let Some(redacted) = reasoning.get("redactedContent") {
                out.extend(delta(
                    json!({"reasoningContent": {"redactedContent": redacted}}),
                ));
            }
        }
        out.extend(event(
            "contentBlockStop",
            json!({"contentBlockIndex": index}),
        ));
    }
    out.extend(event(
        "messageStop",
        json!({"stopReason": reply["stopReason"]}),
    ));
    out.extend(event(
        "metadata",
        json!({"usage": reply["usage"], "metrics": {"latencyMs": 12}}),
    ));
    out
}
