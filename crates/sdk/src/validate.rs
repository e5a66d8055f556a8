//! Schema validation at ingest: JSON Schema and Avro (with Confluent's
//! schema-registry framing: magic byte 0, then the 4-byte schema id), against
//! schemas given by file, per topic. A record that fails is a [`Violation`]:
//! the consumer routes it to a dead-letter queue ([`crate::dlq`]).

use std::collections::HashMap;
use std::path::Path;

/// Why a record failed validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// `deserialization` (not JSON / not an Avro datum of the schema),
    /// `schema_violation` (parsed, but not what the schema says), or `framing`
    /// (no Confluent magic byte, or another schema id).
    pub class: &'static str,
    /// What is wrong, in words.
    pub message: String,
    /// The schema the record was checked against: its registry id, else its file.
    pub schema: String,
}

/// A schema that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The file could not be read or is not a schema.
    #[error("schema {path}: {reason}")]
    Load {
        /// The schema's file.
        path: String,
        /// Why not.
        reason: String,
    },
}

enum Check {
    Json(Box<jsonschema::Validator>),
    Avro {
        schema: apache_avro::Schema,
        /// Confluent framing expected, with this id when given.
        confluent: Option<Option<u32>>,
    },
}

struct TopicSchema {
    check: Check,
    name: String,
}

/// Schemas per topic. Topics without one are not checked.
#[derive(Default)]
pub struct Validator {
    topics: HashMap<String, TopicSchema>,
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validator")
            .field("topics", &self.topics.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn read(path: &Path) -> Result<String, SchemaError> {
    std::fs::read_to_string(path).map_err(|e| SchemaError::Load {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

impl Validator {
    /// A validator with no schemas: every record passes until one is added.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks `topic`'s records against a JSON Schema file. Remote `$ref`s are
    /// never fetched (this build has no HTTP resolver).
    pub fn json_schema(mut self, topic: &str, path: &Path) -> Result<Self, SchemaError> {
        let load = |reason: String| SchemaError::Load {
            path: path.display().to_string(),
            reason,
        };
        let schema: serde_json::Value = serde_json::from_str(&read(path)?).map_err(|e| load(e.to_string()))?;
        let v = jsonschema::validator_for(&schema).map_err(|e| load(e.to_string()))?;
        self.topics.insert(
            topic.to_owned(),
            TopicSchema {
                check: Check::Json(Box::new(v)),
                name: path.display().to_string(),
            },
        );
        Ok(self)
    }

    /// Checks `topic`'s records against an Avro schema file. With `confluent`,
    /// records carry the schema-registry framing, with `schema_id` when given.
    pub fn avro(
        mut self,
        topic: &str,
        path: &Path,
        confluent: bool,
        schema_id: Option<u32>,
    ) -> Result<Self, SchemaError> {
        let schema = apache_avro::Schema::parse_str(&read(path)?).map_err(|e| SchemaError::Load {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let name = schema_id.map_or_else(|| path.display().to_string(), |id| id.to_string());
        self.topics.insert(
            topic.to_owned(),
            TopicSchema {
                check: Check::Avro {
                    schema,
                    confluent: confluent.then_some(schema_id),
                },
                name,
            },
        );
        Ok(self)
    }

    /// Whether `topic` has a schema at all.
    pub fn covers(&self, topic: &str) -> bool {
        self.topics.contains_key(topic)
    }

    /// Checks one record's value.
    pub fn validate(&self, topic: &str, payload: Option<&[u8]>) -> Result<(), Violation> {
        let Some(t) = self.topics.get(topic) else {
            return Ok(());
        };
        let violation = |class, message: String| Violation {
            class,
            message,
            schema: t.name.clone(),
        };
        let bytes = payload.unwrap_or_default();
        match &t.check {
            Check::Json(v) => {
                let value: serde_json::Value = serde_json::from_slice(bytes)
                    .map_err(|e| violation("deserialization", format!("not JSON: {e}")))?;
                v.validate(&value)
                    .map_err(|e| violation("schema_violation", format!("{e} at {}", e.instance_path())))
            }
            Check::Avro { schema, confluent } => {
                let mut datum = bytes;
                if let Some(expected) = confluent {
                    if datum.len() < 5 || datum[0] != 0 {
                        return Err(violation(
                            "framing",
                            "no schema-registry framing (magic byte 0, schema id)".into(),
                        ));
                    }
                    let id = u32::from_be_bytes([datum[1], datum[2], datum[3], datum[4]]);
                    if let Some(want) = expected
                        && id != *want
                    {
                        return Err(violation("framing", format!("schema id {id}, expected {want}")));
                    }
                    datum = &datum[5..];
                }
                let reader = apache_avro::reader::datum::GenericDatumReader::builder(schema)
                    .build()
                    .map_err(|e| violation("deserialization", e.to_string()))?;
                let value = reader
                    .read_value(&mut datum)
                    .map_err(|e| violation("deserialization", format!("not a datum of the schema: {e}")))?;
                if !datum.is_empty() {
                    return Err(violation(
                        "schema_violation",
                        format!(
                            "{} bytes left after the datum: written with another schema",
                            datum.len()
                        ),
                    ));
                }
                if value.validate(schema) {
                    Ok(())
                } else {
                    Err(violation(
                        "schema_violation",
                        "the datum does not match the schema".into(),
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apache_avro::types::Record;

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("streamsight-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    const JSON_SCHEMA: &str = r#"{"type":"object","required":["id","amount"],
        "properties":{"id":{"type":"string"},"amount":{"type":"number"}}}"#;

    #[test]
    fn json_records_that_drift_are_violations() {
        let v = Validator::new()
            .json_schema("orders", &file("s.json", JSON_SCHEMA))
            .unwrap();
        assert!(v.validate("orders", Some(br#"{"id":"a","amount":3}"#)).is_ok());
        let renamed = v.validate("orders", Some(br#"{"id":"a","total":3}"#)).unwrap_err();
        assert_eq!(renamed.class, "schema_violation");
        assert!(renamed.message.contains("amount"), "{renamed:?}");
        let retyped = v.validate("orders", Some(br#"{"id":"a","amount":"3"}"#)).unwrap_err();
        assert_eq!(retyped.class, "schema_violation");
        assert_eq!(
            v.validate("orders", Some(b"{not json")).unwrap_err().class,
            "deserialization"
        );
        assert!(v.validate("other", Some(b"anything")).is_ok(), "no schema, no check");
        assert!(
            Validator::new()
                .json_schema("t", Path::new("/nonexistent.json"))
                .is_err()
        );
    }

    const AVRO: &str = r#"{"type":"record","name":"Order","fields":[
        {"name":"id","type":"string"},{"name":"amount","type":"long"}]}"#;
    const AVRO_V2: &str = r#"{"type":"record","name":"Order","fields":[
        {"name":"id","type":"string"},{"name":"amount","type":"string"}]}"#;

    fn datum(schema_text: &str, amount: apache_avro::types::Value) -> Vec<u8> {
        let schema = apache_avro::Schema::parse_str(schema_text).unwrap();
        let mut r = Record::new(&schema).unwrap();
        r.put("id", "a");
        r.put("amount", amount);
        let mut framed = vec![0, 0, 0, 0, 7];
        let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&schema)
            .build()
            .unwrap();
        framed.extend(writer.write_value_to_vec(r).unwrap());
        framed
    }

    #[test]
    fn avro_with_confluent_framing() {
        let v = Validator::new()
            .avro("orders", &file("s.avsc", AVRO), true, Some(7))
            .unwrap();
        use apache_avro::types::Value;
        assert!(v.validate("orders", Some(&datum(AVRO, Value::Long(5)))).is_ok());
        let drifted = v.validate("orders", Some(&datum(AVRO_V2, Value::String("five hundred".into()))));
        assert!(drifted.is_err(), "a string where a long was");
        let mut other_id = datum(AVRO, Value::Long(5));
        other_id[4] = 8;
        assert_eq!(v.validate("orders", Some(&other_id)).unwrap_err().class, "framing");
        assert_eq!(v.validate("orders", Some(b"x")).unwrap_err().class, "framing");
        assert_eq!(
            v.validate("orders", Some(&datum(AVRO, Value::Long(5))))
                .map_err(|e| e.schema),
            Ok(())
        );
    }
}
