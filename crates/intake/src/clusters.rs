//! Which cluster a point names, shared by the Data Streams intake and the
//! spans' failed sends.

/// Whether `cluster` is the default cluster (where points that name none are
/// kept) or one of its per-env copies, `DEFAULT/ENV`: never a named one.
fn is_default_cluster(cluster: &str, default_cluster: &str) -> bool {
    cluster
        .strip_prefix(default_cluster)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The one named cluster among `clusters` (those the engine holds a topic
/// in), where exactly one is: only a cluster a tracer or the poller named
/// counts, never a default one, whichever env.
pub fn the_one_named<'a>(clusters: impl Iterator<Item = &'a str>, default_cluster: &str) -> Option<String> {
    let mut named = clusters.filter(|c| !is_default_cluster(c, default_cluster));
    match (named.next(), named.next()) {
        (Some(only), None) => Some(only.to_owned()),
        _ => None,
    }
}
