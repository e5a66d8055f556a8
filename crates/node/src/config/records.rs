//! `[serve.records]`: reading one record of a polled cluster
//! (`GET /api/v1/records/...`, `streamsight record`): how much of it is shown
//! and which fields are masked.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Avro schema files named at most, and the largest one read.
pub const MAX_SCHEMAS: usize = 1_000;
pub const MAX_SCHEMA_BYTES: u64 = 1 << 20;

/// `[serve.records]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecordsConfig {
    /// Field paths masked in JSON keys and values, dotted (`card.number`);
    /// `*` matches any one field name, array elements are passed through.
    pub redact: Vec<String>,
    /// A key or value larger than this is shown as a preview, not decoded.
    pub max_value_bytes: usize,
    /// Bytes of a value shown as text or hex when it is not decoded.
    pub preview_bytes: usize,
    /// Record reads at once per tenant; more wait their turn.
    pub max_concurrent_reads: usize,
    /// Avro schemas by schema-registry id (`{ "7" = "schemas/payment.avsc" }`),
    /// as the SDK's validation takes them: a value framed with one of these
    /// ids (magic byte 0, the id) is decoded to JSON, then masked.
    pub avro_schemas: BTreeMap<String, PathBuf>,
    /// Protobuf schemas by schema-registry id (`{ "8" = "schemas/payment.proto" }`):
    /// a value framed with one of these ids is decoded to JSON (the message
    /// its framing's message indexes name), then masked.
    pub protobuf_schemas: BTreeMap<String, PathBuf>,
}

impl RecordsConfig {
    /// The Avro schema files: ids that are numbers, files that can be read
    /// and are at most [`MAX_SCHEMA_BYTES`]. Whether they parse is said when
    /// a record is read.
    pub fn check(&self) -> Result<(), String> {
        for (key, schemas) in [
            ("avro_schemas", &self.avro_schemas),
            ("protobuf_schemas", &self.protobuf_schemas),
        ] {
            if schemas.len() > MAX_SCHEMAS {
                return Err(format!("{key} names more than {MAX_SCHEMAS} schemas"));
            }
            for (id, path) in schemas {
                if id.parse::<u32>().is_err() {
                    return Err(format!("{key}: {id:?} is not a schema id (a number)"));
                }
                match std::fs::metadata(path) {
                    Ok(m) if m.len() <= MAX_SCHEMA_BYTES => {}
                    Ok(m) => {
                        return Err(format!(
                            "{key} {id}: {} is {} bytes, more than {MAX_SCHEMA_BYTES}",
                            path.display(),
                            m.len()
                        ));
                    }
                    Err(e) => return Err(format!("{key} {id}: {}: {e}", path.display())),
                }
            }
        }
        if let Some(id) = self
            .avro_schemas
            .keys()
            .find(|id| self.protobuf_schemas.contains_key(*id))
        {
            return Err(format!(
                "schema id {id} is named both in avro_schemas and protobuf_schemas"
            ));
        }
        Ok(())
    }

    /// The Avro schema file of `id`, if one is named.
    pub fn avro_schema(&self, id: u32) -> Option<&PathBuf> {
        find(&self.avro_schemas, id)
    }

    /// The Protobuf schema file of `id`, if one is named.
    pub fn protobuf_schema(&self, id: u32) -> Option<&PathBuf> {
        find(&self.protobuf_schemas, id)
    }
}

fn find(schemas: &BTreeMap<String, PathBuf>, id: u32) -> Option<&PathBuf> {
    schemas
        .iter()
        .find(|(k, _)| k.parse::<u32>().ok() == Some(id))
        .map(|(_, p)| p)
}

impl Default for RecordsConfig {
    fn default() -> Self {
        Self {
            redact: Vec::new(),
            max_value_bytes: 256 * 1024,
            preview_bytes: 4 * 1024,
            max_concurrent_reads: 4,
            avro_schemas: BTreeMap::new(),
            protobuf_schemas: BTreeMap::new(),
        }
    }
}
