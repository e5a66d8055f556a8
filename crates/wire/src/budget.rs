//! Memory a decode may take, charged before it is taken.
//!
//! A small body can describe a large value: 10 KB of gzip holds five million
//! empty protobuf spans, each a few hundred bytes once built. Counting what was
//! built after the decoder built it is too late, so every decoder here charges
//! a [`Meter`] as it reads: the protobuf decoders count the messages of a body
//! before anything is built ([`crate::traces::otlp`]); the serde decoders charge
//! each element of a list or a map before reading it ([`vec`], [`map`]); the
//! gunzip charges each growth of its buffer. A meter has a limit of its own (one
//! request) and may draw from a [`Pool`] shared by every request in flight, so
//! that many requests at once are bounded too, whatever the number of threads
//! decoding them.
//!
//! The serde decoders find the meter on their thread ([`metered`]): serde gives
//! a field's deserializer no way to be handed one.

use std::cell::RefCell;
use std::sync::Arc;

/// Memory shared by every decode in flight (the collector's whole budget).
pub trait Pool: Send + Sync + std::fmt::Debug {
    /// Takes `bytes` if that many are left.
    fn take(&self, bytes: usize) -> bool;
    /// Gives back `bytes` taken before.
    fn give(&self, bytes: usize);
}

/// Why a decode was stopped before it took more memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Spent {
    /// The request alone would take more than one request may.
    #[error("decoding it would take more than {limit} bytes of memory, the limit for one request; send less at a time")]
    Request { limit: usize },
    /// Other requests in flight hold the shared memory: try again shortly.
    #[error("the memory for decoding is held by other requests in flight; retry shortly")]
    Shared,
}

/// What one decode has taken, under its own limit and the pool's.
#[derive(Debug)]
pub struct Meter {
    limit: usize,
    charged: usize,
    pool: Option<Arc<dyn Pool>>,
    /// The first refusal: a decoder's own error (serde's, a string) says
    /// less than this.
    refused: Option<Spent>,
}

impl Meter {
    /// A meter of at most `limit` bytes, drawn from `pool` when there is one.
    pub fn new(limit: usize, pool: Option<Arc<dyn Pool>>) -> Self {
        Self {
            limit,
            charged: 0,
            pool,
            refused: None,
        }
    }

    /// No limit: for bytes this process made itself, and tests.
    pub fn unbounded() -> Self {
        Self::new(usize::MAX, None)
    }

    /// Takes `bytes` more, or says why not (and remembers it).
    pub fn charge(&mut self, bytes: usize) -> Result<(), Spent> {
        if let Some(spent) = self.refused {
            return Err(spent);
        }
        let total = self.charged.saturating_add(bytes);
        let refused = if total > self.limit {
            Some(Spent::Request { limit: self.limit })
        } else if self.pool.as_ref().is_some_and(|p| !p.take(bytes)) {
            Some(Spent::Shared)
        } else {
            None
        };
        if let Some(spent) = refused {
            self.refused = Some(spent);
            return Err(spent);
        }
        self.charged = total;
        Ok(())
    }

    /// Gives back `bytes` no longer held (a line decoded and dropped).
    pub fn release(&mut self, bytes: usize) {
        let bytes = bytes.min(self.charged);
        self.charged -= bytes;
        if let Some(p) = &self.pool {
            p.give(bytes);
        }
    }

    /// Bytes taken now.
    pub fn charged(&self) -> usize {
        self.charged
    }

    /// Why a charge was refused, if one was.
    pub fn refused(&self) -> Option<Spent> {
        self.refused
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.release(self.charged);
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Meter>> = const { RefCell::new(None) };
}

/// Runs `decode` with `meter` charged by every decoder of this crate it calls
/// on this thread; the meter comes back with what they charged.
pub fn metered<T>(meter: &mut Meter, decode: impl FnOnce() -> T) -> T {
    let own = std::mem::replace(meter, Meter::unbounded());
    let before = CURRENT.with(|c| c.replace(Some(own)));
    let out = decode();
    if let Some(back) = CURRENT.with(|c| c.replace(before)) {
        *meter = back;
    }
    out
}

/// Charges the meter of this thread's decode; none installed charges nothing.
pub(crate) fn charge(bytes: usize) -> Result<(), Spent> {
    CURRENT.with(|c| c.borrow_mut().as_mut().map_or(Ok(()), |m| m.charge(bytes)))
}

/// Gives back to the meter of this thread's decode.
pub(crate) fn release(bytes: usize) {
    CURRENT.with(|c| {
        if let Some(m) = c.borrow_mut().as_mut() {
            m.release(bytes);
        }
    });
}

/// What this thread's decode has charged so far (a mark for [`release_to`]).
pub(crate) fn charged() -> usize {
    CURRENT.with(|c| c.borrow().as_ref().map_or(0, Meter::charged))
}

/// Gives back what was charged since `mark`: what was read, used and dropped.
pub(crate) fn release_to(mark: usize) {
    release(charged().saturating_sub(mark));
}

/// Why this thread's decode was refused memory, if it was.
pub(crate) fn refused() -> Option<Spent> {
    CURRENT.with(|c| c.borrow().as_ref().and_then(Meter::refused))
}

/// What an element of a list costs at the list's peak: itself, the slack of a
/// list that grows by doubling (up to as much again), and the old buffer the
/// list still holds while it moves into the new one: three times its size.
pub(crate) const fn element<T>() -> usize {
    3 * std::mem::size_of::<T>()
}

/// What a heap block of `bytes` takes from the allocator, rounded up as the
/// worse of the two the collector may run on: glibc's chunks (16-byte
/// multiples with an 8-byte header, 32 bytes at least) over mimalloc's size
/// classes (no header, about an eighth of rounding).
pub(crate) const fn block(bytes: usize) -> usize {
    let chunk = (bytes + 8).next_multiple_of(16);
    if bytes == 0 {
        0
    } else if chunk < 32 {
        32
    } else {
        chunk
    }
}

/// What a decoded value holds on the heap besides its own size.
pub(crate) trait Heap {
    fn heap(&self) -> usize;
}

impl Heap for String {
    fn heap(&self) -> usize {
        block(self.capacity())
    }
}

impl Heap for f64 {
    fn heap(&self) -> usize {
        0
    }
}

impl Heap for u32 {
    fn heap(&self) -> usize {
        0
    }
}

/// A list, each element charged before it is read (`deserialize_with`).
pub(crate) fn vec<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    struct Elements<T>(std::marker::PhantomData<T>);
    impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Elements<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Vec<T>, E> {
            Ok(Vec::new())
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::new();
            loop {
                charge(element::<T>().max(1)).map_err(serde::de::Error::custom)?;
                match seq.next_element()? {
                    Some(x) => out.push(x),
                    None => return Ok(out),
                }
            }
        }
    }
    d.deserialize_any(Elements(std::marker::PhantomData))
}

/// A map, each entry charged before it is read (`deserialize_with`).
pub(crate) fn map<'de, D, K, V>(d: D) -> Result<std::collections::HashMap<K, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    K: serde::Deserialize<'de> + std::hash::Hash + Eq + Heap,
    V: serde::Deserialize<'de> + Heap,
{
    struct Entries<K, V>(std::marker::PhantomData<(K, V)>);
    impl<'de, K, V> serde::de::Visitor<'de> for Entries<K, V>
    where
        K: serde::Deserialize<'de> + std::hash::Hash + Eq + Heap,
        V: serde::Deserialize<'de> + Heap,
    {
        type Value = std::collections::HashMap<K, V>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut entries: A) -> Result<Self::Value, A::Error> {
            let mut out = std::collections::HashMap::new();
            loop {
                // A table's slot holds the pair and a control byte; it grows by doubling.
                // A hash map's slot and control byte, as for a list (it moves
                // into a table twice the size when it grows).
                charge(element::<(K, V)>() + 3).map_err(serde::de::Error::custom)?;
                match entries.next_entry::<K, V>()? {
                    Some((k, v)) => {
                        // What the key and value hold: a string's heap block.
                        charge(k.heap() + v.heap()).map_err(serde::de::Error::custom)?;
                        out.insert(k, v);
                    }
                    None => return Ok(out),
                }
            }
        }
    }
    d.deserialize_map(Entries(std::marker::PhantomData))
}

/// What one JSON value costs built as a `serde_json::Value`: itself, and as an object's entry its key
/// and the map's slot.
pub const JSON_VALUE_BYTES: usize = 2 * (std::mem::size_of::<serde_json::Value>() + std::mem::size_of::<String>()) + 16;

/// Why [`charge_json`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum JsonCharge {
    #[error("{0}")]
    Json(serde_json::Error),
    #[error("{0}")]
    Memory(Spent),
}

/// Values counted between two charges: a thread-local access per value would
/// cost more than the count.
const CHARGE_EVERY: usize = 4096;

/// Counts the values of one JSON text (every array element and object member,
/// nested ones too) without building any, and charges `each` bytes a value to
/// this thread's meter ([`metered`]) as it counts: a text that would pass the
/// meter's limit once built is stopped where it passes it, not read to its
/// end first. serde_json's depth limit holds. The values counted.
pub fn charge_json(raw: &[u8], each: usize) -> Result<usize, JsonCharge> {
    use serde::de::{DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Visitor};
    struct Count<'a> {
        n: &'a mut usize,
        each: usize,
    }
    impl Count<'_> {
        fn one<E: Error>(&mut self) -> Result<(), E> {
            *self.n += 1;
            if *self.n % CHARGE_EVERY == 0 {
                charge(CHARGE_EVERY.saturating_mul(self.each)).map_err(E::custom)?;
            }
            Ok(())
        }
        fn again(&mut self) -> Count<'_> {
            Count {
                n: self.n,
                each: self.each,
            }
        }
    }
    impl<'de> DeserializeSeed<'de> for Count<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Count<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(self.again())?.is_some() {
                self.one()?;
            }
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
            while map.next_key::<IgnoredAny>()?.is_some() {
                map.next_value_seed(self.again())?;
                self.one()?;
            }
            Ok(())
        }
    }
    let mut n = 1;
    let mut d = serde_json::Deserializer::from_slice(raw);
    let counted = Count { n: &mut n, each }.deserialize(&mut d).and_then(|()| d.end());
    if let Err(e) = counted {
        return Err(refused().map_or(JsonCharge::Json(e), JsonCharge::Memory));
    }
    charge((n % CHARGE_EVERY).saturating_mul(each)).map_err(JsonCharge::Memory)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug)]
    struct Left(AtomicUsize);

    impl Pool for Left {
        fn take(&self, bytes: usize) -> bool {
            self.0
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| left.checked_sub(bytes))
                .is_ok()
        }
        fn give(&self, bytes: usize) {
            self.0.fetch_add(bytes, Ordering::AcqRel);
        }
    }

    #[test]
    fn a_meter_stops_at_its_limit_and_at_the_pool_and_gives_back_on_drop() {
        let pool = Arc::new(Left(AtomicUsize::new(80)));
        let mut a = Meter::new(60, Some(pool.clone()));
        assert_eq!(a.charge(50), Ok(()));
        assert_eq!(a.charge(20), Err(Spent::Request { limit: 60 }));
        // Refused once, refused after: a decoder that ignored the first error stops anyway.
        assert_eq!(a.charge(1), Err(Spent::Request { limit: 60 }));
        let mut b = Meter::new(60, Some(pool.clone()));
        assert_eq!(b.charge(50), Err(Spent::Shared));
        drop(a);
        assert_eq!(pool.0.load(Ordering::Acquire), 80);
        let mut c = Meter::new(60, Some(pool.clone()));
        c.charge(40).unwrap();
        c.release(10);
        assert_eq!((c.charged(), pool.0.load(Ordering::Acquire)), (30, 50));
    }

    #[derive(serde::Deserialize)]
    struct Lists {
        #[serde(default, deserialize_with = "vec")]
        items: Vec<Option<u8>>,
        #[serde(default, deserialize_with = "map")]
        tags: std::collections::HashMap<String, String>,
    }

    #[test]
    fn serde_lists_and_maps_are_charged_element_by_element() {
        let body = br#"{"items":[null,null,null],"tags":{"a":"b"}}"#;
        let mut meter = Meter::unbounded();
        let lists: Lists = metered(&mut meter, || serde_json::from_slice(body)).unwrap();
        assert_eq!((lists.items.len(), lists.tags.len()), (3, 1));
        // Four element charges (the fourth finds the end) and two entry charges.
        let per_item = element::<Option<u8>>();
        let per_tag = element::<(String, String)>() + 3;
        // "a" and "b" each a 32-byte heap block.
        assert_eq!(meter.charged(), 4 * per_item + 2 * per_tag + 2 * 32);

        let many = format!(r#"{{"items":[{}null]}}"#, "null,".repeat(10_000));
        let mut small = Meter::new(1_000, None);
        let refused = metered(&mut small, || serde_json::from_slice::<Lists>(many.as_bytes()));
        assert!(refused.is_err());
        assert_eq!(small.refused(), Some(Spent::Request { limit: 1_000 }));
        assert!(small.charged() <= 1_000);
    }
}
