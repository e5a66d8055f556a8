//! Configuration: a TOML file, every key documented, unknown keys refused.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use streamsight_collector::ServeConfig;
use streamsight_core::EngineConfig;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// How lag and health are computed: see `docs/engine.md`.
    pub engine: EngineConfig,
    /// `streamsight serve`: listeners, storage, limits.
    pub serve: ServeConfig,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigLoadError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path} is invalid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("config file {path}: engine: {source}")]
    Engine {
        path: PathBuf,
        source: streamsight_core::ConfigError,
    },
}

impl Config {
    /// Reads `path`, or returns the embedded defaults when there is none.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigLoadError> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(path).map_err(|source| ConfigLoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        let config: Config = toml::from_str(&text).map_err(|e| ConfigLoadError::Parse {
            path: path.to_owned(),
            message: parse_error(&text, &e),
        })?;
        config.engine.validate().map_err(|source| ConfigLoadError::Engine {
            path: path.to_owned(),
            source,
        })?;
        Ok(config)
    }
}

/// Keys whose values are never repeated in an error.
const SECRET_KEYS: [&str; 4] = ["password", "secret", "token", "key"];

/// Where the file is wrong and why, without toml's echo of the offending line:
/// that line may hold a password. A value error on a secret's line does not
/// even say what the value was.
fn parse_error(text: &str, e: &toml::de::Error) -> String {
    let Some(span) = e.span() else {
        return e.message().to_owned();
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    let this_line = text[before.rfind('\n').map_or(0, |i| i + 1)..]
        .lines()
        .next()
        .unwrap_or("");
    let key = this_line.split('=').next().unwrap_or("").trim().to_ascii_lowercase();
    let message = if SECRET_KEYS.iter().any(|s| key.contains(s)) {
        format!("the value of `{key}` is invalid (not shown: it may be a secret)")
    } else {
        e.message().to_owned()
    };
    format!("line {line}, column {column}: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn reads_durations_and_refuses_unknown_keys() {
        let c: Config = toml::from_str("[engine]\nstale_after = \"2m\"\n[serve]\nstorage = \"memory://\"\n").unwrap();
        assert_eq!(c.engine.stale_after, Duration::from_secs(120));
        assert_eq!(c.serve.storage, "memory://");
        assert!(toml::from_str::<Config>("[serve]\nlisten = 1\n").is_err());
        let err = toml::from_str::<Config>("[engine]\nstale_afterr = \"2m\"\n").unwrap_err();
        assert!(err.to_string().contains("stale_afterr"), "{err}");
        assert!(toml::from_str::<Config>("[engin]\n").is_err());
    }

    #[test]
    fn parse_errors_never_echo_a_secret() {
        let text = "[[serve.clusters]]\nname = \"c\"\nbootstrap = [\"k:9092\"]\n[serve.clusters.sasl]\nmechanism = \"PLAIN\"\nusername = \"u\"\npassword = 98765432123\n";
        let err = toml::from_str::<Config>(text).unwrap_err();
        assert!(err.to_string().contains("98765432123"), "toml itself echoes it: {err}");
        let ours = parse_error(text, &err);
        assert!(!ours.contains("98765432123"), "{ours}");
        assert!(ours.contains("line 7"), "{ours}");
        let unquoted = "[serve]\nstorage = sqlite://x\n";
        let err = toml::from_str::<Config>(unquoted).unwrap_err();
        assert!(
            parse_error(unquoted, &err).starts_with("line 2"),
            "{}",
            parse_error(unquoted, &err)
        );
    }
}

/// The defaults of every key, as TOML: the block docs/config.md shows.
pub fn defaults_toml() -> String {
    toml::to_string_pretty(&Config::default()).unwrap_or_default()
}

#[cfg(test)]
mod reference {
    use super::{Config, defaults_toml};
    use std::path::{Path, PathBuf};

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    const BEGIN: &str = "<!-- defaults: generated from the config structs; `STREAMSIGHT_WRITE_DOCS=1 cargo test -p streamsight --lib reference` rewrites it -->\n```toml\n";
    const END: &str = "```\n<!-- end of defaults -->";

    /// docs/config.md shows the defaults of every key as the structs have
    /// them: it cannot drift.
    #[test]
    fn the_config_reference_is_the_structs_defaults() {
        let path = root().join("docs/config.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let (Some(start), Some(end)) = (doc.find(BEGIN), doc.find(END)) else {
            panic!("docs/config.md has no generated defaults block");
        };
        let shown = &doc[start + BEGIN.len()..end];
        let defaults = defaults_toml();
        if std::env::var_os("STREAMSIGHT_WRITE_DOCS").is_some() {
            let written = format!("{}{defaults}{}", &doc[..start + BEGIN.len()], &doc[end..]);
            std::fs::write(&path, written).unwrap();
            return;
        }
        assert_eq!(
            shown, defaults,
            "docs/config.md is out of date: STREAMSIGHT_WRITE_DOCS=1 rewrites it"
        );
        // And the block is a config the binary accepts.
        let parsed: Config = toml::from_str(shown).unwrap();
        assert_eq!(parsed, Config::default());
    }

    /// The example file is what `--config` accepts.
    #[test]
    fn the_example_config_loads() {
        let path = root().join("docs/streamsight.example.toml");
        let config = Config::load(Some(&path)).unwrap();
        assert_eq!(config.serve.clusters.len(), 1);
        assert_eq!(config.serve.clusters[0].name, "prod");
    }

    /// Every TOML block of the docs that configures streamsight is one it accepts.
    #[test]
    fn every_toml_block_in_the_docs_loads() {
        let mut blocks = 0;
        for entry in std::fs::read_dir(root().join("docs")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for block in text.split("```toml\n").skip(1) {
                let block = block.split("```").next().unwrap();
                let first = block.lines().find(|l| l.starts_with('[')).unwrap_or("");
                if !(first.starts_with("[serve") || first.starts_with("[[serve") || first.starts_with("[engine")) {
                    continue;
                }
                blocks += 1;
                if let Err(e) = toml::from_str::<Config>(block) {
                    panic!("{}: a block does not load: {e}\n{block}", path.display());
                }
            }
        }
        assert!(blocks >= 8, "{blocks} blocks");
    }
}
