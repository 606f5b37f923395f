//! The ACP transport: newline-delimited JSON-RPC on stdin/stdout, each line bounded.
//!
//! stdout belongs to the protocol alone: the process's fd 1 is duplicated for the protocol and
//! then pointed at stderr, so a stray print anywhere in the process (a library, a server's
//! progress line) lands on stderr and can never corrupt the stream the editor parses.

use std::io;

use agent_client_protocol::Lines;
use futures::{Sink, SinkExt, Stream};
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, FramedRead, FramedWrite, LinesCodec, LinesCodecError};

/// The longest line read from the editor (a prompt with an embedded image or file fits well
/// below it); a longer one is answered with a parse error and skipped.
pub const MAX_LINE_BYTES: usize = 32 * 1024 * 1024;

/// Not JSON: a line over [`MAX_LINE_BYTES`] is replaced by this, so the SDK answers it with a
/// parse error (-32700) and the agent keeps serving.
const TOO_LONG: &str = "(line longer than the limit)";

/// [`LinesCodec`] with a bound that never ends the stream: a line over [`MAX_LINE_BYTES`] is
/// read as [`TOO_LONG`] (the codec discards the rest of it), where the codec's error would end
/// `FramedRead` for good (tokio-util ends a framed stream at its decoder's first error).
struct BoundedLines(LinesCodec);

impl BoundedLines {
    fn new() -> Self {
        Self(LinesCodec::new_with_max_length(MAX_LINE_BYTES))
    }

    fn kept(result: Result<Option<String>, LinesCodecError>) -> io::Result<Option<String>> {
        match result {
            Ok(line) => Ok(line),
            Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(TOO_LONG.to_owned())),
            Err(LinesCodecError::Io(error)) => Err(error),
        }
    }
}

impl Decoder for BoundedLines {
    type Item = String;
    type Error = io::Error;

    fn decode(&mut self, buffer: &mut BytesMut) -> io::Result<Option<String>> {
        Self::kept(self.0.decode(buffer))
    }

    fn decode_eof(&mut self, buffer: &mut BytesMut) -> io::Result<Option<String>> {
        Self::kept(self.0.decode_eof(buffer))
    }
}

/// The protocol's line transport over this process's stdin and (the original) stdout.
pub fn stdio() -> anyhow::Result<
    Lines<
        impl Sink<String, Error = io::Error> + Send + 'static,
        impl Stream<Item = io::Result<String>> + Send + 'static,
    >,
> {
    let protocol_out = nix::unistd::dup(io::stdout())?;
    nix::unistd::dup2_stdout(io::stderr())?;
    let protocol_in = nix::unistd::dup(io::stdin())?;
    let output = tokio::fs::File::from_std(std::fs::File::from(protocol_out));
    let input = tokio::fs::File::from_std(std::fs::File::from(protocol_in));
    let lines = FramedRead::new(input, BoundedLines::new());
    let sink =
        SinkExt::<String>::sink_map_err(FramedWrite::new(output, LinesCodec::new()), |error| {
            match error {
                LinesCodecError::Io(error) => error,
                LinesCodecError::MaxLineLengthExceeded => io::Error::other("line too long"),
            }
        });
    Ok(Lines::new(sink, lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_over_the_bound_is_replaced_and_the_next_line_is_read() {
        let mut codec = BoundedLines(LinesCodec::new_with_max_length(4));
        let mut buffer = BytesMut::from(&b"toolongline\nok\n"[..]);
        assert_eq!(
            codec.decode(&mut buffer).unwrap().as_deref(),
            Some(TOO_LONG)
        );
        let mut next = None;
        while next.is_none() {
            next = codec.decode(&mut buffer).unwrap();
        }
        assert_eq!(next.as_deref(), Some("ok"));
    }
}
