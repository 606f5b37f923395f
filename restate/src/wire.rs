//! The handlers' JSON shapes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use agcore::vocab::OpenaiChatMessage;

/// The `approve` handler's input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveInput {
    /// The call id.
    pub id: String,
    /// Allow (run the call) or deny it.
    pub allow: bool,
    /// With a denial, told to the model in the call's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The `approve` handler's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApproveOutput {
    /// The call id.
    pub id: String,
    /// The decision.
    pub allow: bool,
    /// Always `true`: the waiting run was given the decision.
    pub resolved: bool,
}

/// A call waiting for approval, as the `state` handler shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The call id (what `approve` takes).
    pub id: String,
    /// The tool.
    pub tool: String,
    /// The call's arguments (JSON; the raw text as a string when it is not JSON).
    pub arguments: Value,
}

/// The `state` handler's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    /// The session (the object's key).
    pub session: String,
    /// The committed history, as `agcore sessions show --json` prints it.
    pub messages: Vec<OpenaiChatMessage>,
    /// Calls waiting for approval.
    pub pending: Vec<PendingCall>,
}

/// A pending call as kept in the object's state: with its awakeable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredPending {
    pub call: PendingCall,
    /// The awakeable the run waits on.
    pub awakeable: String,
    /// The secret `approve` proves its decision with (`approval_proof`); empty in an entry
    /// kept by an endpoint from before proofs.
    #[serde(default)]
    pub nonce: String,
    /// The digest of the call as shown ([`agcore::tools::CallDigest`]).
    #[serde(default)]
    pub digest: String,
}

/// What `approve` resolves an awakeable with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WireDecision {
    pub allow: bool,
    #[serde(default)]
    pub message: Option<String>,
    /// `approve`'s proof that the decision came through it (`approval_proof`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<String>,
}
