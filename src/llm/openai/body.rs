//! The byte side of a streaming body: an idle timeout between reads, and the rewrite of
//! llama.cpp's non-SSE `error:` lines into SSE error events.

use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use tokio::time::{Instant, Sleep};

/// Why the byte stream failed; carried through `sse-stream`'s boxed body error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// No bytes for this long.
    #[error("no data for {0:?}")]
    Idle(Duration),
    /// The connection failed.
    #[error("{0}")]
    Transport(String),
}

/// A byte stream that fails when no bytes arrive for `limit`, with [`ErrorLines`] applied.
/// The timer is armed only when the inner stream is pending, so a fast stream costs no timer work.
pub(crate) struct BodyReader {
    inner: Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>,
    limit: Option<Duration>,
    sleep: Option<Pin<Box<Sleep>>>,
    armed: bool,
    lines: ErrorLines,
}

impl BodyReader {
    /// Read `inner`, failing after `limit` without bytes (`None`: wait forever).
    pub(crate) fn new(
        inner: Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>,
        limit: Option<Duration>,
    ) -> Self {
        BodyReader {
            inner,
            limit,
            sleep: None,
            armed: false,
            lines: ErrorLines::default(),
        }
    }
}

impl Stream for BodyReader {
    type Item = Result<Bytes, BodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            match this.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(bytes))) => {
                    this.armed = false;
                    if let Some(bytes) = this.lines.rewrite(bytes) {
                        return Poll::Ready(Some(Ok(bytes)));
                    }
                }
                Poll::Ready(Some(Err(error))) => {
                    return Poll::Ready(Some(Err(BodyError::Transport(error))));
                }
                Poll::Ready(None) => return Poll::Ready(this.lines.flush().map(Ok)),
                Poll::Pending => return this.poll_idle(cx),
            }
        }
    }
}

impl BodyReader {
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BodyError>>> {
        let Some(limit) = self.limit else {
            return Poll::Pending;
        };
        if !self.armed {
            self.armed = true;
            let deadline = Instant::now() + limit;
            match &mut self.sleep {
                Some(sleep) => sleep.as_mut().reset(deadline),
                None => self.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
        }
        let fired = self
            .sleep
            .as_mut()
            .is_some_and(|sleep| sleep.as_mut().poll(cx).is_ready());
        if fired {
            self.limit = None;
            return Poll::Ready(Some(Err(BodyError::Idle(limit))));
        }
        Poll::Pending
    }
}

/// llama.cpp's server reports a failure mid-stream as a line `error: {...}`, which is not an
/// SSE field (parsers reject or skip it, losing the message). This rewrites such lines to
/// `event: error` + `data: {...}`, wherever the reads split them. Reads without such a line
/// pass through uncopied.
#[derive(Debug)]
struct ErrorLines {
    /// Whether the next byte starts a line.
    at_line_start: bool,
    /// The start of a line that may become `error:` once more bytes arrive.
    held: Vec<u8>,
}

impl Default for ErrorLines {
    fn default() -> Self {
        ErrorLines {
            at_line_start: true,
            held: Vec::new(),
        }
    }
}

const ERROR_FIELD: &[u8] = b"error:";
const ERROR_EVENT: &[u8] = b"event: error\ndata:";

impl ErrorLines {
    /// The bytes to pass on for this read (`None` when all of it is held back).
    fn rewrite(&mut self, read: Bytes) -> Option<Bytes> {
        let joined;
        let input: &[u8] = if self.held.is_empty() {
            &read
        } else {
            let mut bytes = std::mem::take(&mut self.held);
            bytes.extend_from_slice(&read);
            joined = bytes;
            &joined
        };
        let first = self.at_line_start.then_some(0);
        let starts = first
            .into_iter()
            .chain(memchr::memchr2_iter(b'\n', b'\r', input).map(|end| end + 1));
        let mut out: Option<Vec<u8>> = None;
        let mut copied = 0;
        let mut end = input.len();
        for start in starts {
            let rest = &input[start..];
            if rest.starts_with(ERROR_FIELD) {
                let out = out.get_or_insert_with(|| Vec::with_capacity(input.len() + 16));
                out.extend_from_slice(&input[copied..start]);
                out.extend_from_slice(ERROR_EVENT);
                copied = start + ERROR_FIELD.len();
            } else if !rest.is_empty() && ERROR_FIELD.starts_with(rest) {
                // The read ends inside what may be `error:`; wait for the next one.
                end = start;
                break;
            }
        }
        self.held.extend_from_slice(&input[end..]);
        if end > 0 {
            self.at_line_start = matches!(input[end - 1], b'\n' | b'\r');
        }
        match out {
            Some(mut out) => {
                out.extend_from_slice(&input[copied..end]);
                Some(Bytes::from(out))
            }
            None if end == 0 => None,
            None if input.len() == read.len() && end == read.len() => Some(read),
            None => Some(Bytes::copy_from_slice(&input[..end])),
        }
    }

    /// Bytes still held back when the body ends.
    fn flush(&mut self) -> Option<Bytes> {
        (!self.held.is_empty()).then(|| Bytes::from(std::mem::take(&mut self.held)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite_in_pieces(text: &str, size: usize) -> String {
        let mut lines = ErrorLines::default();
        let mut out = Vec::new();
        for piece in text.as_bytes().chunks(size) {
            if let Some(bytes) = lines.rewrite(Bytes::copy_from_slice(piece)) {
                out.extend_from_slice(&bytes);
            }
        }
        if let Some(bytes) = lines.flush() {
            out.extend_from_slice(&bytes);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn error_lines_become_error_events_in_any_split() {
        let input =
            "data: {\"a\":\"error: not a line start\"}\n\nerror: {\"message\":\"boom\"}\r\n\r\n";
        let expected = "data: {\"a\":\"error: not a line start\"}\n\nevent: error\ndata: {\"message\":\"boom\"}\r\n\r\n";
        for size in 1..input.len() + 1 {
            assert_eq!(rewrite_in_pieces(input, size), expected, "pieces of {size}");
        }
    }

    #[test]
    fn ordinary_reads_pass_through_uncopied_and_a_held_tail_is_flushed() {
        let mut lines = ErrorLines::default();
        let read = Bytes::from_static(b"data: {}\n\n");
        let out = lines.rewrite(read.clone()).unwrap();
        assert_eq!(out.as_ptr(), read.as_ptr());
        assert_eq!(lines.rewrite(Bytes::from_static(b"err")), None);
        assert_eq!(lines.flush(), Some(Bytes::from_static(b"err")));
    }
}
