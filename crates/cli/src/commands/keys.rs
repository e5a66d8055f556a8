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
            println!(
                "{:<14} {:<16} {:<7} {:<15} REVOKED_MS",
                "ID", "TENANT", "SCOPE", "CREATED_MS"
            );
            for k in &file.keys {
                let revoked = k.revoked_ms.map_or("-".to_owned(), |t| t.to_string());
                println!(
                    "{:<14} {:<16} {:<7} {:<15} {revoked}",
                    k.id,
                    k.tenant,
                    k.scope.as_str(),
                    k.created_ms
                );
            }
        }
        Command::Revoke { id, keys_file } => {
            let path = path_of(keys_file);
            let mut file = KeyFile::load(&path)?;
            let id = file.revoke(&id, now_ms)?;
            file.save(&path)?;
            eprintln!("key {id} revoked in {}", path.display());
        }
    }
    Ok(())
}
