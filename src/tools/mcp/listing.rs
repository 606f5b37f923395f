//! `tools/list` across pages, bounded: at most [`MAX_LIST_PAGES`] pages and
//! [`MAX_LISTED_TOOLS`] tools, and a cursor the server repeats ends the listing — a server that
//! pages forever gets a clear error, not all of agcore's memory.

use std::collections::HashSet;
use std::time::Duration;

use rmcp::model::{CacheScope, ListToolsResult, PaginatedRequestParams, Tool};
use rmcp::service::ServiceError;

use crate::tools::error::ToolError;
use crate::tools::mcp::{MAX_LIST_PAGES, MAX_LISTED_TOOLS};

/// A server's `tools/list` broke one of agcore's bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpListError {
    /// More pages than [`MAX_LIST_PAGES`].
    #[error(
        "MCP server '{server}': tools/list did not end after {limit} pages; agcore stops there"
    )]
    TooManyPages {
        /// The server.
        server: String,
        /// The page limit.
        limit: usize,
    },
    /// More tools than [`MAX_LISTED_TOOLS`].
    #[error("MCP server '{server}': tools/list listed more than {limit} tools ({count} so far)")]
    TooManyTools {
        /// The server.
        server: String,
        /// The tool limit.
        limit: usize,
        /// How many tools had arrived.
        count: usize,
    },
    /// The server sent a `nextCursor` it had sent before: the listing would never end.
    #[error("MCP server '{server}': tools/list repeated the cursor '{cursor}' (a paging loop)")]
    RepeatedCursor {
        /// The server.
        server: String,
        /// The repeated cursor (at most 80 characters of it).
        cursor: String,
    },
}

impl From<McpListError> for ToolError {
    fn from(error: McpListError) -> Self {
        ToolError::McpError(error.to_string())
    }
}

/// Why a bounded listing failed.
#[derive(Debug)]
pub(crate) enum ListFailure {
    /// A bound was hit.
    Limit(McpListError),
    /// A page request failed.
    Request(ServiceError),
}

/// How long a server says its `tools/list` stays fresh, and for whom (the 2026-07-28 cache
/// hints `ttlMs` and `cacheScope`; a server of an earlier protocol sends none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct McpCacheHint {
    /// Milliseconds the listing may be reused (the shortest of its pages'); `None`: no hint,
    /// reused until the server says the list changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Whether the listing is the same for every user (`false` when any page said `private`).
    pub shared: bool,
}

impl McpCacheHint {
    /// How long the listing may be reused, if the server said.
    pub fn ttl(&self) -> Option<Duration> {
        self.ttl_ms.map(Duration::from_millis)
    }

    fn of(page: &ListToolsResult) -> Option<Self> {
        if page.ttl_ms.is_none() && page.cache_scope.is_none() {
            return None;
        }
        Some(McpCacheHint {
            ttl_ms: page.ttl_ms,
            shared: page.cache_scope != Some(CacheScope::Private),
        })
    }

    /// The hint of a listing of two parts: the shorter life, private if either part is.
    fn join(self, other: Option<Self>) -> Self {
        match other {
            None => McpCacheHint {
                ttl_ms: None,
                ..self
            },
            Some(other) => McpCacheHint {
                ttl_ms: self.ttl_ms.zip(other.ttl_ms).map(|(a, b)| a.min(b)),
                shared: self.shared && other.shared,
            },
        }
    }
}

/// Every page of `tools/list`, asking for each with `page(cursor)`, within the bounds.
pub(crate) async fn list_bounded<F, Fut>(server: &str, page: F) -> Result<Vec<Tool>, ListFailure>
where
    F: FnMut(Option<PaginatedRequestParams>) -> Fut,
    Fut: Future<Output = Result<ListToolsResult, ServiceError>>,
{
    list_bounded_with_hint(server, page)
        .await
        .map(|(tools, _)| tools)
}

/// [`list_bounded`], with the listing's cache hint (none when a page had none).
pub(crate) async fn list_bounded_with_hint<F, Fut>(
    server: &str,
    mut page: F,
) -> Result<(Vec<Tool>, Option<McpCacheHint>), ListFailure>
where
    F: FnMut(Option<PaginatedRequestParams>) -> Fut,
    Fut: Future<Output = Result<ListToolsResult, ServiceError>>,
{
    let mut hint: Option<Option<McpCacheHint>> = None;
    let mut tools = Vec::new();
    let mut cursors = HashSet::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let result = page(Some(params)).await.map_err(ListFailure::Request)?;
        let this = McpCacheHint::of(&result);
        hint = Some(match hint {
            None => this,
            Some(before) => before.map(|before| before.join(this)),
        });
        tools.extend(result.tools);
        if tools.len() > MAX_LISTED_TOOLS {
            return Err(ListFailure::Limit(McpListError::TooManyTools {
                server: server.to_owned(),
                limit: MAX_LISTED_TOOLS,
                count: tools.len(),
            }));
        }
        match result.next_cursor {
            None => return Ok((tools, hint.flatten())),
            Some(next) if !cursors.insert(next.clone()) => {
                return Err(ListFailure::Limit(McpListError::RepeatedCursor {
                    server: server.to_owned(),
                    cursor: next.chars().take(80).collect(),
                }));
            }
            Some(next) => cursor = Some(next),
        }
    }
    Err(ListFailure::Limit(McpListError::TooManyPages {
        server: server.to_owned(),
        limit: MAX_LIST_PAGES,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn page(n: usize, next: Option<&str>) -> ListToolsResult {
        let tools = (0..n)
            .map(|i| Tool::new(format!("t{i}"), "", Arc::new(serde_json::Map::new())))
            .collect();
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next.map(str::to_owned);
        result
    }

    #[tokio::test]
    async fn pages_are_joined_until_there_is_no_cursor() {
        let mut served = 0;
        let tools = list_bounded("s", |params| {
            served += 1;
            let next = params.and_then(|p| p.cursor).is_none().then_some("2");
            std::future::ready(Ok(page(3, next)))
        })
        .await
        .unwrap();
        assert_eq!((tools.len(), served), (6, 2));
    }

    #[tokio::test]
    async fn the_hint_is_the_shortest_life_and_private_when_any_page_is() {
        let mut served = 0;
        let (tools, hint) = list_bounded_with_hint("s", |params| {
            served += 1;
            let first = params.and_then(|p| p.cursor).is_none();
            let mut result = page(2, first.then_some("2"));
            result.ttl_ms = Some(if first { 60_000 } else { 5_000 });
            result.cache_scope = Some(if first {
                CacheScope::Public
            } else {
                CacheScope::Private
            });
            std::future::ready(Ok(result))
        })
        .await
        .unwrap();
        assert_eq!((tools.len(), served), (4, 2));
        let hint = hint.unwrap();
        assert_eq!(hint.ttl(), Some(Duration::from_secs(5)));
        assert!(!hint.shared);
        let (_, none) = list_bounded_with_hint("s", |_| std::future::ready(Ok(page(1, None))))
            .await
            .unwrap();
        assert_eq!(none, None);
    }

    #[tokio::test]
    async fn every_bound_is_a_clear_error() {
        let mut n = 0;
        let endless = list_bounded("s", |_| {
            n += 1;
            std::future::ready(Ok(page(1, Some(&n.to_string()))))
        })
        .await;
        assert!(matches!(
            endless,
            Err(ListFailure::Limit(McpListError::TooManyPages {
                limit: 100,
                ..
            }))
        ));
        let looping = list_bounded("s", |_| std::future::ready(Ok(page(1, Some("same"))))).await;
        assert!(matches!(
            looping,
            Err(ListFailure::Limit(McpListError::RepeatedCursor { .. }))
        ));
        let huge = list_bounded("s", |_| {
            std::future::ready(Ok(page(MAX_LISTED_TOOLS + 1, None)))
        })
        .await;
        assert!(matches!(
            huge,
            Err(ListFailure::Limit(McpListError::TooManyTools { .. }))
        ));
    }
}
