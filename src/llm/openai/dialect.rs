//! The dialect seam of OpenAI-compatible servers: what one server wants differently from
//! OpenAI's chat completions, applied while the request is encoded. The standard dialect
//! changes nothing; a server with quirks gets a file in `dialect/` and one line in the
//! provider table ([`crate::llm::providers`]).

pub mod mistral;

use std::borrow::Cow;

use crate::vocab::RequestOptions;

/// One OpenAI-compatible server's quirks.
pub trait Dialect: std::fmt::Debug + Send + Sync + 'static {
    /// The request options as this server takes them (e.g. `tool_choice: "any"` for
    /// `"required"`). Called on every request with the options the encoder is about to send;
    /// return them borrowed when nothing changes, so the common case copies nothing.
    fn options<'a>(&self, options: Cow<'a, RequestOptions>) -> Cow<'a, RequestOptions> {
        options
    }
}

/// OpenAI's own chat completions: no quirks.
#[derive(Debug, Default, Clone, Copy)]
pub struct StandardDialect;

impl Dialect for StandardDialect {}
