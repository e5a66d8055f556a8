//! The default store: one SQLite file, write-ahead log, fsync on every commit. A
//! writer batch is one row: its records in the binary form of [`crate::codec`].
//!
//! Files written before batches existed hold one JSON row per record in a `log`
//! table; they are read first, and expire with retention like the rest.

use crate::{Record, Store, StoreError, codec};
use rusqlite::{Connection, OptionalExtension, params};
use std::path::PathBuf;
use streamsight_core::Millis;

/// Legacy rows handed over at a time when replaying a `log` table.
const LEGACY_CHUNK: usize = 10_000;

#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    /// A `log` table of JSON rows from an earlier version is present.
    legacy: bool,
    buffer: Vec<u8>,
}

impl SqliteStore {
    pub fn open(path: PathBuf) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_owned(),
                source,
            })?;
        }
        let conn = Connection::open(&path)?;
        // FULL: a commit is on disk, WAL included, before `append` returns.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS batches (
                 id INTEGER PRIMARY KEY,
                 first_at INTEGER NOT NULL,
                 last_at INTEGER NOT NULL,
                 records INTEGER NOT NULL,
                 body BLOB NOT NULL
             );
             CREATE INDEX IF NOT EXISTS batches_last_at ON batches (last_at);",
        )?;
        let legacy = conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'log'",
                [],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        Ok(Self {
            conn,
            legacy,
            buffer: Vec::new(),
        })
    }

    fn scan_legacy(&mut self, since: Millis, each: &mut dyn FnMut(Vec<Record>)) -> Result<(), StoreError> {
        let mut select = self
            .conn
            .prepare("SELECT id, body FROM log WHERE at >= ?1 ORDER BY id")?;
        let mut rows = select.query(params![since.0])?;
        let mut chunk = Vec::new();
        while let Some(row) = rows.next()? {
            let (id, body): (i64, String) = (row.get(0)?, row.get(1)?);
            chunk.push(legacy_record(&body).map_err(|why| StoreError::Corrupt { id, why })?);
            if chunk.len() == LEGACY_CHUNK {
                each(std::mem::take(&mut chunk));
            }
        }
        if !chunk.is_empty() {
            each(chunk);
        }
        Ok(())
    }
}

/// A JSON row of the `log` table: the same shape as [`Record`]'s serde form, except
/// that pathway points and delivery facts were JSON strings inside it.
fn legacy_record(body: &str) -> Result<Record, String> {
    let mut value: serde_json::Value = serde_json::from_str(body).map_err(|e| e.to_string())?;
    let nested = match value.get("record").and_then(|r| r.as_str()) {
        Some("pathway") => Some("point"),
        Some("delivery") => Some("fact"),
        _ => None,
    };
    if let (Some(field), Some(object)) = (nested, value.as_object_mut()) {
        let json = object.remove("json").ok_or("missing field `json`")?;
        let inner: serde_json::Value =
            serde_json::from_str(json.as_str().ok_or("`json` is not a string")?).map_err(|e| e.to_string())?;
        object.insert(field.to_owned(), inner);
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

impl Store for SqliteStore {
    fn append(&mut self, records: &[Record]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let (first, last) = records.iter().fold((i64::MAX, i64::MIN), |(lo, hi), r| {
            let at = r.at().0;
            (lo.min(at), hi.max(at))
        });
        self.buffer.clear();
        codec::encode(records, &mut self.buffer);
        self.conn
            .prepare_cached("INSERT INTO batches (first_at, last_at, records, body) VALUES (?1, ?2, ?3, ?4)")?
            .execute(params![first, last, records.len() as i64, &self.buffer])?;
        Ok(())
    }

    fn scan(&mut self, since: Millis, each: &mut dyn FnMut(Vec<Record>)) -> Result<(), StoreError> {
        if self.legacy {
            self.scan_legacy(since, each)?;
        }
        let mut select = self
            .conn
            .prepare("SELECT id, body FROM batches WHERE last_at >= ?1 ORDER BY id")?;
        let mut rows = select.query(params![since.0])?;
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            let body = row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?;
            let mut records = codec::decode(body).map_err(|e| StoreError::Corrupt { id, why: e.to_string() })?;
            records.retain(|r| r.at() >= since);
            each(records);
        }
        Ok(())
    }

    fn delete_before(&mut self, before: Millis) -> Result<u64, StoreError> {
        let tx = self.conn.transaction()?;
        let records: i64 = tx.query_row(
            "SELECT COALESCE(SUM(records), 0) FROM batches WHERE last_at < ?1",
            params![before.0],
            |row| row.get(0),
        )?;
        tx.execute("DELETE FROM batches WHERE last_at < ?1", params![before.0])?;
        let legacy = if self.legacy {
            tx.execute("DELETE FROM log WHERE at < ?1", params![before.0])?
        } else {
            0
        };
        tx.commit()?;
        Ok(records as u64 + legacy as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_the_json_log_are_still_read() {
        let dir = std::env::temp_dir().join(format!("streamsight-legacy-{}", std::process::id()));
        let path = dir.join("old.db");
        std::fs::create_dir_all(&dir).unwrap();
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch("CREATE TABLE log (id INTEGER PRIMARY KEY, at INTEGER NOT NULL, body TEXT NOT NULL);")
                .unwrap();
            for (at, body) in [
                (
                    1,
                    r#"{"record":"observation","at":1,"observation":{"kind":"committed","cluster":"c","group":"g","topic":"t","partition":0,"offset":5}}"#,
                ),
                (2, r#"{"record":"rejected","at":2,"reason":"negative_partition"}"#),
                (
                    3,
                    r#"{"record":"delivery","at":3,"json":"{\"kind\":\"skipped\",\"cluster\":\"c\",\"group\":\"g\",\"topic\":\"t\",\"partition\":0,\"first_offset\":1,\"last_offset\":2}"}"#,
                ),
            ] {
                conn.execute("INSERT INTO log (at, body) VALUES (?1, ?2)", params![at, body])
                    .unwrap();
            }
        }
        let mut store = SqliteStore::open(path.clone()).unwrap();
        let old = store.load(Millis(0)).unwrap();
        assert_eq!(old.len(), 3);
        assert!(matches!(old[2], Record::Delivery { .. }));
        store.append(&old[..1]).unwrap();
        assert_eq!(store.load(Millis(0)).unwrap().len(), 4, "old rows first, then batches");
        assert_eq!(store.delete_before(Millis(3)).unwrap(), 3);
        assert_eq!(store.load(Millis(0)).unwrap().len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
