//! How both listeners serve HTTP: a cap on open connections, a deadline for
//! headers (and for idle kept-alive connections), one for each request, and a
//! cap on requests in flight. Over a cap the answer is 503 with `Retry-After`
//! at once, never a queue that grows with the attack.

use crate::auth::{Caller, KeyState, ReloadingKeys, Scope};
use crate::error::{ApiError, ErrorKind};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::IntoResponse;
use axum::response::Response;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::Arc;
use std::time::Duration;
use streamsight_core::Limit;
use streamsight_node::Shared;
use streamsight_node::telemetry::{Failure, IntakeEvent, Refusal};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

/// What one listener enforces, from `[serve.limits]`.
#[derive(Clone, Debug)]
pub struct Guard {
    pub name: &'static str,
    /// Requests in flight, per tenant: one tenant's flood never takes another's
    /// places. Fixed at start (unknown tenants share `default`'s, and are
    /// refused when dispatched).
    in_flight: Arc<std::collections::HashMap<String, Arc<Semaphore>>>,
    max_connections: usize,
    header_timeout: Duration,
    request_timeout: Duration,
    /// Host names this listener answers to; `None` answers any.
    hosts: Option<Arc<Vec<String>>>,
    tls: Option<Arc<crate::tls::Reloading>>,
    auth: Option<Auth>,
    /// Paths answered without a key: they carry no data (the dashboard's pages).
    public: fn(&str) -> bool,
    /// This listener's requests' time (`streamsight_request_seconds`).
    requests: Arc<streamsight_node::timings::Histogram>,
    shared: Arc<Shared>,
    /// Each tenant's node: a refusal is counted where its team reads it.
    nodes: Arc<std::collections::HashMap<String, Arc<Shared>>>,
    failed_auth: Arc<FailedAuth>,
}

impl Guard {
    pub fn new(name: &'static str, shared: Arc<Shared>) -> Self {
        let limits = &shared.config.limits;
        Self {
            name,
            in_flight: Arc::new(std::collections::HashMap::from([(
                streamsight_node::config::DEFAULT_TENANT.to_owned(),
                Arc::new(Semaphore::new(limits.max_in_flight.max(1))),
            )])),
            max_connections: limits.max_connections.max(1),
            header_timeout: limits.header_timeout,
            request_timeout: limits.request_timeout,
            hosts: None,
            tls: None,
            auth: None,
            public: |_| false,
            requests: shared.timings.listener(name),
            nodes: Arc::default(),
            failed_auth: Arc::default(),
            shared,
        }
    }

    /// Answers `public` paths without a key.
    pub fn public_paths(mut self, public: fn(&str) -> bool) -> Self {
        self.public = public;
        self
    }

    /// On a loopback listener, answers only `Host`s that name loopback or one of
    /// `extra`: a web page whose name was rebound to 127.0.0.1 still sends its
    /// own name, and is refused.
    pub fn loopback_hosts(mut self, addr: std::net::SocketAddr) -> Self {
        if addr.ip().is_loopback() {
            let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "[::1]".to_owned()];
            let extra = &self.shared.config.limits.api_hosts;
            hosts.extend(extra.iter().map(|h| h.to_ascii_lowercase()));
            self.hosts = Some(Arc::new(hosts));
        }
        self
    }

    /// Gives each of `tenants` its own `max_in_flight` places, and counts
    /// each one's refusals on its own node.
    pub fn tenants<'a>(mut self, tenants: impl IntoIterator<Item = (&'a String, &'a Arc<Shared>)>) -> Self {
        let max = self.shared.config.limits.max_in_flight.max(1);
        let tenants: Vec<_> = tenants.into_iter().collect();
        self.in_flight = Arc::new(
            tenants
                .iter()
                .map(|(t, _)| ((*t).clone(), Arc::new(Semaphore::new(max))))
                .collect(),
        );
        self.nodes = Arc::new(tenants.into_iter().map(|(t, s)| (t.clone(), s.clone())).collect());
        self
    }

    fn places(&self, request: &Request) -> Option<Arc<Semaphore>> {
        self.in_flight
            .get(Caller::tenant_of(request))
            .or_else(|| self.in_flight.get(streamsight_node::config::DEFAULT_TENANT))
            .cloned()
    }

    /// Serves TLS (handshake within `header_timeout`) when `tls` is set.
    pub fn tls(mut self, tls: Option<Arc<crate::tls::Reloading>>) -> Self {
        self.tls = tls;
        self
    }

    /// Asks for a key allowing `needed` (once the keys file holds any); with
    /// `open_tenant`, a request without a key belongs to that tenant instead.
    pub fn auth(mut self, keys: Arc<ReloadingKeys>, needed: Scope, open_tenant: Option<String>) -> Self {
        let trusted = Arc::new(self.shared.config.trusted_proxies.clone());
        self.auth = Some(Auth {
            keys,
            needed,
            open_tenant,
            trusted,
            bound: None,
            peers: Arc::default(),
        });
        self
    }

    /// Takes the peer keys the nodes of these tenants' sharded logs announce
    /// (read only, for the tenant whose log's node presents it).
    pub fn peers(mut self, tenants: Vec<(String, Arc<Shared>)>) -> Self {
        if let Some(auth) = self.auth.as_mut() {
            auth.peers = Arc::new(tenants);
        }
        self
    }

    /// Every request on this listener belongs to `tenant`, with or without a key.
    pub fn bound_to(mut self, tenant: String) -> Self {
        if let Some(auth) = self.auth.as_mut() {
            auth.bound = Some(tenant);
        }
        self
    }

    fn limited(&self, limit: Limit) {
        self.shared.telemetry.emit(IntakeEvent::Limited {
            limit,
            listener: self.name,
        });
    }
}

/// The address a connection came from.
#[derive(Copy, Clone, Debug)]
struct Peer(std::net::SocketAddr);

/// The address a connection was accepted on (`None` on a Unix socket): what
/// a handler that names its own port (`/info`) reads.
#[derive(Copy, Clone, Debug)]
pub struct Local(pub Option<std::net::SocketAddr>);

/// The header a trusted gateway names the tenant with (Grafana Mimir's, Loki's).
const SCOPE_HEADER: &str = "x-scope-orgid";

#[derive(Clone, Debug)]
struct Auth {
    keys: Arc<ReloadingKeys>,
    needed: Scope,
    open_tenant: Option<String>,
    trusted: Arc<Vec<std::net::IpAddr>>,
    /// Everything on this listener is this tenant's, key or not.
    bound: Option<String>,
    /// Tenants whose sharded logs' nodes may ask with their peer keys.
    peers: Arc<Vec<(String, Arc<Shared>)>>,
}

impl Auth {
    /// The node of a tenant's sharded log that announced `secret`'s hash:
    /// a read-only caller of that tenant.
    fn peer(&self, secret: &str) -> Option<Caller> {
        if secret.len() != 64 {
            return None;
        }
        let sha256 = streamsight_node::secrets::digest(secret);
        self.peers.iter().find_map(|(tenant, shared)| {
            let keys = shared.directory.get()?.peer_keys();
            let (node, _) = keys.into_iter().find(|(_, announced)| {
                streamsight_node::secrets::constant_time_eq(announced.as_bytes(), sha256.as_bytes())
            })?;
            Some(Caller {
                tenant: tenant.clone(),
                scope: Scope::Read,
                key_id: format!("peer:{node}"),
            })
        })
    }

    /// The caller, or the answer refusing the request.
    fn check(&self, request: &Request) -> Result<Option<Caller>, Box<Response>> {
        if let Some(tenant) = &self.bound {
            return Ok(Some(Caller::keyless(tenant.clone(), self.needed)));
        }
        // A gateway in front (one of `trusted_proxies`) has authenticated the
        // caller and names its tenant; from anyone else the header means nothing.
        let peer = request.extensions().get::<Peer>().map(|p| p.0.ip());
        if let Some(tenant) = request.headers().get(SCOPE_HEADER).and_then(|v| v.to_str().ok())
            && peer.is_some_and(|ip| self.trusted.contains(&ip))
        {
            return Ok(Some(Caller::keyless(tenant.trim().to_owned(), self.needed)));
        }
        let keys = match self.keys.state() {
            KeyState::Open => return Ok(None),
            KeyState::Keyed(keys) => Some(keys),
            KeyState::Locked(_) => None,
        };
        let token = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer);
        let unauthorized = |message: &str| {
            ApiError::new(ErrorKind::Unauthorized, message)
                .challenge("Bearer")
                .into_response()
        };
        if let Some(secret) = token.and_then(|t| t.trim().strip_prefix(crate::auth::PEER_PREFIX)) {
            return self
                .peer(secret)
                .ok_or_else(|| Box::new(unauthorized("not the key of a live node of this log")))
                .and_then(|caller| {
                    if caller.scope.allows(self.needed) {
                        Ok(Some(caller))
                    } else {
                        Err(Box::new(
                            ApiError::new(ErrorKind::Forbidden, "a node's peer key only reads").into_response(),
                        ))
                    }
                });
        }
        let Some(keys) = keys else {
            // Locked: no live key. A keyless intake said on purpose
            // (`intake_tenant`) stays what it was; nothing else is let in.
            return match (&self.open_tenant, token) {
                (Some(tenant), None) => Ok(Some(Caller::keyless(tenant.clone(), self.needed))),
                _ => Err(Box::new(unauthorized(crate::auth::NO_LIVE_KEY))),
            };
        };
        match token.map(|t| (t, keys.verify(t))) {
            Some((_, Some(caller))) if caller.scope.allows(self.needed) => Ok(Some(caller)),
            Some((_, Some(caller))) => {
                let mut refused = ApiError::new(
                    ErrorKind::Forbidden,
                    format!(
                        "a {} key cannot do this; it needs {}",
                        caller.scope.as_str(),
                        self.needed.as_str()
                    ),
                )
                .into_response();
                refused.extensions_mut().insert(caller);
                Err(Box::new(refused))
            }
            Some((t, None)) => {
                let mut refused = unauthorized("the key is not valid (unknown, revoked or mistyped)");
                // A key this file holds (a revoked one, a mistyped secret):
                // counted for its tenant, by its id.
                if let Some((tenant, key_id)) = keys.named(t) {
                    refused.extensions_mut().insert(Caller {
                        tenant,
                        scope: self.needed,
                        key_id,
                    });
                }
                Err(Box::new(refused))
            }
            None => match &self.open_tenant {
                Some(tenant) => Ok(Some(Caller::keyless(tenant.clone(), self.needed))),
                None => Err(Box::new(unauthorized("this listener needs Authorization: Bearer KEY"))),
            },
        }
    }

    /// Whether every request is refused for want of a live key.
    fn locked(&self) -> bool {
        self.bound.is_none() && matches!(self.keys.state(), KeyState::Locked(_))
    }
}

/// The credentials of an `Authorization` value of the Bearer scheme, whose
/// name is case-insensitive (RFC 7235 §2.1).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, credentials) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credentials.trim())
        .filter(|c| !c.is_empty())
}

/// Failed authentication, said at most once a minute for each peer with the
/// count since it was last said: a thousand bad keys are one line, not none
/// and not a thousand.
#[derive(Debug, Default)]
struct FailedAuth {
    /// By peer: when it was last said (unix seconds), and failures since.
    by_peer: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, (u64, u64)>>,
}

impl FailedAuth {
    /// Peers remembered at most: beyond, those said over a minute ago go.
    const MAX_PEERS: usize = 4096;

    /// The failures to say now for `peer`, when it is time to say them.
    fn note(&self, peer: std::net::IpAddr, now_s: u64) -> Option<u64> {
        let mut by_peer = streamsight_node::sync::lock(&self.by_peer);
        if by_peer.len() >= Self::MAX_PEERS && !by_peer.contains_key(&peer) {
            by_peer.retain(|_, (said, _)| now_s.saturating_sub(*said) < 60);
            if by_peer.len() >= Self::MAX_PEERS {
                return None;
            }
        }
        let (said, unsaid) = by_peer.entry(peer).or_insert((0, 0));
        *unsaid += 1;
        if *said == 0 || now_s.saturating_sub(*said) >= 60 {
            let n = *unsaid;
            (*said, *unsaid) = (now_s.max(1), 0);
            Some(n)
        } else {
            None
        }
    }
}

/// Resolves once the collector is told to stop.
pub async fn stopped(mut stop: watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

/// Serves `router` on `listener` under `guard` until `stop`; then stops
/// accepting, lets requests under way finish and returns.
pub async fn serve(listener: Listener, routes: Routes, guard: Guard, stop: watch::Receiver<bool>) {
    let router = Router::new()
        .fallback(dispatch)
        .with_state(routes)
        .layer(middleware::from_fn_with_state(guard.clone(), per_request));
    let connections = Arc::new(Semaphore::new(guard.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(guard.header_timeout);
    let mut open = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stopped(stop.clone()) => break,
        };
        // Reap finished connections so the set does not grow.
        while open.try_join_next().is_some() {}
        let stream = match accepted {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors, say: back off rather than spin.
                guard.shared.telemetry.failed(Failure::Accept, &e);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            guard.limited(Limit::Connections);
            open.spawn(refuse(stream));
            continue;
        };
        let service = router.clone();
        let (http, stop, tls, handshake) = (http.clone(), stop.clone(), guard.tls.clone(), guard.header_timeout);
        open.spawn(async move {
            match (stream, tls) {
                (Accepted::Unix(stream), _) => {
                    // Not a network peer: never a trusted proxy.
                    let peer = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
                    connection(&http, TokioIo::new(stream), service, (peer, None), stop).await;
                }
                (Accepted::Tcp(stream, peer), None) => {
                    let local = stream.local_addr().ok();
                    connection(&http, TokioIo::new(stream), service, (peer, local), stop).await;
                }
                (Accepted::Tcp(stream, peer), Some(tls)) => {
                    let local = stream.local_addr().ok();
                    match tokio::time::timeout(handshake, tls.acceptor().accept(stream)).await {
                        Ok(Ok(stream)) => {
                            connection(&http, TokioIo::new(stream), service, (peer, local), stop).await;
                        }
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
            drop(permit);
        });
    }
    while open.join_next().await.is_some() {}
}

/// Serves one connection until it ends or the collector stops (then the request
/// under way is answered first).
async fn connection<I>(
    http: &hyper::server::conn::http1::Builder,
    io: TokioIo<I>,
    router: Router,
    (peer, local): (std::net::SocketAddr, Option<std::net::SocketAddr>),
    stop: watch::Receiver<bool>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tower::ServiceExt;
    // Who is at the other end: a trusted proxy may name the tenant.
    let router = router.map_request(move |mut request: hyper::Request<hyper::body::Incoming>| {
        request.extensions_mut().insert(Peer(peer));
        request.extensions_mut().insert(Local(local));
        request
    });
    let service = hyper_util::service::TowerToHyperService::new(router);
    let conn = http.serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        () = stopped(stop) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Each tenant's routes: a request goes to its caller's tenant, so a handler only
/// ever sees one tenant's services.
pub type Routes = Arc<std::collections::HashMap<String, Router>>;

async fn dispatch(State(routes): State<Routes>, request: Request) -> Response {
    use tower::ServiceExt;
    let Some(router) = routes.get(Caller::tenant_of(&request)).cloned() else {
        // A key of a tenant no longer configured: nothing of anyone else's.
        return ApiError::new(ErrorKind::UnknownTenant, "this key's tenant is not configured").into_response();
    };
    match router.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// Where a server takes connections: a TCP address or a Unix socket.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Unix(tokio::net::UnixListener),
}

#[derive(Debug)]
enum Accepted {
    Tcp(tokio::net::TcpStream, std::net::SocketAddr),
    Unix(tokio::net::UnixStream),
}

impl Listener {
    async fn accept(&self) -> std::io::Result<Accepted> {
        match self {
            Listener::Tcp(l) => l.accept().await.map(|(s, peer)| Accepted::Tcp(s, peer)),
            Listener::Unix(l) => l.accept().await.map(|(s, _)| Accepted::Unix(s)),
        }
    }
}

/// Answers a connection over the cap without reading it, and closes it.
async fn refuse(stream: Accepted) {
    match stream {
        Accepted::Tcp(s, _) => refuse_on(s).await,
        Accepted::Unix(s) => refuse_on(s).await,
    }
}

async fn refuse_on(mut stream: impl tokio::io::AsyncWrite + Unpin) {
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\nContent-Length: 62\r\nConnection: close\r\n\r\n{\"error\":\"overloaded\",\"message\":\"too many open connections\"}\n";
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(BUSY)).await;
}

/// Host check, in-flight cap and deadline, for every request.
/// Every request through the guard; every refusal counted by its kind.
async fn per_request(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let began = std::time::Instant::now();
    let peer = request.extensions().get::<Peer>().map(|p| p.0.ip());
    let response = guarded(&guard, request, next).await;
    guard.requests.observe(began.elapsed());
    if let Some(kind) = response.extensions().get::<ErrorKind>() {
        // Counted on the node of the tenant it concerns (the key's, when
        // one was named), by key id: what that team's read keys see.
        let caller = response.extensions().get::<Caller>();
        let node = caller.and_then(|c| guard.nodes.get(&c.tenant)).unwrap_or(&guard.shared);
        node.telemetry.refused(Refusal {
            listener: guard.name,
            kind: kind.as_str(),
            status: response.status().as_u16(),
            key_id: caller.map(|c| c.key_id.as_str()).filter(|id| !id.is_empty()),
        });
        if matches!(
            kind,
            ErrorKind::Unauthorized | ErrorKind::Forbidden | ErrorKind::UnknownTenant
        ) && let Some(peer) = peer
        {
            let now_s = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            if let Some(failures) = guard.failed_auth.note(peer, now_s) {
                tracing::warn!(
                    listener = guard.name,
                    %peer,
                    failures,
                    kind = kind.as_str(),
                    key_id = caller.map_or("", |c| c.key_id.as_str()),
                    "authentication failed (said at most once a minute for each peer, with the count since)"
                );
            }
        }
    }
    response
}

async fn guarded(guard: &Guard, request: Request, next: Next) -> Response {
    if let Some(hosts) = &guard.hosts
        && let Some(host) = request.headers().get(header::HOST)
        && !host_allowed(host.as_bytes(), hosts)
    {
        return ApiError::new(
            ErrorKind::HostNotAllowed,
            "this listener answers loopback host names only (see limits.api_hosts)",
        )
        .into_response();
    }
    // Probes stay answerable while the API is busy, and without a key.
    let probe = matches!(request.uri().path(), "/healthz" | "/readyz");
    let mut request = request;
    // Dashboard pages carry no data: a browser loads them, then asks for a key.
    let public = probe || (guard.public)(request.uri().path());
    if let Some(auth) = &guard.auth
        && auth.locked()
    {
        // No live key where one is required: the probes say so, the rest
        // (the dashboard's pages too) is refused. An intake that takes
        // keyless tracers on purpose (`intake_tenant`) still serves them.
        if request.uri().path() == "/readyz" && auth.open_tenant.is_none() {
            return ApiError::new(ErrorKind::NoLiveKeys, crate::auth::NO_LIVE_KEY).into_response();
        }
        if public && !probe {
            return ApiError::new(ErrorKind::Unauthorized, crate::auth::NO_LIVE_KEY)
                .challenge("Bearer")
                .into_response();
        }
    }
    if !public && let Some(auth) = &guard.auth {
        match auth.check(&request) {
            Ok(Some(caller)) => {
                request.extensions_mut().insert(caller);
            }
            Ok(None) => {}
            Err(refused) => return *refused,
        }
    }
    let permit = if probe {
        None
    } else {
        match guard.places(&request).map(Semaphore::try_acquire_owned) {
            Some(Ok(p)) => Some(p),
            None => None,
            Some(Err(_)) => {
                guard.limited(Limit::InFlight);
                return ApiError::new(ErrorKind::Overloaded, "too many requests in flight").into_response();
            }
        }
    };
    let caller = request.extensions().get::<Caller>().cloned();
    let response = match tokio::time::timeout(guard.request_timeout, next.run(request)).await {
        Ok(mut r) => {
            if let Some(caller) = caller
                && r.extensions().get::<ErrorKind>().is_some()
            {
                r.extensions_mut().insert(caller);
            }
            r
        }
        Err(_) => ApiError::new(
            ErrorKind::RequestTimeout,
            format!(
                "the request was not read and answered within {:?}",
                guard.request_timeout
            ),
        )
        .into_response(),
    };
    drop(permit);
    response
}

/// Runs a handler's reading of the services on a blocking thread: walking a
/// large estate must not hold an async worker, nor the tasks queued behind it
/// (a probe's answer among them).
pub async fn off_worker(shared: Arc<Shared>, read: impl FnOnce(&Shared) -> Response + Send + 'static) -> Response {
    match tokio::task::spawn_blocking(move || read(&shared)).await {
        Ok(response) => response,
        Err(e) => ApiError::new(ErrorKind::Internal, e.to_string()).into_response(),
    }
}

fn host_allowed(host: &[u8], allowed: &[String]) -> bool {
    let Ok(host) = std::str::from_utf8(host) else {
        return false;
    };
    let host = host.trim().to_ascii_lowercase();
    // Strip the port; an IPv6 literal keeps its brackets.
    let name = match host.rfind(':') {
        Some(i) if !host[i..].contains(']') => &host[..i],
        _ => host.as_str(),
    };
    allowed.iter().any(|a| a == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_compared_without_their_port() {
        let allowed = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "[::1]".to_owned()];
        for ok in ["localhost", "LOCALHOST:7411", "127.0.0.1:80", "[::1]:7411", "[::1]"] {
            assert!(host_allowed(ok.as_bytes(), &allowed), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:7411",
            "127.0.0.1.evil.example",
            "",
            "[::2]:1",
        ] {
            assert!(!host_allowed(bad.as_bytes(), &allowed), "{bad}");
        }
        assert!(!host_allowed(&[0xff, 0xfe], &allowed));
    }

    #[test]
    fn the_bearer_scheme_is_read_whatever_its_case() {
        for ok in ["Bearer k", "bearer k", "BEARER  k ", " Bearer k"] {
            assert_eq!(bearer(ok), Some("k"), "{ok:?}");
        }
        for bad in ["Basic k", "Bearerk", "Bearer", "Bearer   ", ""] {
            assert_eq!(bearer(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn failed_authentication_is_said_once_a_minute_per_peer_with_the_count() {
        let log = FailedAuth::default();
        let (a, b) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        assert_eq!(log.note(a, 1_000), Some(1), "the first is said at once");
        let said: Vec<_> = (0..899).filter_map(|i| log.note(a, 1_000 + i / 20)).collect();
        assert!(said.is_empty(), "{said:?}");
        assert_eq!(log.note(b, 1_001), Some(1), "another peer is its own");
        assert_eq!(log.note(a, 1_060), Some(900), "a minute on: the count since");
        assert_eq!(log.note(a, 1_061), None);
    }
}
