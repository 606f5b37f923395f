//! Tool names for MCP adapters: always `^[a-zA-Z0-9_-]{1,64}$`, never colliding.

use std::collections::{HashMap, HashSet};

/// The longest tool name the OpenAI wire format accepts.
const MAX_NAME: usize = 64;

/// How an [`McpClient`](crate::tools::mcp::McpClient)'s adapters are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum McpToolNaming {
    /// The server's tool name (sanitised when it has characters the model API rejects).
    #[default]
    Raw,
    /// `<server>__<tool>`, sanitised and shortened with a stable hash when too long.
    Qualified,
}

/// `name` with every character outside `[a-zA-Z0-9_-]` replaced by `_`; empty → `tool`;
/// longer than 64 → cut and suffixed with a stable hash of `name`.
pub fn sanitize_tool_name(name: &str) -> String {
    fit(sanitize_part(name, "tool"), name, false)
}

/// `<server>__<tool>`, sanitised to `^[a-zA-Z0-9_-]{1,64}$`; when too long it keeps a prefix
/// and ends with `_` + 8 hex digits of a stable hash of server and tool, so it stays unique.
pub fn qualified_tool_name(server: &str, tool: &str) -> String {
    let joined = format!(
        "{}__{}",
        sanitize_part(server, "_"),
        sanitize_part(tool, "_")
    );
    fit(joined, &format!("{server}\u{0}{tool}"), false)
}

/// `part` with every character outside `[a-zA-Z0-9_-]` replaced by `_` (`empty` if empty).
fn sanitize_part(part: &str, empty: &str) -> String {
    if part.is_empty() {
        return empty.to_owned();
    }
    part.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Cut `name` to 64 characters with a hash suffix of `key` when it is too long (or always when
/// `force_hash`).
pub(crate) fn fit(name: String, key: &str, force_hash: bool) -> String {
    if name.len() <= MAX_NAME && !force_hash {
        return name;
    }
    let suffix = format!("_{:08x}", stable_hash(key) as u32);
    let keep = MAX_NAME.saturating_sub(suffix.len()).min(name.len());
    format!("{}{suffix}", &name[..keep])
}

/// FNV-1a: stable across runs and platforms (unlike `DefaultHasher`).
fn stable_hash(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `base` if no name in `taken` has it; else `base` cut and suffixed with a stable hash of
/// `key` (server and tool); else with `_2`, `_3`, ... — so the result is never in `taken`.
///
/// The numbered suffixes are distinct from each other (each ends in `_<digits>` of a different
/// number), and at most `taken.len() + 1` of them are tried, so one is free.
pub(crate) fn unique_name(base: &str, key: &str, taken: &HashSet<String>) -> String {
    if !taken.contains(base) {
        return base.to_owned();
    }
    let hashed = fit(base.to_owned(), key, true);
    if !taken.contains(&hashed) {
        return hashed;
    }
    (2..=taken.len() + 2)
        .map(|n| {
            let suffix = format!("_{n}");
            let keep = MAX_NAME.saturating_sub(suffix.len()).min(base.len());
            format!("{}{suffix}", &base[..keep])
        })
        .find(|name| !taken.contains(name))
        .unwrap_or(hashed)
}

/// The registry names of `tools` (`(server, tool on the server, preferred name)`, raw names
/// unique per server): the preferred name unless another tool or a name in `existing` wants
/// it, then `<server>__<tool>`, then a unique variant. Distinct tools get distinct names.
pub(crate) fn assign_names(
    tools: &[(&str, &str, &str)],
    existing: &HashSet<String>,
) -> Vec<String> {
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for (_, _, preferred) in tools {
        *uses.entry(preferred).or_default() += 1;
    }
    let mut taken = existing.clone();
    tools
        .iter()
        .map(|(server, tool, preferred)| {
            let clash =
                uses.get(preferred).is_some_and(|n| *n > 1) || existing.contains(*preferred);
            let base = if clash {
                qualified_tool_name(server, tool)
            } else {
                (*preferred).to_owned()
            };
            let name = unique_name(&base, &format!("{server}\u{0}{tool}"), &taken);
            taken.insert(name.clone());
            name
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::registry::validate_tool_name;

    #[test]
    fn valid_names_stay_as_they_are() {
        assert_eq!(sanitize_tool_name("get_weather-2"), "get_weather-2");
    }

    #[test]
    fn invalid_characters_become_underscores() {
        assert_eq!(sanitize_tool_name("fs.read file"), "fs_read_file");
        assert_eq!(sanitize_tool_name(""), "tool");
    }

    #[test]
    fn qualified_names_join_server_and_tool() {
        assert_eq!(qualified_tool_name("my server", "echo"), "my_server__echo");
    }

    #[test]
    fn long_names_are_shortened_with_a_stable_distinct_hash() {
        let a = qualified_tool_name(&"s".repeat(40), &format!("{}a", "t".repeat(40)));
        let b = qualified_tool_name(&"s".repeat(40), &format!("{}b", "t".repeat(40)));
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert_eq!(
            a,
            qualified_tool_name(&"s".repeat(40), &format!("{}a", "t".repeat(40)))
        );
        assert!(validate_tool_name(&a).is_ok());
    }

    #[test]
    fn names_that_sanitise_alike_stay_distinct() {
        let tools = [
            ("s", "a.b", "a_b"),
            ("s", "a_b", "a_b"),
            ("s", "a b", "a_b"),
            ("s", "s__a_b", "s__a_b"),
        ];
        let names = assign_names(&tools, &HashSet::from(["s__a_b_2".to_owned()]));
        let unique: HashSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), 4, "{names:?}");
        assert!(!names.contains(&"s__a_b_2".to_owned()));
    }

    proptest::proptest! {
        /// Distinct raw names (of one or two servers, from an alphabet that sanitises into
        /// collisions, long enough to be cut) always get distinct, valid registry names that
        /// avoid the names already registered.
        #[test]
        fn distinct_raw_names_get_distinct_registered_names(
            raw in proptest::collection::btree_set(("[ab]", "[a._ -]{0,3}|[a.]{60,70}"), 1..24),
            existing in proptest::collection::btree_set("[a_]{1,4}|a__a_[0-9]", 0..6),
        ) {
            let preferred: Vec<String> = raw.iter().map(|(_, tool)| sanitize_tool_name(tool)).collect();
            let tools: Vec<(&str, &str, &str)> = raw
                .iter()
                .zip(&preferred)
                .map(|((server, tool), name)| (server.as_str(), tool.as_str(), name.as_str()))
                .collect();
            let existing: HashSet<String> = existing.into_iter().collect();
            let names = assign_names(&tools, &existing);
            let unique: HashSet<&String> = names.iter().collect();
            proptest::prop_assert_eq!(unique.len(), names.len());
            for name in &names {
                proptest::prop_assert!(validate_tool_name(name).is_ok(), "{}", name);
                proptest::prop_assert!(!existing.contains(name), "{}", name);
            }
        }

        #[test]
        fn every_generated_name_is_valid(server in ".{0,80}", tool in ".{0,80}") {
            proptest::prop_assert!(validate_tool_name(&qualified_tool_name(&server, &tool)).is_ok());
            proptest::prop_assert!(validate_tool_name(&sanitize_tool_name(&tool)).is_ok());
        }
    }
}
