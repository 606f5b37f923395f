//! A skill file's bytes from a `resources/read` answer, checked against its manifest entry
//! (SEP-2640): the declared size first — a text's length before anything is hashed, a base64
//! blob decoded piece by piece and given up as soon as it passes the declared size — then the
//! SHA-256 digest. Content that fails is never returned.

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::tools::mcp::catalog::McpResourceContent;

/// Base64 characters decoded at a time (a multiple of 4): at most this much is decoded past a
/// declared size before reading stops.
const BLOB_PIECE: usize = 4 * 1024;

/// Why a file's bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileProblem {
    /// No content for the URI, or a blob that is not base64.
    Unreadable(String),
    /// Not the declared length; `None` when reading stopped past it.
    Size(Option<u64>),
    /// The SHA-256 of the bytes, which is not the declared digest.
    Digest(String),
}

/// The declared size and digest of one file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expected<'a> {
    pub(crate) uri: &'a str,
    pub(crate) size: u64,
    pub(crate) digest: &'a str,
}

/// The `sha256:` digest of `bytes`, as the extension writes it.
pub(crate) fn sha256_digest(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut digest = String::with_capacity(7 + 64);
    digest.push_str("sha256:");
    for byte in Sha256::digest(bytes) {
        let _ = write!(digest, "{byte:02x}");
    }
    digest
}

/// The verified bytes of the file `expected.uri` in `contents`.
pub(crate) fn verified_bytes(
    contents: &[McpResourceContent],
    expected: Expected<'_>,
) -> Result<Vec<u8>, FileProblem> {
    let content = contents
        .iter()
        .find(|content| content.uri == expected.uri)
        .ok_or_else(|| FileProblem::Unreadable("the answer holds no content for it".into()))?;
    let bytes = match (&content.text, &content.blob) {
        (Some(text), _) => {
            if text.len() as u64 != expected.size {
                return Err(FileProblem::Size(Some(text.len() as u64)));
            }
            text.as_bytes().to_vec()
        }
        (None, Some(blob)) => decode_bounded(blob, expected.size)?,
        (None, None) => {
            return Err(FileProblem::Unreadable(
                "the answer has neither text nor a blob".into(),
            ));
        }
    };
    let digest = sha256_digest(&bytes);
    if digest != expected.digest {
        return Err(FileProblem::Digest(digest));
    }
    Ok(bytes)
}

/// Decode `blob`, stopping as soon as it is longer than `size` bytes.
fn decode_bounded(blob: &str, size: u64) -> Result<Vec<u8>, FileProblem> {
    let blob = blob.as_bytes();
    // Three bytes per four characters: a blob that cannot fit is refused before decoding.
    let longest = (blob.len() as u64 / 4).saturating_mul(3);
    if longest.saturating_sub(2) > size {
        return Err(FileProblem::Size(None));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(blob.len()));
    for piece in blob.chunks(BLOB_PIECE) {
        base64::engine::general_purpose::STANDARD
            .decode_vec(piece, &mut bytes)
            .map_err(|error| FileProblem::Unreadable(format!("its blob is not base64: {error}")))?;
        if bytes.len() as u64 > size {
            return Err(FileProblem::Size(None));
        }
    }
    if bytes.len() as u64 != size {
        return Err(FileProblem::Size(Some(bytes.len() as u64)));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(uri: &str, text: &str) -> McpResourceContent {
        McpResourceContent {
            uri: uri.into(),
            mime_type: Some("text/markdown".into()),
            text: Some(text.into()),
            blob: None,
        }
    }

    fn blob(uri: &str, bytes: &[u8]) -> McpResourceContent {
        McpResourceContent {
            uri: uri.into(),
            mime_type: None,
            text: None,
            blob: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
        }
    }

    const URI: &str = "skill://a/SKILL.md";

    #[test]
    fn the_digest_is_the_extensions_form() {
        assert_eq!(
            sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn matching_text_and_blobs_verify() {
        let body = "---\nname: a\n---\n";
        let digest = sha256_digest(body.as_bytes());
        let expected = Expected {
            uri: URI,
            size: body.len() as u64,
            digest: &digest,
        };
        assert_eq!(
            verified_bytes(&[text(URI, body)], expected).unwrap(),
            body.as_bytes()
        );
        let big = vec![7u8; 3 * BLOB_PIECE + 5];
        let digest = sha256_digest(&big);
        let expected = Expected {
            uri: URI,
            size: big.len() as u64,
            digest: &digest,
        };
        assert_eq!(verified_bytes(&[blob(URI, &big)], expected).unwrap(), big);
    }

    #[test]
    fn size_is_checked_before_the_digest() {
        let digest = sha256_digest(b"abc");
        let expected = Expected {
            uri: URI,
            size: 2,
            digest: &digest,
        };
        assert_eq!(
            verified_bytes(&[text(URI, "abc")], expected),
            Err(FileProblem::Size(Some(3)))
        );
        let expected = Expected {
            size: 4,
            ..expected
        };
        assert_eq!(
            verified_bytes(&[blob(URI, b"abc")], expected),
            Err(FileProblem::Size(Some(3)))
        );
    }

    #[test]
    fn a_blob_longer_than_declared_is_not_decoded_to_its_end() {
        let big = vec![1u8; 10 * BLOB_PIECE];
        let digest = sha256_digest(&big);
        let expected = Expected {
            uri: URI,
            size: 10,
            digest: &digest,
        };
        assert_eq!(
            verified_bytes(&[blob(URI, &big)], expected),
            Err(FileProblem::Size(None))
        );
    }

    #[test]
    fn a_wrong_digest_or_missing_content_is_refused() {
        let digest = sha256_digest(b"abd");
        let expected = Expected {
            uri: URI,
            size: 3,
            digest: &digest,
        };
        assert_eq!(
            verified_bytes(&[text(URI, "abc")], expected),
            Err(FileProblem::Digest(sha256_digest(b"abc")))
        );
        assert!(matches!(
            verified_bytes(&[text("skill://b/SKILL.md", "abd")], expected),
            Err(FileProblem::Unreadable(_))
        ));
        let mut bad = blob(URI, b"abd");
        bad.blob = Some("!!!!".into());
        assert!(matches!(
            verified_bytes(&[bad], expected),
            Err(FileProblem::Unreadable(_))
        ));
    }
}
