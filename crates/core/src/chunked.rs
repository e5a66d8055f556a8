//! A growable array that allocates in fixed chunks: no doubling, so no up-to-2x
//! slack and no copy of millions of entries when it grows.

use std::ops::{Index, IndexMut};

/// `CHUNK` elements are allocated at a time: small enough that a small engine
/// does not pay for a large empty chunk, large enough that the chunk list is short.
#[derive(Debug)]
pub(crate) struct Chunked<T, const CHUNK: usize> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T, const CHUNK: usize> Default for Chunked<T, CHUNK> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T, const CHUNK: usize> Chunked<T, CHUNK> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends and returns the new element's index.
    pub(crate) fn push(&mut self, value: T) -> usize {
        if self.len % CHUNK == 0 {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let last = self.chunks.len() - 1;
        self.chunks[last].push(value);
        self.len += 1;
        self.len - 1
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

impl<T, const CHUNK: usize> Index<usize> for Chunked<T, CHUNK> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        &self.chunks[i / CHUNK][i % CHUNK]
    }
}

impl<T, const CHUNK: usize> IndexMut<usize> for Chunked<T, CHUNK> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i / CHUNK][i % CHUNK]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNK: usize = 16;

    #[test]
    fn indexes_across_chunks() {
        let mut c = Chunked::<usize, CHUNK>::default();
        for i in 0..(CHUNK * 2 + 5) {
            assert_eq!(c.push(i), i);
        }
        assert_eq!(c.len(), CHUNK * 2 + 5);
        assert_eq!(c[CHUNK + 1], CHUNK + 1);
        c[CHUNK * 2] = 7;
        assert_eq!(c[CHUNK * 2], 7);
        assert_eq!(c.iter().count(), c.len());
    }
}
