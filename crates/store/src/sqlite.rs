//! The default store: one SQLite file, write-ahead log, fsync on every commit. A
//! writer batch is one row: its records in the binary form of [`crate::codec`].
//!
//! Files written before batches existed hold one JSON row per record in a `log`
//! table; they are read first, and expire with retention like the rest.

use crate::backend::{Scanned, Store, StoreError};
use crate::codec;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::PathBuf;
use streamsight_core::Millis;
use streamsight_core::record::Record;

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
        // A team's topics, groups and audit log are its own: directories
        // made 0700 and the database 0600 whatever the umask (SQLite gives
        // its -wal and -shm files the database's mode).
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| StoreError::CreateDir {
                    path: dir.to_owned(),
                    source,
                })?;
        }
        {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(&path)
                .map_err(|source| StoreError::CreateFile {
                    path: path.clone(),
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

    fn scan_legacy(&mut self, since: Millis, each: &mut dyn FnMut(Vec<Record>)) -> Result<u64, StoreError> {
        let mut select = self
            .conn
            .prepare("SELECT id, body FROM log WHERE at >= ?1 ORDER BY id")?;
        let mut rows = select.query(params![since.0])?;
        let mut chunk = Vec::new();
        let mut corrupt = 0;
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            let record = row
                .get::<_, String>(1)
                .map_err(|e| e.to_string())
                .and_then(|body| legacy_record(&body));
            match record {
                Ok(r) => chunk.push(r),
                Err(why) => {
                    skipped(id, &why, corrupt);
                    corrupt += 1;
                }
            }
            if chunk.len() == LEGACY_CHUNK {
                each(std::mem::take(&mut chunk));
            }
        }
        if !chunk.is_empty() {
            each(chunk);
        }
        Ok(corrupt)
    }

    /// Bytes of pages in use, and the page size.
    fn used(&self) -> Result<(u64, u64), StoreError> {
        let pragma = |name: &str| -> Result<u64, StoreError> {
            let v: i64 = self.conn.pragma_query_value(None, name, |r| r.get(0))?;
            Ok(u64::try_from(v).unwrap_or(0))
        };
        let page = pragma("page_size")?;
        Ok(((pragma("page_count")? - pragma("freelist_count")?) * page, page))
    }

    fn page_count(&self) -> Result<u64, StoreError> {
        let v: i64 = self.conn.pragma_query_value(None, "page_count", |r| r.get(0))?;
        Ok(u64::try_from(v).unwrap_or(0))
    }

    /// A hard ceiling on the file, in pages: appends beyond it fail as on a full
    /// disk, and succeed again once room is made.
    pub(crate) fn set_max_pages(&mut self, pages: u64) -> Result<(), StoreError> {
        self.conn.pragma_update(None, "max_page_count", pages as i64)?;
        Ok(())
    }
}

/// Logs the first undecodable row of a scan, and counts the rest quietly.
fn skipped(id: i64, why: &str, before: u64) {
    if before == 0 {
        tracing::error!(id, why, "skipping a stored batch that cannot be decoded");
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

    fn scan(&mut self, since: Millis, each: &mut dyn FnMut(Vec<Record>)) -> Result<Scanned, StoreError> {
        let mut corrupt = if self.legacy { self.scan_legacy(since, each)? } else { 0 };
        let mut select = self
            .conn
            .prepare("SELECT id, body FROM batches WHERE last_at >= ?1 ORDER BY id")?;
        let mut rows = select.query(params![since.0])?;
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            let decoded = match row.get_ref(1)?.as_blob() {
                Ok(body) => codec::decode(body).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match decoded {
                Ok(mut records) => {
                    records.retain(|r| r.at() >= since);
                    each(records);
                }
                Err(why) => {
                    skipped(id, &why, corrupt);
                    corrupt += 1;
                }
            }
        }
        Ok(Scanned { corrupt })
    }

    fn bytes(&mut self) -> Result<u64, StoreError> {
        Ok(self.used()?.0)
    }

    fn cap_bytes(&mut self, max_bytes: u64) -> Result<u64, StoreError> {
        let (mut used, page) = self.used()?;
        let mut deleted = 0u64;
        while used > max_bytes {
            let tx = self.conn.transaction()?;
            // A tenth of the batches at a time: few rounds, little over-deletion.
            let (batches, records): (i64, i64) =
                tx.query_row("SELECT COUNT(*), COALESCE(SUM(records), 0) FROM batches", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?;
            if batches == 0 {
                break;
            }
            let n = (batches / 10).max(1);
            let gone: i64 = tx.query_row(
                "SELECT COALESCE(SUM(records), 0) FROM (SELECT records FROM batches ORDER BY id LIMIT ?1)",
                params![n],
                |r| r.get(0),
            )?;
            tx.execute(
                "DELETE FROM batches WHERE id IN (SELECT id FROM batches ORDER BY id LIMIT ?1)",
                params![n],
            )?;
            tx.commit()?;
            deleted += u64::try_from(gone.min(records)).unwrap_or(0);
            used = self.used()?.0;
        }
        // Room for one more large batch above the cap, and no more: a batch that
        // does not fit fails as on a full disk.
        let ceiling = max_bytes.saturating_add(max_bytes / 4).max(64 * page) / page.max(1);
        self.set_max_pages(ceiling.max(self.page_count()?))?;
        Ok(deleted)
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

    fn temp_store(name: &str) -> (PathBuf, SqliteStore) {
        let dir = std::env::temp_dir().join(format!("streamsight-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = SqliteStore::open(dir.join("s.db")).unwrap();
        (dir, store)
    }

    fn batch(at: i64, n: usize) -> Vec<Record> {
        (0..n)
            .map(|i| Record::Rejected {
                at: Millis(at + i as i64),
                reason: streamsight_core::RejectReason::MalformedTag,
            })
            .collect()
    }

    #[test]
    fn an_undecodable_batch_is_skipped_and_counted_not_fatal() {
        let (dir, mut store) = temp_store("corrupt");
        store.append(&batch(1, 3)).unwrap();
        store.append(&batch(10, 2)).unwrap();
        store.append(&batch(20, 1)).unwrap();
        store
            .conn
            .execute("UPDATE batches SET body = x'09ff' WHERE id = 2", [])
            .unwrap();
        store
            .conn
            .execute("UPDATE batches SET body = 'text' WHERE id = 3", [])
            .unwrap();
        let mut got = Vec::new();
        let scanned = store.scan(Millis(0), &mut |b| got.extend(b)).unwrap();
        assert_eq!((got.len(), scanned.corrupt), (3, 2));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_full_disk_fails_appends_and_they_succeed_once_room_returns() {
        let (dir, mut store) = temp_store("full");
        store.append(&batch(1, 10)).unwrap();
        let pages = store.page_count().unwrap();
        store.set_max_pages(pages).unwrap();
        let big = batch(100, 50_000);
        let err = store.append(&big).unwrap_err();
        assert!(err.to_string().contains("full"), "{err}");
        // Nothing half-written, and what was stored is intact.
        assert_eq!(store.load(Millis(0)).unwrap(), batch(1, 10));
        store.set_max_pages(1 << 30).unwrap();
        store.append(&big).unwrap();
        assert_eq!(store.load(Millis(0)).unwrap().len(), 50_010);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_size_cap_deletes_the_oldest_first() {
        let (dir, mut store) = temp_store("cap");
        for i in 0..200 {
            store.append(&batch(i * 1_000, 500)).unwrap();
        }
        let before = store.bytes().unwrap();
        let cap = before / 4;
        let deleted = store.cap_bytes(cap).unwrap();
        assert!(store.bytes().unwrap() <= cap, "{} > {cap}", store.bytes().unwrap());
        assert!(deleted > 0 && deleted < 200 * 500);
        let kept = store.load(Millis(0)).unwrap();
        assert_eq!(kept.last(), batch(199_000, 500).last(), "the newest stays");
        assert_eq!(kept.len() as u64, 200 * 500 - deleted);
        // Past the cap's ceiling an append fails as on a full disk.
        assert!(store.append(&batch(300_000, 400_000)).is_err());
        store.append(&batch(300_000, 10)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
