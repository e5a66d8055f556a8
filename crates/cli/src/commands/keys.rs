//! `streamsight keys`: API keys in the keys file.

use streamsight_collector::auth::{KeyFile, Scope, generate};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Creates a key and prints it; only its hash is stored.
    Create {
        /// The tenant the key opens (`default`, or one of `[[serve.tenants]]`).
        #[arg(long, default_value = "default")]
        tenant: String,
        /// ingest (send telemetry), read (API, /metrics), payloads (read, and
        /// the records themselves: /api/v1/records) or admin (everything).
        #[arg(long)]
        scope: Scope,
        /// Default: the config's `keys_file`.
        #[arg(long, env = "STREAMSIGHT_KEYS_FILE")]
        keys_file: Option<std::path::PathBuf>,
    },
    /// Lists keys: public id, tenant, scope, created, revoked. Never the key.
    List {
        /// Default: the config's `keys_file`.
        #[arg(long, env = "STREAMSIGHT_KEYS_FILE")]
        keys_file: Option<std::path::PathBuf>,
    },
    /// Revokes a key by its public id (`keys list`), or given whole: only its
    /// id is read, and shown.
    Revoke {
        /// The key's public id, or the whole key.
        id: String,
        /// Default: the config's `keys_file`.
        #[arg(long, env = "STREAMSIGHT_KEYS_FILE")]
        keys_file: Option<std::path::PathBuf>,
    },
}

pub fn run(command: Command, serve: &streamsight_collector::ServeConfig) -> anyhow::Result<()> {
    let configured = serve.keys_file.as_path();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let path_of = |p: Option<std::path::PathBuf>| p.unwrap_or_else(|| configured.to_owned());
    match command {
        Command::Create {
            tenant,
            scope,
            keys_file,
        } => {
            let known = std::iter::once(streamsight_collector::config::DEFAULT_TENANT)
                .chain(serve.tenants.iter().map(|t| t.name.as_str()))
                .any(|t| t == tenant);
            anyhow::ensure!(
                known,
                "no tenant {tenant:?} in the config ([[serve.tenants]]); a key for it would open nothing"
            );
            let path = path_of(keys_file);
            let mut file = KeyFile::load(&path)?;
            let key = generate(&tenant, scope, now_ms)?;
            file.keys.push(key.stored.clone());
            file.save(&path)?;
            println!("{}", key.token);
            eprintln!(
                "key {} ({} scope, tenant {tenant}) added to {}; it is shown only this once",
                key.stored.id,
                scope.as_str(),
                path.display()
            );
        }
        Command::List { keys_file } => {
            let file = KeyFile::load(&path_of(keys_file))?;
            let rows: Vec<[String; 5]> = file
                .keys
                .iter()
                .map(|k| {
                    [
                        k.id.clone(),
                        k.tenant.clone(),
                        k.scope.as_str().to_owned(),
                        utc(k.created_ms),
                        k.revoked_ms.map_or("-".to_owned(), utc),
                    ]
                })
                .collect();
            let header = ["ID", "TENANT", "SCOPE", "CREATED", "REVOKED"].map(str::to_owned);
            // Each column as wide as its widest cell (a tenant's name, `payloads`).
            let mut widths = header.clone().map(|h| h.len());
            for row in &rows {
                for (w, cell) in widths.iter_mut().zip(row) {
                    *w = (*w).max(cell.len());
                }
            }
            for row in std::iter::once(&header).chain(&rows) {
                let line: Vec<String> = row.iter().zip(widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
                println!("{}", line.join("  ").trim_end());
            }
        }
        Command::Revoke { id, keys_file } => {
            let path = path_of(keys_file);
            let mut file = KeyFile::load(&path)?;
            if let Some(k) = file.find(&id)
                && let Some(at) = k.revoked_ms
            {
                eprintln!(
                    "key {} was already revoked at {}; nothing changed in {}",
                    k.id,
                    utc(at),
                    path.display()
                );
                return Ok(());
            }
            let id = file.revoke(&id, now_ms)?;
            file.save(&path)?;
            eprintln!("key {id} revoked in {}", path.display());
        }
    }
    Ok(())
}

/// A key's time as ISO-8601 UTC, to the second.
fn utc(ms: i64) -> String {
    let ms = u64::try_from(ms).unwrap_or(0);
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)).to_string()
}
