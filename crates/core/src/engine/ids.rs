//! Ids the engine hands out, and the table of names they stand for.

use super::*;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionId(pub(crate) u32);
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(pub(crate) u32);
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupPartitionId(pub(crate) u32);
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct TopicId(pub(crate) u32);
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct NameId(pub(crate) u32);

/// Strings stored once: clusters, topics and groups are referred to by number.
#[derive(Debug, Default)]
pub(super) struct Names {
    pub(super) ids: Map<Box<str>, NameId>,
    pub(super) names: Vec<Box<str>>,
}

impl Names {
    pub(super) fn intern(&mut self, name: &str) -> NameId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = NameId(index_u32(self.names.len()));
        self.names.push(name.into());
        self.ids.insert(name.into(), id);
        id
    }

    pub(super) fn get(&self, name: &str) -> Option<NameId> {
        self.ids.get(name).copied()
    }

    pub(super) fn name(&self, id: NameId) -> &str {
        &self.names[id.0 as usize]
    }
}

pub(super) fn index_u32(len: usize) -> u32 {
    u32::try_from(len).expect("more than 4 billion entries")
}
