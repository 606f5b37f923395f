//! Redirects: followed within the endpoint's origin only.
//!
//! reqwest's default policy drops `Authorization`, `Cookie` and `Proxy-Authorization` on a
//! redirect to another host, port or scheme, but keeps every other header — Azure's `api-key`,
//! `x-api-key` and whatever else [`crate::llm::OpenAiConfig::with_header`] added would reach the
//! new origin, with the conversation in the body of a 307/308. So such a redirect is refused.

use std::fmt;

use reqwest::redirect::{Action, Attempt};

use crate::llm::error::ProviderError;

/// The most redirects followed for one request (reqwest's default).
const MAX_REDIRECTS: usize = 10;

/// The error a refused redirect carries through reqwest back to [`refused`].
#[derive(Debug)]
struct CrossOrigin {
    from: String,
    to: String,
}

impl fmt::Display for CrossOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "redirect from {} to another origin, {}",
            self.from, self.to
        )
    }
}

impl std::error::Error for CrossOrigin {}

#[derive(Debug)]
struct TooMany;

impl fmt::Display for TooMany {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "more than {MAX_REDIRECTS} redirects")
    }
}

impl std::error::Error for TooMany {}

/// The redirect decision: follow within the first request's origin, refuse anything else.
pub(super) fn same_origin_only(attempt: Attempt<'_>) -> Action {
    let Some(first) = attempt.previous().first() else {
        return attempt.follow();
    };
    let (from, to) = (first.origin(), attempt.url().origin());
    if from != to {
        let refused = CrossOrigin {
            from: from.ascii_serialization(),
            to: to.ascii_serialization(),
        };
        return attempt.error(refused);
    }
    if attempt.previous().len() > MAX_REDIRECTS {
        return attempt.error(TooMany);
    }
    attempt.follow()
}

/// The typed error for a redirect [`same_origin_only`] refused (`None` for any other error).
pub(super) fn refused(error: &reqwest::Error) -> Option<ProviderError> {
    if !error.is_redirect() {
        return None;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(CrossOrigin { from, to }) = cause.downcast_ref::<CrossOrigin>() {
            return Some(ProviderError::CrossOriginRedirect {
                from: from.clone(),
                to: to.clone(),
            });
        }
        if cause.is::<TooMany>() {
            return Some(ProviderError::Other(format!(
                "the server redirected the request more than {MAX_REDIRECTS} times"
            )));
        }
        source = cause.source();
    }
    None
}
