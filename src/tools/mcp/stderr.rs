//! A stdio server's stderr: read line by line into `tracing` and a short ring buffer that
//! error messages quote.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

/// Longest stderr line kept (longer lines are cut, so a flood without newlines stays bounded).
const MAX_LINE_CHARS: usize = 1000;

/// The last lines a server wrote to stderr.
#[derive(Debug, Default)]
pub(crate) struct StderrTail {
    lines: Mutex<VecDeque<String>>,
    capacity: usize,
    /// Fires when the stream has ended (every line is in).
    ended: CancellationToken,
}

impl StderrTail {
    pub(crate) fn new(capacity: usize) -> Arc<Self> {
        Arc::new(StderrTail {
            lines: Mutex::new(VecDeque::with_capacity(capacity)),
            capacity,
            ended: CancellationToken::new(),
        })
    }

    fn push(&self, line: String) {
        let mut lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == self.capacity {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// Wait until the stream has ended, at most `limit` — so an error quotes the last lines
    /// a dying server wrote.
    pub(crate) async fn wait_for_end(&self, limit: std::time::Duration) {
        let _ = tokio::time::timeout(limit, self.ended.cancelled()).await;
    }

    /// The kept lines, oldest first.
    pub(crate) fn lines(&self) -> Vec<String> {
        let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        lines.iter().cloned().collect()
    }

    /// `"; last stderr lines:\n  a\n  b"`, or `""` when the server wrote nothing.
    pub(crate) fn quote(&self) -> String {
        let lines = self.lines();
        if lines.is_empty() {
            return String::new();
        }
        let mut text = String::from("; last stderr lines:");
        for line in lines {
            text.push_str("\n  ");
            text.push_str(&line);
        }
        text
    }
}

/// Read `stream` to its end, sending each line to `tracing` (target `agcore::mcp::stderr`) and
/// to `tail`. Never grows beyond one line of [`MAX_LINE_CHARS`].
pub(crate) async fn pump_stderr(
    server: Arc<str>,
    mut stream: impl AsyncRead + Unpin,
    tail: Arc<StderrTail>,
) {
    let mut buffer = vec![0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    loop {
        let read = match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        for &byte in &buffer[..read] {
            if byte == b'\n' {
                emit(&server, &tail, &line, cut);
                line.clear();
                cut = false;
            } else if line.len() < MAX_LINE_CHARS {
                line.push(byte);
            } else {
                cut = true;
            }
        }
    }
    if !line.is_empty() {
        emit(&server, &tail, &line, cut);
    }
    tail.ended.cancel();
}

fn emit(server: &str, tail: &StderrTail, line: &[u8], cut: bool) {
    let mut text = String::from_utf8_lossy(line)
        .trim_end_matches('\r')
        .to_owned();
    if cut {
        text.push_str(" …");
    }
    tracing::debug!(target: "agcore::mcp::stderr", server, "{text}");
    tail.push(text);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keeps_the_last_lines_and_cuts_long_ones() {
        let tail = StderrTail::new(2);
        let long = "y".repeat(5000);
        let input = format!("one\ntwo\r\nthree\n{long}");
        pump_stderr("s".into(), input.as_bytes(), tail.clone()).await;
        let lines = tail.lines();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], "three");
        assert!(lines[1].ends_with(" …") && lines[1].len() < 1100);
        assert!(tail.quote().starts_with("; last stderr lines:\n  three"));
    }
}
