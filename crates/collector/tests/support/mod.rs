// Each test crate includes this module and uses part of it.
#![allow(dead_code, unreachable_pub)]

//! What the collector's tests share.

use streamsight_collector::ServeConfig;

/// A collector on free loopback ports storing to `storage`, every other setting
/// at its default.
pub fn loopback(storage: &str) -> ServeConfig {
    ServeConfig {
        intake_listen: "127.0.0.1:0".parse().unwrap_or_else(|_| unreachable!()),
        api_listen: "127.0.0.1:0".parse().unwrap_or_else(|_| unreachable!()),
        storage: storage.into(),
        ..ServeConfig::ephemeral()
    }
}
