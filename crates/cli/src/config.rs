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
    #[error("config file {path} is invalid: {source}")]
    Parse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
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
        let config: Config = toml::from_str(&text).map_err(|source| ConfigLoadError::Parse {
            path: path.to_owned(),
            source: Box::new(source),
        })?;
        config.engine.validate().map_err(|source| ConfigLoadError::Engine {
            path: path.to_owned(),
            source,
        })?;
        Ok(config)
    }
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
}
