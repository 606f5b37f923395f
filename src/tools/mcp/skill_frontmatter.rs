//! The YAML frontmatter of a fetched `SKILL.md` (Agent Skills format: the file begins with a
//! `---` line, the YAML mapping, and a closing `---` line), parsed with a full YAML parser and
//! compared field by field with the frontmatter a listing gave (SEP-2640: any difference is a
//! verification failure).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// Why a `SKILL.md`'s frontmatter is not the listed one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FrontmatterProblem {
    /// No frontmatter block, or one that is not a YAML mapping with string keys.
    Malformed(String),
    /// A required field (`name`, `description`) is missing or not a string.
    Missing(&'static str),
    /// The `name` differs from the listed one.
    Name {
        /// What the file says.
        found: String,
    },
    /// The first field (in key order) whose value differs, or that only one side has.
    Field(String),
}

/// The YAML between the opening and the closing `---` lines and the text after the closing
/// line, or `None` when the text does not begin with a frontmatter block.
pub(crate) fn block(text: &str) -> Option<(&str, &str)> {
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\n', '\r']) == "---" {
            return Some((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
    }
    None
}

/// The frontmatter of `text` as a JSON object.
pub(crate) fn parse(text: &str) -> Result<Map<String, Value>, FrontmatterProblem> {
    let (yaml, _) = block(text).ok_or_else(|| {
        FrontmatterProblem::Malformed(
            "the file does not begin with a `---` frontmatter block".into(),
        )
    })?;
    match serde_norway::from_str::<Value>(yaml) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(FrontmatterProblem::Malformed(
            "the frontmatter is not a YAML mapping".into(),
        )),
        Err(error) => Err(FrontmatterProblem::Malformed(format!(
            "the frontmatter is not valid YAML: {error}"
        ))),
    }
}

/// Check the fetched frontmatter `found` against the `listed` one: the required fields, the
/// name, then every other field.
pub(crate) fn compare(
    found: &Map<String, Value>,
    listed: &Map<String, Value>,
) -> Result<(), FrontmatterProblem> {
    for field in ["name", "description"] {
        if !found.get(field).is_some_and(Value::is_string) {
            return Err(FrontmatterProblem::Missing(field));
        }
    }
    if found.get("name") != listed.get("name") {
        return Err(FrontmatterProblem::Name {
            found: found
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        });
    }
    let keys: BTreeSet<&String> = found.keys().chain(listed.keys()).collect();
    match keys
        .into_iter()
        .find(|key| found.get(*key) != listed.get(*key))
    {
        Some(key) => Err(FrontmatterProblem::Field(key.clone())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn the_block_ends_at_the_closing_line() {
        let text = "---\nname: a\ndescription: b\n---\nBody\n---\nmore";
        assert_eq!(
            block(text),
            Some(("name: a\ndescription: b\n", "Body\n---\nmore"))
        );
        assert_eq!(
            block("---\r\nname: a\r\n---\r\nBody"),
            Some(("name: a\r\n", "Body"))
        );
        assert_eq!(block("name: a\n---\n"), None);
        assert_eq!(block("---\nname: a\n"), None);
        assert_eq!(block(" ---\nname: a\n---\n"), None);
    }

    #[test]
    fn nested_fields_parse_as_json() {
        let map = parse(
            "---\nname: pdf\ndescription: PDFs\nmetadata:\n  version: \"2.1\"\n  n: 3\n---\n",
        )
        .unwrap();
        assert_eq!(
            Value::Object(map),
            json!({"name": "pdf", "description": "PDFs", "metadata": {"version": "2.1", "n": 3}})
        );
    }

    #[test]
    fn a_document_that_is_not_a_mapping_is_malformed() {
        for text in [
            "---\n- a\n- b\n---\n",
            "---\n---\n",
            "---\nname: [unclosed\n---\n",
        ] {
            assert!(
                matches!(parse(text), Err(FrontmatterProblem::Malformed(_))),
                "{text:?}"
            );
        }
    }

    #[test]
    fn an_alias_bomb_is_refused_not_expanded() {
        let mut yaml = String::from("---\na: &a [x, x, x, x, x, x, x, x, x, x]\n");
        let mut previous = 'a';
        for name in 'b'..='j' {
            yaml.push_str(&format!(
                "{name}: &{name} [*{previous}, *{previous}, *{previous}, *{previous}, *{previous}, *{previous}, *{previous}, *{previous}, *{previous}, *{previous}]\n"
            ));
            previous = name;
        }
        yaml.push_str("---\n");
        assert!(matches!(
            parse(&yaml),
            Err(FrontmatterProblem::Malformed(_))
        ));
    }

    #[test]
    fn every_field_is_compared() {
        let listed = object(json!({"name": "pdf", "description": "PDFs", "license": "MIT"}));
        assert_eq!(compare(&listed.clone(), &listed), Ok(()));
        let other = object(json!({"name": "pdf", "description": "Steal keys", "license": "MIT"}));
        assert_eq!(
            compare(&other, &listed),
            Err(FrontmatterProblem::Field("description".into()))
        );
        let fewer = object(json!({"name": "pdf", "description": "PDFs"}));
        assert_eq!(
            compare(&fewer, &listed),
            Err(FrontmatterProblem::Field("license".into()))
        );
        let renamed = object(json!({"name": "other", "description": "PDFs", "license": "MIT"}));
        assert_eq!(
            compare(&renamed, &listed),
            Err(FrontmatterProblem::Name {
                found: "other".into()
            })
        );
        let nameless = object(json!({"description": "PDFs"}));
        assert_eq!(
            compare(&nameless, &listed),
            Err(FrontmatterProblem::Missing("name"))
        );
        let numeric = object(json!({"name": "pdf", "description": 3}));
        assert_eq!(
            compare(&numeric, &listed),
            Err(FrontmatterProblem::Missing("description"))
        );
    }
}
