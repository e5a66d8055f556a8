//! Which cluster a point names, shared by the Data Streams intake and the
//! spans' failed sends.

/// Whether `cluster` is the default cluster (where points that name none are
/// kept) or one of its per-env copies, `DEFAULT/ENV`: never a named one.
pub fn is_default_cluster(cluster: &str, default_cluster: &str) -> bool {
    cluster
        .strip_prefix(default_cluster)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}
