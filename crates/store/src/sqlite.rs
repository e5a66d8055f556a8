//! The default store: one SQLite file, write-ahead log, fsync on every commit.

use crate::{Record, Store, StoreError};
use rusqlite::{Connection, params};
use std::path::PathBuf;
use streamsight_core::Millis;

#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
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
            "CREATE TABLE IF NOT EXISTS log (
                 id INTEGER PRIMARY KEY,
                 at INTEGER NOT NULL,
                 body TEXT NOT NULL
             );
             CREATE INDEX IF NOT EXISTS log_at ON log (at);",
        )?;
        Ok(Self { conn })
    }
}

impl Store for SqliteStore {
    fn append(&mut self, records: &[Record]) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        {
            let mut insert = tx.prepare_cached("INSERT INTO log (at, body) VALUES (?1, ?2)")?;
            for r in records {
                let body = serde_json::to_string(r).map_err(|e| StoreError::Corrupt {
                    id: -1,
                    why: e.to_string(),
                })?;
                insert.execute(params![r.at().0, body])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn load(&mut self, since: Millis) -> Result<Vec<Record>, StoreError> {
        let mut select = self
            .conn
            .prepare("SELECT id, body FROM log WHERE at >= ?1 ORDER BY id")?;
        let rows = select.query_map(params![since.0], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, body) = row?;
            let record = serde_json::from_str(&body).map_err(|e| StoreError::Corrupt { id, why: e.to_string() })?;
            out.push(record);
        }
        Ok(out)
    }

    fn delete_before(&mut self, before: Millis) -> Result<u64, StoreError> {
        let n = self.conn.execute("DELETE FROM log WHERE at < ?1", params![before.0])?;
        Ok(n as u64)
    }
}
