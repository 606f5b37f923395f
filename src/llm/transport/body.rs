//! The byte side of a streaming body: its limits (event and body size, the idle timeout, the
//! response deadline), the rewrite of llama.cpp's non-SSE `error:` lines into SSE error
//! events, and the bounded read of a whole body.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use tokio::time::{Instant, Sleep};

use crate::llm::error::ResponseLimit;

/// Why the byte stream failed; carried through `sse-stream`'s boxed body error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// No progress of the reply for this long.
    #[error("no data for {0:?}")]
    Idle(Duration),
    /// The body went over a limit.
    #[error("{0}")]
    Limit(ResponseLimit),
    /// The connection failed.
    #[error("{0}")]
    Transport(String),
}

/// What a streaming body may do before it fails.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    /// The longest wait for progress of the reply (`None`: forever).
    pub(crate) idle: Option<Duration>,
    /// When the whole reply must be done, and the configured limit that gives this instant.
    pub(crate) deadline: Option<(Instant, Duration)>,
    /// The longest SSE event (or line), in bytes.
    pub(crate) max_event_bytes: usize,
    /// The longest body, in bytes.
    pub(crate) max_body_bytes: usize,
}

/// Set by the SSE decoder whenever an event moved the reply on (a delta came out of it); only
/// that resets the idle timer, so keep-alive comments and empty events do not.
#[derive(Debug, Clone, Default)]
pub(crate) struct Progress(Arc<AtomicBool>);

impl Progress {
    /// The reply moved on.
    pub(crate) fn note(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn take(&self) -> bool {
        self.0.swap(false, Ordering::Relaxed)
    }
}

/// A byte stream under [`BodyLimits`], with [`ErrorLines`] applied. The limits are checked on
/// every read (a server that sends without pause never lets the stream be pending); the timer
/// is armed only when the inner stream is pending.
pub(crate) struct BodyReader {
    inner: Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>,
    limits: BodyLimits,
    progress: Progress,
    /// When the idle limit fires unless the reply moves on.
    idle_at: Option<Instant>,
    sleep: Option<Pin<Box<Sleep>>>,
    body_bytes: usize,
    event: EventSize,
    failed: bool,
    lines: ErrorLines,
    /// Whether the body is text/event-stream: SSE event sizes are measured and llama.cpp's
    /// `error:` lines rewritten. A binary framing (AWS event-stream) measures its own frames.
    sse: bool,
}

impl BodyReader {
    /// Read `inner` under `limits`; `progress` is the decoder's signal that the reply moved on.
    pub(crate) fn new(
        inner: Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>,
        limits: BodyLimits,
        progress: Progress,
    ) -> Self {
        BodyReader {
            inner,
            idle_at: limits
                .idle
                .and_then(|idle| Instant::now().checked_add(idle)),
            limits,
            progress,
            sleep: None,
            body_bytes: 0,
            event: EventSize::default(),
            failed: false,
            lines: ErrorLines::default(),
            sse: true,
        }
    }

    /// [`BodyReader::new`] for a binary framing: bytes pass through untouched, and only the
    /// body size, idle timeout and deadline are checked here (the framer checks frame sizes).
    pub(crate) fn binary(
        inner: Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>,
        limits: BodyLimits,
        progress: Progress,
    ) -> Self {
        BodyReader {
            sse: false,
            ..BodyReader::new(inner, limits, progress)
        }
    }

    /// The limit that has run out by `now`, if any (the deadline first: it is the harder one).
    fn expired(&mut self, now: Instant) -> Option<BodyError> {
        if self.progress.take() {
            self.idle_at = self.limits.idle.and_then(|idle| now.checked_add(idle));
        }
        if let Some((at, limit)) = self.limits.deadline
            && now >= at
        {
            return Some(BodyError::Limit(ResponseLimit::Deadline(limit)));
        }
        match (self.idle_at, self.limits.idle) {
            (Some(at), Some(idle)) if now >= at => Some(BodyError::Idle(idle)),
            _ => None,
        }
    }

    /// Count one read against the size limits.
    fn count(&mut self, read: &[u8]) -> Option<BodyError> {
        self.body_bytes = self.body_bytes.saturating_add(read.len());
        if self.body_bytes > self.limits.max_body_bytes {
            return Some(BodyError::Limit(ResponseLimit::ResponseBytes(
                self.limits.max_body_bytes,
            )));
        }
        if self.sse && self.event.add(read) > self.limits.max_event_bytes {
            return Some(BodyError::Limit(ResponseLimit::EventBytes(
                self.limits.max_event_bytes,
            )));
        }
        None
    }

    fn fail(&mut self, error: BodyError) -> Poll<Option<Result<Bytes, BodyError>>> {
        self.failed = true;
        Poll::Ready(Some(Err(error)))
    }

    /// Arm the timer for the nearest limit and poll it; `true` when it fired.
    fn timer_fired(&mut self, cx: &mut Context<'_>) -> bool {
        let deadline = self.limits.deadline.map(|(at, _)| at);
        let Some(wake_at) = [self.idle_at, deadline].into_iter().flatten().min() else {
            return false;
        };
        match &mut self.sleep {
            Some(sleep) if sleep.deadline() == wake_at => {}
            Some(sleep) => sleep.as_mut().reset(wake_at),
            None => self.sleep = Some(Box::pin(tokio::time::sleep_until(wake_at))),
        }
        self.sleep
            .as_mut()
            .is_some_and(|sleep| sleep.as_mut().poll(cx).is_ready())
    }
}

impl Stream for BodyReader {
    type Item = Result<Bytes, BodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(None);
        }
        loop {
            if let Some(error) = this.expired(Instant::now()) {
                return this.fail(error);
            }
            match this.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(bytes))) => {
                    if let Some(error) = this.count(&bytes) {
                        return this.fail(error);
                    }
                    if !this.sse {
                        return Poll::Ready(Some(Ok(bytes)));
                    }
                    if let Some(bytes) = this.lines.rewrite(bytes) {
                        return Poll::Ready(Some(Ok(bytes)));
                    }
                }
                Poll::Ready(Some(Err(error))) => {
                    return this.fail(BodyError::Transport(error));
                }
                Poll::Ready(None) => return Poll::Ready(this.lines.flush().map(Ok)),
                Poll::Pending => {
                    if this.timer_fired(cx) {
                        // Loop: `expired` names the limit that ran out.
                        continue;
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

/// The size of the SSE event being read, across reads: an event ends at an empty line
/// (`\n`, `\r` or `\r\n` right after another line end).
#[derive(Debug, Default)]
struct EventSize {
    /// Bytes of the current event so far.
    bytes: usize,
    /// Whether the current line has bytes before its end.
    line_has_content: bool,
    /// Whether the last byte seen was a `\r` ending a line (a `\n` next belongs to it).
    after_cr: bool,
}

impl EventSize {
    /// Count `read`; the largest size an event reached in it.
    fn add(&mut self, read: &[u8]) -> usize {
        let mut largest = 0;
        let mut line_start = 0;
        let mut counted = 0;
        for end in memchr::memchr2_iter(b'\n', b'\r', read) {
            if end > line_start {
                self.line_has_content = true;
                self.after_cr = false;
            }
            line_start = end + 1;
            let byte = read[end];
            if byte == b'\n' && self.after_cr {
                self.after_cr = false;
                continue;
            }
            self.after_cr = byte == b'\r';
            if self.line_has_content {
                self.line_has_content = false;
            } else {
                let size = self.bytes.saturating_add(end + 1 - counted);
                largest = largest.max(size);
                self.bytes = 0;
                counted = end + 1;
            }
        }
        if read.len() > line_start {
            self.line_has_content = true;
            self.after_cr = false;
        }
        self.bytes = self.bytes.saturating_add(read.len() - counted);
        largest.max(self.bytes)
    }
}

/// A whole body, read up to `max` bytes: `Ok((bytes, true))` when there was more (the rest is
/// not read; dropping the response closes the connection).
pub(crate) async fn read_at_most(
    mut response: reqwest::Response,
    max: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    // Trust `Content-Length` for the allocation only as far as `max`.
    let announced = response.content_length().unwrap_or(0);
    let mut body = Vec::with_capacity(usize::try_from(announced).unwrap_or(max).min(max));
    while let Some(chunk) = response.chunk().await? {
        let room = max - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
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

    fn largest_event(text: &str, size: usize) -> usize {
        let mut event = EventSize::default();
        text.as_bytes()
            .chunks(size)
            .map(|piece| event.add(piece))
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn event_sizes_are_measured_in_any_split_and_line_ending() {
        for (text, largest) in [
            ("data: 1\n\ndata: 22\n\n", 10),
            ("data: 1\r\n\r\ndata: 22\r\n\r\n", 12),
            ("data: 1\r\rdata: 22\r\r", 10),
            (": ping\n\n: ping\n\n", 8),
            ("data: a\ndata: b\ndata: c\n\n", 25),
        ] {
            for size in 1..=text.len() {
                assert_eq!(
                    largest_event(text, size),
                    largest,
                    "{text:?} in pieces of {size}"
                );
            }
        }
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
