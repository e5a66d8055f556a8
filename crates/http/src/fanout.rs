//! Any node of a sharded log answers any query: it answers for the shards it
//! holds itself and asks the nodes that hold the others (by the directory),
//! each for its shards only (`shards=1,4` in the query: answer locally for
//! these, and say in `held` which of them you hold). A shard nobody holds, or
//! whose node does not answer, is named in the answer's `shards.missing`:
//! the answer is never silently smaller.

use crate::error::{ApiError, ErrorKind};
use axum::http::HeaderValue;
use axum::response::IntoResponse;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use streamsight_node::Shared;
use streamsight_node::telemetry::Failure;
use streamsight_store::directory::Owner;

/// How long a node waits for another's part of an answer.
const PEER_TIMEOUT: Duration = Duration::from_secs(5);
/// A part larger than this is refused: a peer is another node, not a friend.
const MAX_PART_BYTES: usize = 256 << 20;

/// What a node answers for the shards it was asked for.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part<T> {
    pub rows: Vec<T>,
    /// Which of the shards asked for it holds: the rest are not in `rows`.
    pub held: BTreeSet<u32>,
}

/// Which shards an answer covers.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Coverage {
    /// The log's shard count.
    pub count: u32,
    /// Shards nobody answered for: what they hold is not in the answer.
    pub missing: Vec<u32>,
    /// Who answered for what.
    pub nodes: Vec<Asked>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Asked {
    pub node: String,
    pub shards: Vec<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The whole of a query that reads rows of the shards, on any node: this
/// node's part when another asks for it (`asked`, its `shards=`), else every
/// shard's rows gathered from `peer_path` with the caller's `query` and
/// credentials, put together by `build` with the coverage (None when the log
/// is not sharded: then the rows are all this node's).
pub async fn answer<T, F, B>(
    shared: Arc<Shared>,
    peer_path: &str,
    asked: Option<String>,
    query: Option<String>,
    headers: &axum::http::HeaderMap,
    local: F,
    build: B,
) -> axum::response::Response
where
    T: Serialize + DeserializeOwned + Send + 'static,
    F: FnOnce(&Shared, Option<&BTreeSet<u32>>) -> Vec<T> + Send + 'static,
    B: FnOnce(Vec<T>, Option<Coverage>) -> axum::response::Response,
{
    if let Some(asked) = asked {
        return part(shared, &asked, local).await;
    }
    let (rows, coverage) = gather(
        &shared,
        peer_path,
        query.as_deref().unwrap_or(""),
        &credentials(headers),
        local,
    )
    .await;
    let coverage = shared.sharded().then_some(coverage);
    build(rows, coverage)
}

/// What a node passes on of its caller's request: its key, and the tenant a
/// trusted gateway named (the other nodes must trust this one as a gateway).
type Credentials = Vec<(axum::http::HeaderName, HeaderValue)>;

pub fn credentials(headers: &axum::http::HeaderMap) -> Credentials {
    [
        axum::http::header::AUTHORIZATION,
        axum::http::HeaderName::from_static("x-scope-orgid"),
    ]
    .into_iter()
    .filter_map(|name| headers.get(&name).map(|v| (name, v.clone())))
    .collect()
}

/// Marks a request one node forwarded to another: answered where it lands.
const FORWARDED: &str = "streamsight-forwarded";

/// A request about one topic, sent to the node holding the topic's shard.
enum Sent<'a> {
    /// The same GET.
    Get(&'a axum::http::Uri),
    /// A POST to a path of the JSON body made by the function (made only
    /// when another node is asked).
    Post(&'a str, &'a (dyn Fn() -> Vec<u8> + Sync)),
}

/// For a read about one topic: None when this node answers it (it holds the
/// topic's shard, or the log is not sharded); else the answer of the node that
/// holds the shard, or 503 naming the shard when no live node does (or it
/// moved while forwarded).
pub async fn forward(
    shared: &Shared,
    topic: &str,
    uri: &axum::http::Uri,
    headers: &axum::http::HeaderMap,
) -> Option<axum::response::Response> {
    to_holder(shared, topic, headers, Sent::Get(uri)).await
}

/// The same for what is computed where `topic`'s shard is from a body this
/// node made: `body()` POSTed to `path` on the node holding the shard.
pub async fn post_to_holder(
    shared: &Shared,
    topic: &str,
    path: &str,
    headers: &axum::http::HeaderMap,
    body: &(dyn Fn() -> Vec<u8> + Sync),
) -> Option<axum::response::Response> {
    to_holder(shared, topic, headers, Sent::Post(path, body)).await
}

async fn to_holder(
    shared: &Shared,
    topic: &str,
    headers: &axum::http::HeaderMap,
    sent: Sent<'_>,
) -> Option<axum::response::Response> {
    let directory = shared.directory.get()?;
    let shard = streamsight_core::record::shard_of(topic, directory.shards());
    let unavailable = |why: String| ApiError::new(ErrorKind::ShardUnavailable, &why).into_response();
    match directory.owners().into_iter().nth(shard as usize).flatten() {
        Some(Owner::Local) => None,
        // Forwarded once only: a node that no longer holds the shard says so
        // rather than answering from nothing.
        _ if headers.contains_key(FORWARDED) => Some(unavailable(format!(
            "shard {shard} (topic {topic:?}) moved while the request was forwarded; try again shortly"
        ))),
        None => Some(unavailable(format!(
            "shard {shard} (topic {topic:?}) is held by no live node; try again shortly"
        ))),
        Some(Owner::Peer { node, api }) => {
            let mut credentials = credentials(headers);
            credentials.push((
                axum::http::HeaderName::from_static(FORWARDED),
                HeaderValue::from_static("1"),
            ));
            let answered = match sent {
                Sent::Get(uri) => {
                    get(
                        &api,
                        uri.path_and_query().map_or(uri.path(), |p| p.as_str()),
                        credentials,
                    )
                    .await
                }
                Sent::Post(path, body) => post(&api, path, credentials, body()).await,
            };
            Some(match answered {
                Ok((status, body)) => {
                    (status, [(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response()
                }
                Err(e) => unavailable(format!(
                    "shard {shard} (topic {topic:?}) is held by {node}, which did not answer: {e}"
                )),
            })
        }
    }
}

/// This node's part of another's query: rows of the shards asked for that it
/// holds, and which those are.
pub async fn part<T, F>(shared: Arc<Shared>, asked: &str, local: F) -> axum::response::Response
where
    T: Serialize + Send + 'static,
    F: FnOnce(&Shared, Option<&BTreeSet<u32>>) -> Vec<T> + Send + 'static,
{
    let Some(directory) = shared.directory.get() else {
        return ApiError::new(
            ErrorKind::BadQuery,
            "shards= is for the nodes of a sharded log, and this node's is not",
        )
        .into_response();
    };
    let asked = match parse_shards(asked, directory.shards()) {
        Ok(asked) => asked,
        Err(e) => return ApiError::new(ErrorKind::BadQuery, &e).into_response(),
    };
    let held: BTreeSet<u32> = directory.held().intersection(&asked).copied().collect();
    crate::server::off_worker(shared, move |shared| {
        let rows = local(shared, Some(&held));
        axum::Json(Part { rows, held }).into_response()
    })
    .await
}

/// Whether `topic`'s records are in one of `shards` (all of them when None).
pub fn in_shards(shared: &Shared, shards: Option<&BTreeSet<u32>>, topic: &str) -> bool {
    match (shards, shared.directory.get()) {
        (Some(shards), Some(directory)) => {
            shards.contains(&streamsight_core::record::shard_of(topic, directory.shards()))
        }
        _ => true,
    }
}

/// The group's partitions whose topics are in `shards` (all when None), with
/// its id; None when the engine does not know the group.
pub fn group_in_shards(
    shared: &Shared,
    engine: &streamsight_core::Engine,
    cluster: &str,
    group: &str,
    shards: Option<&BTreeSet<u32>>,
) -> Option<(streamsight_core::GroupId, Vec<streamsight_core::GroupPartitionId>)> {
    let gid = engine.find_group(cluster, group)?;
    let members = engine
        .group_members(gid)
        .iter()
        .copied()
        .filter(|&gp| in_shards(shared, shards, engine.names(gp).topic))
        .collect();
    Some((gid, members))
}

/// `name` as one path segment: every byte but RFC 3986's unreserved ones
/// percent-encoded, so that a name with `/`, `?` or `#` stays one segment
/// (a group may be named anything). The CLI's client uses it too.
pub fn segment(name: &str) -> String {
    use std::fmt::Write;
    name.bytes().fold(String::with_capacity(name.len()), |mut out, b| {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
        out
    })
}

/// `shards=1,4,7` of a query: the shards a peer asks this node to answer for.
pub fn parse_shards(text: &str, count: u32) -> Result<BTreeSet<u32>, String> {
    text.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>()
                .ok()
                .filter(|n| *n < count)
                .ok_or_else(|| format!("shard {s:?} is not one of 0..{count}"))
        })
        .collect()
}

fn client() -> &'static reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .timeout(PEER_TIMEOUT)
            .connect_timeout(Duration::from_secs(1))
            .build()
            .unwrap_or_default()
    })
}

/// GETs `path_and_query` of the node at `api` with `headers`: its status and
/// body, refused once the body is over [`MAX_PART_BYTES`] as it arrives.
async fn get(api: &str, path_and_query: &str, headers: Credentials) -> Result<(reqwest::StatusCode, Vec<u8>), String> {
    send(client().get(format!("{api}{path_and_query}")), headers).await
}

/// The same for a POST of a JSON `body`.
async fn post(
    api: &str,
    path: &str,
    headers: Credentials,
    body: Vec<u8>,
) -> Result<(reqwest::StatusCode, Vec<u8>), String> {
    let request = client()
        .post(format!("{api}{path}"))
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(body);
    send(request, headers).await
}

async fn send(
    mut request: reqwest::RequestBuilder,
    headers: Credentials,
) -> Result<(reqwest::StatusCode, Vec<u8>), String> {
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let mut response = request.send().await.map_err(|e| e.without_url().to_string())?;
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.without_url().to_string())? {
        if body.len() + chunk.len() > MAX_PART_BYTES {
            return Err(format!("answered more than {MAX_PART_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((response.status(), body))
}

/// A peer's part of a gathered read.
async fn fetch<T: DeserializeOwned>(
    api: &str,
    path_and_query: &str,
    credentials: Credentials,
) -> Result<Part<T>, String> {
    let (status, body) = get(api, path_and_query, credentials).await?;
    if !status.is_success() {
        return Err(format!("answered {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("answered something else: {e}"))
}

/// Gathers `T` rows for every shard: `local` answers for this node's shards (on
/// a blocking thread), the nodes holding the others are asked at `path` with
/// `query` (URL-encoded, without `shards`).
pub async fn gather<T, F>(
    shared: &Arc<Shared>,
    path: &str,
    query: &str,
    credentials: &Credentials,
    local: F,
) -> (Vec<T>, Coverage)
where
    T: DeserializeOwned + Send + 'static,
    F: FnOnce(&Shared, Option<&BTreeSet<u32>>) -> Vec<T> + Send + 'static,
{
    let blocking = |shards: Option<BTreeSet<u32>>| {
        let shared = shared.clone();
        async move {
            let answering = shared.clone();
            tokio::task::spawn_blocking(move || local(&answering, shards.as_ref()))
                .await
                .unwrap_or_else(|e| {
                    shared.telemetry.failed(Failure::Fanout, &e);
                    Vec::new()
                })
        }
    };
    let Some(directory) = shared.directory.get() else {
        return (blocking(None).await, Coverage::default());
    };
    let owners = directory.owners();
    let mut coverage = Coverage {
        count: directory.shards(),
        ..Coverage::default()
    };
    // Rows of a shard this node answers for are not asked of anyone else, and
    // a peer answers only for the shards it was asked for.
    let mut mine = BTreeSet::new();
    let mut peers: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for (shard, owner) in owners.into_iter().enumerate() {
        let shard = shard as u32;
        match owner {
            Some(Owner::Local) => {
                mine.insert(shard);
            }
            Some(Owner::Peer { node, api }) => peers.entry((node, api)).or_default().push(shard),
            None => {}
        }
    }
    let mut asks = tokio::task::JoinSet::new();
    for ((node, api), shards) in peers {
        let list: Vec<String> = shards.iter().map(u32::to_string).collect();
        let sep = if query.is_empty() { "" } else { "&" };
        let path_and_query = format!("{path}?{query}{sep}shards={}", list.join(","));
        let credentials = credentials.clone();
        asks.spawn(async move {
            let part = fetch::<T>(&api, &path_and_query, credentials).await;
            (node, shards, part)
        });
    }
    let mut rows = blocking(Some(mine.clone())).await;
    let mut covered = mine.clone();
    let mut parts = Vec::new();
    while let Some(done) = asks.join_next().await {
        match done {
            Ok(part) => parts.push(part),
            Err(e) => shared.telemetry.failed(Failure::Fanout, &e),
        }
    }
    parts.sort_by(|a, b| a.0.cmp(&b.0));
    if !mine.is_empty() {
        coverage.nodes.push(Asked {
            node: directory.node().to_owned(),
            shards: mine.into_iter().collect(),
            error: None,
        });
    }
    for (node, shards, part) in parts {
        match part {
            Ok(part) => {
                let unheld: Vec<u32> = shards.iter().copied().filter(|s| !part.held.contains(s)).collect();
                covered.extend(shards.iter().filter(|s| part.held.contains(s)));
                rows.extend(part.rows);
                coverage.nodes.push(Asked {
                    node,
                    shards: shards.into_iter().filter(|s| part.held.contains(s)).collect(),
                    error: (!unheld.is_empty()).then(|| format!("does not hold shards {unheld:?} any more")),
                });
            }
            Err(e) => {
                tracing::debug!(%node, error = %e, "a node did not answer for its shards");
                coverage.nodes.push(Asked {
                    node,
                    shards: Vec::new(),
                    error: Some(e),
                });
            }
        }
    }
    // Whatever was not answered for, however it went missing.
    coverage.missing = (0..coverage.count).filter(|s| !covered.contains(s)).collect();
    (rows, coverage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_lists_are_checked() {
        assert_eq!(parse_shards("0,3,5", 6).unwrap(), BTreeSet::from([0, 3, 5]));
        assert!(parse_shards("6", 6).is_err());
        assert!(parse_shards("x", 6).is_err());
        assert!(parse_shards("", 6).unwrap().is_empty());
    }

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("billing-v2.eu_1~"), "billing-v2.eu_1~");
        assert_eq!(segment("a/b c?é"), "a%2Fb%20c%3F%C3%A9");
    }
}
