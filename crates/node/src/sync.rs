//! Locks that outlive a panic, and read-only looks at what they guard.

use std::ops::Deref;
use std::sync::{Mutex, MutexGuard};

/// Locks a mutex; a panic elsewhere while holding it does not take the collector down.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A look at a service's state: it can be read, never changed, and is let go
/// when dropped.
#[derive(Debug)]
pub struct View<'a, T>(pub(crate) MutexGuard<'a, T>);

impl<T> Deref for View<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}
