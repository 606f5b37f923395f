//! Newline-delimited JSON-RPC from a stdio server, each line bounded by
//! [`MAX_MESSAGE_BYTES`](crate::tools::mcp::MAX_MESSAGE_BYTES).
//!
//! rmcp's own line transport drops an oversized line and logs it, so the request it answered
//! waits for its timeout and is reported as "did not answer". This reader instead finds the
//! line's top-level `id` (streaming, in constant memory, wherever the server put it) so the
//! caller can fail that request at once, saying why.

use rmcp::model::RequestId;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One read of [`LineReader::next`].
#[derive(Debug)]
pub(crate) enum Read {
    /// A whole line (without its `\n`).
    Line(Vec<u8>),
    /// A line over the limit: the `id` it answers (when found) and its length so far; the
    /// reader goes on discarding it.
    Oversized {
        /// The line's top-level `id`.
        id: Option<RequestId>,
        /// Its length so far (at least the limit + 1).
        bytes: usize,
        /// Whether `bytes` is the whole line (its end was read).
        whole: bool,
    },
    /// The stream ended.
    Eof,
    /// The stream failed.
    Io(std::io::Error),
}

/// A cancel-safe bounded line reader: all state lives here, not in the future, because rmcp
/// polls `receive` inside a `select!`.
pub(crate) struct LineReader<R> {
    read: R,
    max: usize,
    line: Vec<u8>,
    /// Set while an oversized line is being discarded.
    discarding: Option<Discard>,
}

struct Discard {
    scanner: IdScanner,
    bytes: usize,
    reported: bool,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub(crate) fn new(read: R, max: usize) -> Self {
        LineReader {
            read,
            max,
            line: Vec::new(),
            discarding: None,
        }
    }

    /// The next line, or news of an oversized one (reported once: as soon as its `id` is
    /// known, else at its end).
    pub(crate) async fn next(&mut self) -> Read {
        loop {
            let chunk = match self.read.fill_buf().await {
                Ok(chunk) => chunk,
                Err(error) => return Read::Io(error),
            };
            if chunk.is_empty() {
                return Read::Eof;
            }
            let newline = memchr::memchr(b'\n', chunk);
            let take = newline.map_or(chunk.len(), |at| at + 1);
            let part = &chunk[..newline.unwrap_or(chunk.len())];
            let mut report = None;
            let mut done = None;
            match &mut self.discarding {
                Some(discard) => {
                    discard.scanner.feed(part);
                    discard.bytes += part.len();
                    if !discard.reported && (newline.is_some() || discard.scanner.id.is_some()) {
                        discard.reported = true;
                        report =
                            Some((discard.scanner.id.clone(), discard.bytes, newline.is_some()));
                    }
                    if newline.is_some() {
                        self.discarding = None;
                    }
                }
                None if self.line.len() + part.len() > self.max => {
                    let mut scanner = IdScanner::default();
                    scanner.feed(&self.line);
                    scanner.feed(part);
                    let bytes = self.line.len() + part.len();
                    // Give the memory back: the line is lost anyway.
                    self.line = Vec::new();
                    let reported = newline.is_some() || scanner.id.is_some();
                    if reported {
                        report = Some((scanner.id.clone(), bytes, newline.is_some()));
                    }
                    if newline.is_none() {
                        self.discarding = Some(Discard {
                            scanner,
                            bytes,
                            reported,
                        });
                    }
                }
                None => {
                    self.line.extend_from_slice(part);
                    if newline.is_some() {
                        done = Some(std::mem::take(&mut self.line));
                    }
                }
            }
            self.read.consume(take);
            if let Some((id, bytes, whole)) = report {
                return Read::Oversized { id, bytes, whole };
            }
            if let Some(line) = done {
                return Read::Line(line);
            }
        }
    }
}

/// Finds the top-level `"id"` of a JSON object fed in pieces, in constant memory.
#[derive(Debug, Default)]
struct IdScanner {
    depth: u32,
    in_string: bool,
    escape: bool,
    /// At depth 1, between `{`/`,` and `:`: the next string is a key.
    expect_key: bool,
    /// The current depth-1 key (only the first bytes; `id` is short).
    key: Vec<u8>,
    reading_key: bool,
    /// Collecting the value of the `id` key.
    capturing: bool,
    value: Vec<u8>,
    id: Option<RequestId>,
}

/// Longer keys or id values are not the `id` agcore sent.
const SCAN_CAP: usize = 64;

impl IdScanner {
    fn feed(&mut self, bytes: &[u8]) {
        if self.id.is_some() {
            return;
        }
        for &byte in bytes {
            self.step(byte);
            if self.id.is_some() {
                return;
            }
        }
    }

    fn step(&mut self, byte: u8) {
        if self.in_string {
            let closing = !self.escape && byte == b'"';
            self.escape = !self.escape && byte == b'\\';
            if closing {
                self.in_string = false;
                self.reading_key = false;
            }
            if self.reading_key {
                push(&mut self.key, byte);
            } else if self.capturing && self.depth == 1 {
                push(&mut self.value, byte);
            }
            return;
        }
        match byte {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.reading_key = true;
                    self.key.clear();
                } else if self.capturing && self.depth == 1 {
                    push(&mut self.value, byte);
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_key = byte == b'{';
                } else if self.capturing {
                    // An object or array is no request id.
                    self.capturing = false;
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.finish();
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 => {
                self.expect_key = false;
                if self.key == b"id" {
                    self.capturing = true;
                    self.value.clear();
                }
            }
            b',' if self.depth == 1 => {
                self.finish();
                self.expect_key = true;
            }
            _ if self.capturing && self.depth == 1 => push(&mut self.value, byte),
            _ => {}
        }
    }

    fn finish(&mut self) {
        if self.capturing {
            self.capturing = false;
            self.id = serde_json::from_slice::<RequestId>(&self.value).ok();
        }
    }
}

fn push(buf: &mut Vec<u8>, byte: u8) {
    if buf.len() < SCAN_CAP {
        buf.push(byte);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(text: &str) -> Option<RequestId> {
        let mut scanner = IdScanner::default();
        for piece in text.as_bytes().chunks(3) {
            scanner.feed(piece);
        }
        scanner.id
    }

    #[test]
    fn finds_the_top_level_id_wherever_it_is() {
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#),
            Some(RequestId::Number(7))
        );
        assert_eq!(
            id_of(r#"{"result":{"id":1,"x":"\"id\":2"},"jsonrpc":"2.0","id": "a\"b" }"#),
            Some(RequestId::String("a\"b".into()))
        );
        assert_eq!(id_of(r#"{"result":{"id":1}}"#), None);
        assert_eq!(id_of(r#"{"id":{"x":1}}"#), None);
    }

    #[tokio::test]
    async fn an_oversized_line_is_reported_once_with_its_id_and_the_next_line_survives() {
        let text = format!(
            "{{\"result\":\"{}\",\"id\":3}}\n{{\"id\":4,\"result\":\"{}\"}}\n{{\"id\":5}}\n",
            "x".repeat(100),
            "y".repeat(100)
        );
        let mut reader = LineReader::new(std::io::Cursor::new(text.into_bytes()), 50);
        assert!(matches!(
            reader.next().await,
            Read::Oversized { id: Some(RequestId::Number(3)), bytes, whole: true } if bytes > 100
        ));
        assert!(matches!(
            reader.next().await,
            Read::Oversized {
                id: Some(RequestId::Number(4)),
                ..
            }
        ));
        assert!(matches!(reader.next().await, Read::Line(line) if line == b"{\"id\":5}"));
        assert!(matches!(reader.next().await, Read::Eof));
    }
}
