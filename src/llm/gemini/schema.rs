//! Tool schemas in Gemini's dialects: `parametersJsonSchema` (JSON Schema, sent nearly as is)
//! or `parameters` (Gemini's OpenAPI 3.0 subset, converted here).
//!
//! The OpenAPI subset knows one string `type` per schema (plus `nullable`), `enum` only on
//! strings, a short list of `format`s, and no `$ref`, `$schema`, `additionalProperties`,
//! `const`, `oneOf`, `allOf` or type lists; a schema using them is answered with
//! `400 INVALID_ARGUMENT`. Today's tool schemas use several (`"type": ["integer", "null"]` for
//! every `Option<usize>` parameter), so the conversion rewrites what has an equivalent and
//! drops what only narrows the accepted values (the tool validates its arguments anyway).

use serde_json::{Map, Value};

/// Which schema field a function declaration carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SchemaDialect {
    /// `parametersJsonSchema`: the tool's JSON Schema as it is (only `$schema` removed). The
    /// default: no conversion means nothing of the schema is lost, and Gemini 2.5 and later
    /// take type lists, `$ref`/`$defs`, `const` and `additionalProperties` there.
    #[default]
    JsonSchema,
    /// `parameters`: the schema converted to Gemini's OpenAPI subset (see [`to_openapi`]), for
    /// models or proxies that take only that field.
    OpenApi,
}

/// Why a schema could not be converted to Gemini's OpenAPI subset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaDialectError {
    /// A `$ref` that is recursive (the subset has no references, so it cannot be inlined).
    #[error(
        "the schema of tool {tool:?} refers to itself ({reference}); Gemini's `parameters` schema has no references, use the JSON Schema dialect"
    )]
    RecursiveReference {
        /// The tool.
        tool: String,
        /// The reference.
        reference: String,
    },
    /// A `$ref` to something other than the schema's own `$defs`/`definitions`.
    #[error("the schema of tool {tool:?} has a reference {reference} that cannot be inlined")]
    UnresolvedReference {
        /// The tool.
        tool: String,
        /// The reference.
        reference: String,
    },
}

/// The schema for `parametersJsonSchema`: the tool's schema without `$schema` (a meta-schema
/// URL Gemini has no use for).
pub fn to_json_schema(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
    }
    schema
}

/// The longest chain of `$ref`s followed while inlining; deeper means a cycle.
const MAX_REF_DEPTH: usize = 32;

/// `schema` converted to Gemini's OpenAPI subset for `parameters` (`tool` names the tool in
/// errors). Type lists become one `type` plus `nullable` (or an `anyOf` of the types),
/// `anyOf: [X, {"type": "null"}]` becomes `X` with `nullable`, `oneOf` becomes `anyOf`, `allOf`
/// is merged, `const` becomes a one-value `enum`, `$ref`s into the schema's `$defs` are
/// inlined; keywords outside the subset are dropped.
///
/// # Errors
/// [`SchemaDialectError`] for a recursive or unresolvable `$ref`.
pub fn to_openapi(tool: &str, schema: &Value) -> Result<Value, SchemaDialectError> {
    let defs = schema
        .get("$defs")
        .or_else(|| schema.get("definitions"))
        .and_then(Value::as_object);
    let converter = Converter { tool, defs };
    converter.convert(schema, 0)
}

struct Converter<'a> {
    tool: &'a str,
    defs: Option<&'a Map<String, Value>>,
}

/// `format`s Gemini accepts, by type.
fn format_allowed(kind: &str, format: &str) -> bool {
    match kind {
        "STRING" => matches!(format, "enum" | "date-time"),
        "INTEGER" => matches!(format, "int32" | "int64"),
        "NUMBER" => matches!(format, "float" | "double"),
        _ => false,
    }
}

/// A JSON Schema type name as Gemini's `Type` enum value.
fn type_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "string" => "STRING",
        "number" => "NUMBER",
        "integer" => "INTEGER",
        "boolean" => "BOOLEAN",
        "array" => "ARRAY",
        "object" => "OBJECT",
        "null" => "NULL",
        _ => return None,
    })
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

impl Converter<'_> {
    fn convert(&self, schema: &Value, depth: usize) -> Result<Value, SchemaDialectError> {
        let Some(object) = schema.as_object() else {
            // `true` (anything): no constraint the subset can express.
            return Ok(Value::Object(Map::new()));
        };
        if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
            return self.inline(reference, object, depth);
        }
        if let Some(all_of) = object.get("allOf").and_then(Value::as_array) {
            return self.merge_all_of(object, all_of, depth);
        }
        let mut out = Map::new();
        let mut nullable = object.get("nullable").and_then(Value::as_bool) == Some(true);
        // `anyOf`/`oneOf`: a null alternative becomes `nullable`; one left is the schema itself.
        let alternatives = object
            .get("anyOf")
            .or_else(|| object.get("oneOf"))
            .and_then(Value::as_array);
        if let Some(alternatives) = alternatives {
            let (nulls, rest): (Vec<&Value>, Vec<&Value>) =
                alternatives.iter().partition(|alt| is_null_schema(alt));
            nullable |= !nulls.is_empty();
            if let [single] = rest.as_slice() {
                let mut inner = self.convert(single, depth)?;
                if let Some(inner) = inner.as_object_mut() {
                    self.copy_annotations(object, inner);
                    if nullable {
                        inner.insert("nullable".into(), Value::Bool(true));
                    }
                }
                return Ok(inner);
            }
            let converted = rest
                .iter()
                .map(|alt| self.convert(alt, depth))
                .collect::<Result<Vec<_>, _>>()?;
            out.insert("anyOf".into(), Value::Array(converted));
        }
        let kind = match object.get("type") {
            Some(Value::String(name)) => type_name(name),
            Some(Value::Array(names)) => {
                let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
                nullable |= names.contains(&"null");
                let kinds: Vec<&'static str> = names
                    .iter()
                    .filter(|name| **name != "null")
                    .filter_map(|name| type_name(name))
                    .collect();
                match kinds.as_slice() {
                    [] => None,
                    [one] => Some(*one),
                    several => {
                        // Several types: an `anyOf` of them, the other keywords on the branch
                        // each applies to.
                        let branches = several
                            .iter()
                            .map(|kind| {
                                let mut branch = object.clone();
                                branch.remove("type");
                                branch.remove("description");
                                branch.remove("title");
                                branch.remove("default");
                                let mut converted = self.convert(&Value::Object(branch), depth)?;
                                if let Some(converted) = converted.as_object_mut() {
                                    converted.insert("type".into(), Value::String((*kind).into()));
                                    converted.retain(|key, _| keyword_fits(key, kind));
                                }
                                Ok(converted)
                            })
                            .collect::<Result<Vec<_>, _>>()?;
                        out.insert("anyOf".into(), Value::Array(branches));
                        self.copy_annotations(object, &mut out);
                        if nullable {
                            out.insert("nullable".into(), Value::Bool(true));
                        }
                        return Ok(Value::Object(out));
                    }
                }
            }
            _ => None,
        };
        // `const` is a one-value enum (Gemini's enums are strings).
        let kind = kind.or_else(|| match object.get("const") {
            Some(Value::String(_)) => Some("STRING"),
            _ => None,
        });
        if let Some(kind) = kind {
            out.insert("type".into(), Value::String(kind.into()));
        }
        self.copy_annotations(object, &mut out);
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        self.copy_keywords(object, kind, &mut out, depth)?;
        Ok(Value::Object(out))
    }

    /// `description`, `title` and a `default` (not `null`, which only says the field may be
    /// left out): kept on the schema they annotate.
    fn copy_annotations(&self, from: &Map<String, Value>, to: &mut Map<String, Value>) {
        for key in ["description", "title", "default"] {
            if let Some(value) = from.get(key).filter(|value| !value.is_null()) {
                to.insert(key.into(), value.clone());
            }
        }
    }

    fn copy_keywords(
        &self,
        object: &Map<String, Value>,
        kind: Option<&str>,
        out: &mut Map<String, Value>,
        depth: usize,
    ) -> Result<(), SchemaDialectError> {
        if let Some(properties) = object.get("properties").and_then(Value::as_object) {
            let mut converted = Map::new();
            for (name, property) in properties {
                converted.insert(name.clone(), self.convert(property, depth)?);
            }
            out.insert("properties".into(), Value::Object(converted));
        }
        if let Some(required) = object.get("required").filter(|value| value.is_array()) {
            out.insert("required".into(), required.clone());
        }
        if let Some(items) = object.get("items").filter(|items| items.is_object()) {
            out.insert("items".into(), self.convert(items, depth)?);
        }
        match (
            object.get("enum").and_then(Value::as_array),
            object.get("const"),
        ) {
            (Some(values), _) => {
                let strings: Vec<Value> =
                    values.iter().filter(|v| v.is_string()).cloned().collect();
                // Only an all-string enum is expressible (null is `nullable`).
                if strings.len() == values.iter().filter(|v| !v.is_null()).count()
                    && !strings.is_empty()
                {
                    out.insert("enum".into(), Value::Array(strings));
                    out.insert("type".into(), Value::String("STRING".into()));
                }
            }
            (None, Some(Value::String(value))) => {
                out.insert(
                    "enum".into(),
                    Value::Array(vec![Value::String(value.clone())]),
                );
            }
            _ => {}
        }
        if let (Some(kind), Some(format)) = (kind, object.get("format").and_then(Value::as_str))
            && format_allowed(kind, format)
        {
            out.insert("format".into(), Value::String(format.into()));
        }
        for key in [
            "minimum",
            "maximum",
            "minItems",
            "maxItems",
            "minLength",
            "maxLength",
            "minProperties",
            "maxProperties",
            "pattern",
            "propertyOrdering",
            "example",
        ] {
            if let Some(value) = object.get(key) {
                out.insert(key.into(), value.clone());
            }
        }
        Ok(())
    }

    /// A `$ref` into the schema's own `$defs`/`definitions`, inlined; sibling keywords (a
    /// `description`) stay on top.
    fn inline(
        &self,
        reference: &str,
        object: &Map<String, Value>,
        depth: usize,
    ) -> Result<Value, SchemaDialectError> {
        if depth >= MAX_REF_DEPTH {
            return Err(SchemaDialectError::RecursiveReference {
                tool: self.tool.to_owned(),
                reference: reference.to_owned(),
            });
        }
        let target = reference
            .strip_prefix("#/$defs/")
            .or_else(|| reference.strip_prefix("#/definitions/"))
            .and_then(|name| self.defs.and_then(|defs| defs.get(name)))
            .ok_or_else(|| SchemaDialectError::UnresolvedReference {
                tool: self.tool.to_owned(),
                reference: reference.to_owned(),
            })?;
        let mut inlined = self.convert(target, depth + 1)?;
        if let Some(inlined) = inlined.as_object_mut() {
            self.copy_annotations(object, inlined);
            if object.get("nullable").and_then(Value::as_bool) == Some(true) {
                inlined.insert("nullable".into(), Value::Bool(true));
            }
        }
        Ok(inlined)
    }

    /// `allOf`: the parts merged into one schema (properties and `required` joined).
    fn merge_all_of(
        &self,
        object: &Map<String, Value>,
        parts: &[Value],
        depth: usize,
    ) -> Result<Value, SchemaDialectError> {
        let mut merged = object.clone();
        merged.remove("allOf");
        let mut merged = self.convert(&Value::Object(merged), depth)?;
        for part in parts {
            let part = self.convert(part, depth)?;
            let (Some(into), Some(part)) = (merged.as_object_mut(), part.as_object()) else {
                continue;
            };
            for (key, value) in part {
                match (key.as_str(), into.get_mut(key)) {
                    ("properties", Some(Value::Object(existing))) => {
                        if let Some(more) = value.as_object() {
                            existing.extend(more.clone());
                        }
                    }
                    ("required", Some(Value::Array(existing))) => {
                        if let Some(more) = value.as_array() {
                            existing.extend(more.iter().cloned());
                        }
                    }
                    (_, Some(_)) => {}
                    (_, None) => {
                        into.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        Ok(merged)
    }
}

/// Whether a keyword belongs on a branch of type `kind` (an `anyOf` made from a type list).
fn keyword_fits(key: &str, kind: &str) -> bool {
    match key {
        "type" | "nullable" => true,
        "properties" | "required" | "minProperties" | "maxProperties" | "propertyOrdering" => {
            kind == "OBJECT"
        }
        "items" | "minItems" | "maxItems" => kind == "ARRAY",
        "minLength" | "maxLength" | "pattern" | "enum" => kind == "STRING",
        "minimum" | "maximum" => matches!(kind, "INTEGER" | "NUMBER"),
        "format" => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_type_list_with_null_becomes_one_type_and_nullable() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file"},
                "offset": {"type": ["integer", "null"], "format": "uint", "minimum": 0},
                "limit": {"type": ["integer", "null"], "format": "uint", "minimum": 0}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        let converted = to_openapi("read_file", &schema).unwrap();
        assert_eq!(
            converted,
            json!({
                "type": "OBJECT",
                "properties": {
                    "path": {"type": "STRING", "description": "The file"},
                    "offset": {"type": "INTEGER", "nullable": true, "minimum": 0},
                    "limit": {"type": "INTEGER", "nullable": true, "minimum": 0}
                },
                "required": ["path"]
            })
        );
    }

    #[test]
    fn refs_are_inlined_and_any_of_null_is_nullable() {
        let schema = json!({
            "type": "object",
            "properties": {
                "mode": {"$ref": "#/$defs/Mode", "description": "How"},
                "target": {"anyOf": [{"$ref": "#/$defs/Target"}, {"type": "null"}]},
                "kind": {"oneOf": [{"const": "a"}, {"const": "b"}]}
            },
            "$defs": {
                "Mode": {"type": "string", "enum": ["fast", "slow"]},
                "Target": {"type": "object", "properties": {"x": {"type": "number", "format": "double"}}}
            }
        });
        let converted = to_openapi("t", &schema).unwrap();
        assert_eq!(
            converted["properties"]["mode"],
            json!({"type": "STRING", "description": "How", "enum": ["fast", "slow"]})
        );
        assert_eq!(
            converted["properties"]["target"],
            json!({"type": "OBJECT", "properties": {"x": {"type": "NUMBER", "format": "double"}}, "nullable": true})
        );
        assert_eq!(
            converted["properties"]["kind"],
            json!({"anyOf": [{"type": "STRING", "enum": ["a"]}, {"type": "STRING", "enum": ["b"]}]})
        );
        assert!(converted.get("$defs").is_none());
    }

    #[test]
    fn a_recursive_ref_is_a_typed_error() {
        let schema = json!({
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}}
        });
        assert!(matches!(
            to_openapi("tree", &schema),
            Err(SchemaDialectError::RecursiveReference { .. })
        ));
        let schema = json!({"$ref": "https://example.com/schema.json"});
        assert!(matches!(
            to_openapi("remote", &schema),
            Err(SchemaDialectError::UnresolvedReference { .. })
        ));
    }

    #[test]
    fn several_types_become_any_of_and_all_of_is_merged() {
        let schema = json!({
            "type": ["string", "integer", "null"], "minLength": 1, "minimum": 0, "description": "d"
        });
        assert_eq!(
            to_openapi("t", &schema).unwrap(),
            json!({
                "anyOf": [{"type": "STRING", "minLength": 1}, {"type": "INTEGER", "minimum": 0}],
                "description": "d",
                "nullable": true
            })
        );
        let schema = json!({"allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}
        ]});
        assert_eq!(
            to_openapi("t", &schema).unwrap(),
            json!({"type": "OBJECT", "properties": {"a": {"type": "STRING"}, "b": {"type": "BOOLEAN"}}, "required": ["a", "b"]})
        );
    }

    #[test]
    fn the_json_schema_dialect_only_loses_the_meta_schema() {
        let schema = json!({"$schema": "x", "type": ["integer", "null"]});
        assert_eq!(
            to_json_schema(&schema),
            json!({"type": ["integer", "null"]})
        );
    }
}
