//! A request body with bounded service-protocol messages: Restate frames its messages with an
//! 8-byte header whose low 32 bits are the payload length, and the SDK's decoder buffers a
//! whole payload before it looks at it — a header declaring 4 GiB would have it buffer
//! whatever arrives. [`BoundedMessages`] reads the headers as they pass and ends the body with
//! an error at the first header above the limit, before its payload is read; a body longer
//! than the request limit ends the same way.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// The largest message the endpoint reads: Restate's own default `message-size-limit` (its
/// invoker never sends a larger one unless the operator raised it).
pub const MAX_MESSAGE: u32 = 32 * 1024 * 1024;

/// The most one invocation's request body carries in total (a replayed journal included).
pub const MAX_REQUEST: u64 = 1024 * 1024 * 1024;

/// Why a request body was cut.
#[derive(Debug, thiserror::Error)]
pub enum MessageLimitError {
    /// A message header declared a payload above the limit.
    #[error(
        "a service-protocol message of {length} bytes is above the endpoint's limit of {limit} bytes"
    )]
    MessageTooLarge {
        /// The declared payload length.
        length: u32,
        /// The limit.
        limit: u32,
    },
    /// The body went on past the request limit.
    #[error("the request body is above the endpoint's limit of {limit} bytes")]
    RequestTooLarge {
        /// The limit.
        limit: u64,
    },
    /// The body underneath failed.
    #[error("reading the request body failed: {0}")]
    Body(Box<dyn std::error::Error + Send + Sync>),
}

/// Where the reader is in the framing.
#[derive(Debug, Clone, Copy)]
enum Position {
    /// This many header bytes seen (0..8), accumulated big-endian.
    Header { seen: u8, value: u64 },
    /// This many payload bytes still to pass.
    Payload { left: u64 },
}

pin_project_lite::pin_project! {
    /// `inner` with every message at most `max_message` bytes and the whole body at most
    /// `max_request`.
    pub struct BoundedMessages<B> {
        #[pin]
        inner: B,
        position: Position,
        total: u64,
        max_message: u32,
        max_request: u64,
        failed: bool,
    }
}

impl<B> BoundedMessages<B> {
    /// `inner` bounded by [`MAX_MESSAGE`] and [`MAX_REQUEST`].
    pub fn new(inner: B) -> Self {
        Self::with_limits(inner, MAX_MESSAGE, MAX_REQUEST)
    }

    /// `inner` bounded by the given limits.
    pub fn with_limits(inner: B, max_message: u32, max_request: u64) -> Self {
        BoundedMessages {
            inner,
            position: Position::Header { seen: 0, value: 0 },
            total: 0,
            max_message,
            max_request,
            failed: false,
        }
    }
}

/// Advance `position` over `data`; the first message above `max_message` is an error.
fn scan(
    position: &mut Position,
    mut data: &[u8],
    max_message: u32,
) -> Result<(), MessageLimitError> {
    while !data.is_empty() {
        match position {
            Position::Header { seen, value } => {
                let take = (8 - usize::from(*seen)).min(data.len());
                for &byte in &data[..take] {
                    *value = (*value << 8) | u64::from(byte);
                }
                *seen += take as u8;
                data = &data[take..];
                if *seen == 8 {
                    // The low 32 bits are the payload length (restate-sdk-shared-core's
                    // `MessageHeader`).
                    let length = *value as u32;
                    if length > max_message {
                        return Err(MessageLimitError::MessageTooLarge {
                            length,
                            limit: max_message,
                        });
                    }
                    *position = if length == 0 {
                        Position::Header { seen: 0, value: 0 }
                    } else {
                        Position::Payload {
                            left: u64::from(length),
                        }
                    };
                }
            }
            Position::Payload { left } => {
                let take = (*left).min(data.len() as u64);
                *left -= take;
                data = &data[take as usize..];
                if *left == 0 {
                    *position = Position::Header { seen: 0, value: 0 };
                }
            }
        }
    }
    Ok(())
}

impl<B> Body for BoundedMessages<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = MessageLimitError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, MessageLimitError>>> {
        let this = self.project();
        if *this.failed {
            return Poll::Ready(None);
        }
        let frame = match this.inner.poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Ready(Some(Err(error))) => {
                *this.failed = true;
                return Poll::Ready(Some(Err(MessageLimitError::Body(error.into()))));
            }
            Poll::Ready(Some(Ok(frame))) => frame,
        };
        if let Some(data) = frame.data_ref() {
            *this.total = this.total.saturating_add(data.len() as u64);
            let checked = if *this.total > *this.max_request {
                Err(MessageLimitError::RequestTooLarge {
                    limit: *this.max_request,
                })
            } else {
                scan(this.position, data, *this.max_message)
            };
            if let Err(error) = checked {
                *this.failed = true;
                return Poll::Ready(Some(Err(error)));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    fn header(ty: u16, length: u32) -> [u8; 8] {
        ((u64::from(ty) << 48) | u64::from(length)).to_be_bytes()
    }

    /// `chunks` through a body bounded at 16-byte messages and 64 bytes in all.
    async fn read(chunks: Vec<Vec<u8>>) -> Result<usize, MessageLimitError> {
        let stream = futures::stream::iter(
            chunks
                .into_iter()
                .map(|chunk| Ok::<_, std::io::Error>(Frame::data(Bytes::from(chunk)))),
        );
        let mut body = BoundedMessages::with_limits(StreamBody::new(stream), 16, 64);
        let mut read = 0;
        while let Some(frame) = body.frame().await {
            read += frame?.into_data().map(|data| data.len()).unwrap_or(0);
        }
        Ok(read)
    }

    #[tokio::test]
    async fn messages_within_the_limit_pass_whatever_the_chunking() {
        let mut bytes = header(0, 16).to_vec();
        bytes.extend([7; 16]);
        bytes.extend(header(1, 0));
        bytes.extend(header(2, 3));
        bytes.extend([1, 2, 3]);
        let whole = read(vec![bytes.clone()]).await.unwrap();
        let bytewise = read(bytes.iter().map(|&b| vec![b]).collect())
            .await
            .unwrap();
        assert_eq!((whole, bytewise), (bytes.len(), bytes.len()));
    }

    #[tokio::test]
    async fn a_header_above_the_limit_ends_the_body_before_its_payload() {
        let mut bytes = header(0, 4).to_vec();
        bytes.extend([0; 4]);
        // Split inside the header: the length is only known with its last byte.
        let big = header(0, 17);
        let error = read(vec![
            bytes,
            big[..5].to_vec(),
            big[5..].to_vec(),
            vec![0; 17],
        ])
        .await
        .unwrap_err();
        assert!(
            matches!(
                error,
                MessageLimitError::MessageTooLarge {
                    length: 17,
                    limit: 16
                }
            ),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_body_above_the_request_limit_ends() {
        let mut message = header(0, 16).to_vec();
        message.extend([0; 16]);
        let error = read(vec![message; 3]).await.unwrap_err();
        assert!(
            matches!(error, MessageLimitError::RequestTooLarge { limit: 64 }),
            "{error}"
        );
    }
}
