//! AWS event-stream framing (`application/vnd.amazon.eventstream`, Bedrock's ConverseStream):
//! binary frames, each a prelude (total and header lengths, CRC), typed headers, a payload and
//! a message CRC. AWS's own decoder (`aws-smithy-eventstream`) reads each frame and checks both
//! CRCs; this cuts the body into frames under the transport's limits (a frame longer than
//! `max_event_bytes` fails before it is buffered) and hands the decoder a name and the payload:
//!
//! - `:message-type` `event`: the `:event-type` (`contentBlockDelta`, ...) and the JSON payload;
//! - `exception`: the `:exception-type` (`throttlingException`, ...) and its JSON payload;
//! - `error`: the name `error` and `{"code", "message"}` from `:error-code` / `:error-message`.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use aws_smithy_types::event_stream::{HeaderValue, Message};
use bytes::{Bytes, BytesMut};
use futures::{Stream, TryStreamExt};

use crate::llm::error::{ProviderError, TimeoutKind};
use crate::llm::model::{ModelDelta, ModelStream};
use crate::llm::transport::body::{BodyError, BodyLimits, BodyReader, Progress};
use crate::llm::transport::{Framer, SseDecoder, StreamBody};

/// The event-stream framing of AWS services (see the module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct AwsEventStreamFraming;

impl Framer for AwsEventStreamFraming {
    const ACCEPT: &'static str = "application/vnd.amazon.eventstream";

    fn frame<D: SseDecoder>(&self, body: StreamBody, decoder: D) -> ModelStream {
        decode_frames(body.bytes, body.limits, decoder)
    }
}

/// Decode an event-stream body with `decoder` under `limits`.
pub(crate) fn decode_frames<S, E, D>(bytes: S, limits: BodyLimits, decoder: D) -> ModelStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
    D: SseDecoder,
{
    let progress = Progress::default();
    let bytes = BodyReader::binary(
        Box::pin(bytes.map_err(|error| crate::llm::transport::error_chain(&error))),
        limits,
        progress.clone(),
    );
    Box::pin(FrameStream {
        bytes,
        buffer: BytesMut::new(),
        max_frame: limits.max_event_bytes,
        decoder,
        pending: VecDeque::new(),
        progress,
        done: false,
    })
}

/// The shortest frame: the 12-byte prelude and the 4-byte message CRC.
const MIN_FRAME: usize = 16;

struct FrameStream<D> {
    bytes: BodyReader,
    buffer: BytesMut,
    max_frame: usize,
    decoder: D,
    pending: VecDeque<ModelDelta>,
    progress: Progress,
    done: bool,
}

impl<D: SseDecoder> FrameStream<D> {
    /// Decode every whole frame in the buffer; `Ok(true)` when the decoder ended the stream.
    fn drain(&mut self) -> Result<bool, ProviderError> {
        while self.buffer.len() >= 4 {
            let total = usize::try_from(u32::from_be_bytes([
                self.buffer[0],
                self.buffer[1],
                self.buffer[2],
                self.buffer[3],
            ]))
            .unwrap_or(usize::MAX);
            if total > self.max_frame {
                return Err(ProviderError::ResponseLimitExceeded {
                    limit: crate::llm::error::ResponseLimit::EventBytes(self.max_frame),
                });
            }
            if total < MIN_FRAME {
                return Err(ProviderError::Stream(format!(
                    "malformed event stream: a frame of {total} bytes"
                )));
            }
            if self.buffer.len() < total {
                return Ok(false);
            }
            let frame = self.buffer.split_to(total).freeze();
            let message =
                aws_smithy_eventstream::frame::read_message_from(frame).map_err(|error| {
                    ProviderError::Stream(format!("malformed event stream: {error}"))
                })?;
            if self.message(&message)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Hand one frame to the decoder.
    fn message(&mut self, message: &Message) -> Result<bool, ProviderError> {
        let header = |name: &str| {
            message
                .headers()
                .iter()
                .find(|header| header.name().as_str() == name)
                .and_then(|header| match header.value() {
                    HeaderValue::String(text) => Some(text.as_str().to_owned()),
                    _ => None,
                })
        };
        let payload = std::str::from_utf8(message.payload())
            .map_err(|_| ProviderError::Stream("an event-stream payload is not UTF-8".into()))?;
        let done = match header(":message-type").as_deref() {
            Some("exception") => {
                let name = header(":exception-type").unwrap_or_else(|| "exception".to_owned());
                self.decoder
                    .event(Some(&name), payload, &mut self.pending)?
            }
            Some("error") => {
                let error = serde_json::json!({
                    "code": header(":error-code"),
                    "message": header(":error-message"),
                });
                self.decoder
                    .event(Some("error"), &error.to_string(), &mut self.pending)?
            }
            _ => {
                let name = header(":event-type");
                self.decoder
                    .event(name.as_deref(), payload.trim(), &mut self.pending)?
            }
        };
        if !self.pending.is_empty() {
            self.progress.note();
        }
        Ok(done)
    }
}

fn body_error(error: BodyError) -> ProviderError {
    match error {
        BodyError::Idle(limit) => ProviderError::Timeout {
            what: TimeoutKind::StreamIdle,
            limit,
            retries: 0,
        },
        BodyError::Limit(limit) => ProviderError::ResponseLimitExceeded { limit },
        BodyError::Transport(message) => {
            ProviderError::Stream(format!("the connection failed mid-stream: {message}"))
        }
    }
}

impl<D: SseDecoder> Stream for FrameStream<D> {
    type Item = Result<ModelDelta, ProviderError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(delta) = this.pending.pop_front() {
                return Poll::Ready(Some(Ok(delta)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            let error = match Pin::new(&mut this.bytes).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(bytes))) => {
                    this.buffer.extend_from_slice(&bytes);
                    match this.drain() {
                        Ok(done) => {
                            this.done = done;
                            continue;
                        }
                        Err(error) => error,
                    }
                }
                Poll::Ready(Some(Err(error))) => body_error(error),
                Poll::Ready(None) if !this.buffer.is_empty() => {
                    ProviderError::Stream("the event stream ended inside a frame".to_owned())
                }
                Poll::Ready(None) if this.decoder.finished() => {
                    this.done = true;
                    continue;
                }
                Poll::Ready(None) => ProviderError::Stream(
                    "the stream ended before the reply was complete".to_owned(),
                ),
            };
            this.done = true;
            return Poll::Ready(Some(Err(error)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_types::event_stream::Header;
    use futures::StreamExt;

    /// Passes each message on as text: `name|payload`.
    #[derive(Default)]
    struct Echo {
        seen: usize,
    }

    impl SseDecoder for Echo {
        fn event(
            &mut self,
            event: Option<&str>,
            data: &str,
            out: &mut VecDeque<ModelDelta>,
        ) -> Result<bool, ProviderError> {
            self.seen += 1;
            out.push_back(ModelDelta::Text(format!("{}|{data}", event.unwrap_or("-"))));
            Ok(false)
        }

        fn finished(&self) -> bool {
            self.seen > 0
        }
    }

    fn frame(kind: &str, name_header: &'static str, name: &str, payload: &str) -> Vec<u8> {
        let message = Message::new(Bytes::copy_from_slice(payload.as_bytes()))
            .add_header(Header::new(
                ":message-type",
                HeaderValue::String(kind.to_owned().into()),
            ))
            .add_header(Header::new(
                name_header,
                HeaderValue::String(name.to_owned().into()),
            ));
        let mut out = Vec::new();
        aws_smithy_eventstream::frame::write_message_to(&message, &mut out).unwrap();
        out
    }

    fn body(bytes: Vec<u8>, piece: usize, max_event_bytes: usize) -> StreamBody {
        let pieces: Vec<Result<Bytes, reqwest::Error>> = bytes
            .chunks(piece)
            .map(|chunk| Ok(Bytes::copy_from_slice(chunk)))
            .collect();
        StreamBody {
            bytes: Box::pin(futures::stream::iter(pieces)),
            limits: BodyLimits {
                idle: None,
                deadline: None,
                max_event_bytes,
                max_body_bytes: 1 << 20,
            },
        }
    }

    async fn collect(body: StreamBody) -> Vec<Result<ModelDelta, ProviderError>> {
        AwsEventStreamFraming
            .frame(body, Echo::default())
            .collect()
            .await
    }

    #[tokio::test]
    async fn frames_are_cut_in_any_split() {
        let mut bytes = frame(
            "event",
            ":event-type",
            "messageStart",
            r#"{"role":"assistant"}"#,
        );
        bytes.extend(frame(
            "exception",
            ":exception-type",
            "throttlingException",
            r#"{"message":"slow"}"#,
        ));
        for piece in [1, 3, 16, 1000] {
            let out = collect(body(bytes.clone(), piece, 1024)).await;
            let texts: Vec<_> = out
                .into_iter()
                .map(|delta| match delta.unwrap() {
                    ModelDelta::Text(text) => text,
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(
                texts,
                [
                    r#"messageStart|{"role":"assistant"}"#,
                    r#"throttlingException|{"message":"slow"}"#
                ],
                "pieces of {piece}"
            );
        }
    }

    #[tokio::test]
    async fn a_bad_crc_a_long_frame_and_a_cut_frame_fail() {
        let mut bytes = frame("event", ":event-type", "messageStart", "{}");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let out = collect(body(bytes, 7, 1024)).await;
        assert!(
            matches!(&out[0], Err(ProviderError::Stream(m)) if m.contains("malformed")),
            "{out:?}"
        );

        let bytes = frame("event", ":event-type", "messageStart", &"x".repeat(200));
        let out = collect(body(bytes.clone(), 7, 100)).await;
        assert!(
            matches!(&out[0], Err(ProviderError::ResponseLimitExceeded { .. })),
            "{out:?}"
        );

        let out = collect(body(bytes[..bytes.len() - 3].to_vec(), 7, 1024)).await;
        assert!(
            matches!(&out[0], Err(ProviderError::Stream(m)) if m.contains("inside a frame")),
            "{out:?}"
        );
    }
}
