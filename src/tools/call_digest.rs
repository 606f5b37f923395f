//! [`CallDigest`]: what an approval is bound to — the tool and the arguments the approver
//! was shown — so that a decision given for a deferred call never runs a different call
//! (a run state edited while it waited, a request changed after it was shown).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// SHA-256 of a call's tool name and arguments (canonical JSON: object keys sorted, no
/// whitespace), in hex. Equal for the same call however its arguments were spelled.
///
/// ```
/// use agcore::tools::CallDigest;
/// use serde_json::json;
///
/// let shown = CallDigest::of("write_file", &json!({"path": "a.txt", "content": "x"}));
/// let same = CallDigest::of("write_file", &json!({"content": "x", "path": "a.txt"}));
/// let other = CallDigest::of("write_file", &json!({"path": "b.txt", "content": "x"}));
/// assert_eq!(shown, same);
/// assert_ne!(shown, other);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CallDigest(String);

impl CallDigest {
    /// The digest of a call of `tool` with `arguments`.
    pub fn of(tool: &str, arguments: &Value) -> Self {
        let mut text = String::new();
        canonical(arguments, &mut text);
        let mut hasher = Sha256::new();
        hasher.update(tool.as_bytes());
        // The tool name cannot contain a NUL: the two parts cannot run into each other.
        hasher.update([0u8]);
        hasher.update(text.as_bytes());
        let hash = hasher.finalize();
        CallDigest(hash.iter().map(|byte| format!("{byte:02x}")).collect())
    }

    /// The digest in hex.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CallDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `value` as JSON with object keys sorted, whatever order the map keeps.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(item) = map.get(key) {
                    canonical(item, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}
