// streamsight's dashboard: one script for every page. It reads the URL (path,
// filters, time range), fetches the collector's JSON, renders with DOM calls
// (names from the network are only ever text, never markup), and refreshes at
// the collector's history interval, saying so when the data has gone stale.
'use strict';

const main = document.getElementById('main');
const freshness = document.getElementById('freshness');
const live = { timer: null, lastOk: 0, refreshMs: 10000, error: null, charts: [] };

// ---------- DOM and formatting ----------

// Builds an element; `svg:NAME` makes one in the SVG namespace.
function h(tag, attrs, ...kids) {
  const svg = tag.startsWith('svg:');
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k === 'className' ? 'class' : k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

const num = (n) => (n === null || n === undefined ? null : Number(n).toLocaleString('en-US'));
// "1 record", "2 records", "? records" when unknown.
const plural = (n, word, unknown = '?') =>
  `${num(n) ?? unknown} ${Number(n) === 1 ? word : `${word}s`}`;
const unknown = () => h('span', { class: 'unknown' }, 'unknown');

function duration(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return s % 60 ? `${Math.floor(s / 60)} m ${s % 60} s` : `${Math.floor(s / 60)} m`;
  if (s < 86400) {
    const m = Math.floor((s % 3600) / 60);
    return m ? `${Math.floor(s / 3600)} h ${m} m` : `${Math.floor(s / 3600)} h`;
  }
  const hr = Math.floor((s % 86400) / 3600);
  return hr ? `${Math.floor(s / 86400)} d ${hr} h` : `${Math.floor(s / 86400)} d`;
}

// Lag seconds as the engine means them: unknown is never 0, a lower bound says so.
function lagSeconds(seconds, lowerBound) {
  if (seconds === null || seconds === undefined) return unknown();
  return (lowerBound ? '≥ ' : '') + duration(seconds);
}

function lagMessages(n) {
  return n === null || n === undefined ? unknown() : num(n);
}

function agoText(ms, nowMs) {
  return ms ? `${duration((nowMs - ms) / 1000)} ago` : 'unknown';
}

function ago(ms, nowMs) {
  return ms ? agoText(ms, nowMs) : unknown();
}

function badge(status) {
  const s = status || 'unknown';
  return h('span', { class: `badge s-${s}` }, s.replace('_', ' ').toUpperCase());
}

const enc = encodeURIComponent;
const groupHref = (c, g) => `/groups/${enc(c)}/${enc(g)}`;
const topicHref = (c, t) => `/topics/${enc(c)}/${enc(t)}`;

function table(caption, head, rows, empty) {
  if (!rows.length) return h('p', { class: 'muted' }, empty || 'Nothing to show.');
  return h('table', {},
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, head.map(([label, cls]) => h('th', { scope: 'col', class: cls }, label)))),
    h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((c, i) => h('td', { class: head[i][1] }, c))))));
}

// ---------- fetching, keys, freshness ----------

class AuthNeeded extends Error {}

async function api(path) {
  const headers = {};
  const key = sessionStorage.getItem('streamsight-key');
  if (key) headers.Authorization = `Bearer ${key}`;
  const r = await fetch(path, { headers });
  if (r.status === 401 || r.status === 403) throw new AuthNeeded(`${r.status}`);
  if (!r.ok) {
    let msg = `${r.status}`;
    try { msg = (await r.json()).message || msg; } catch (_) { /* not JSON */ }
    const e = new Error(msg);
    e.status = r.status;
    throw e;
  }
  return r.json();
}

// A change (silences): the tab's key, or one given for this change only when
// the tab's key may read but not change.
async function send(method, path, body, key) {
  const headers = { 'Content-Type': 'application/json' };
  const k = key || sessionStorage.getItem('streamsight-key');
  if (k) headers.Authorization = `Bearer ${k}`;
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let answer = null;
  try { answer = await r.json(); } catch (_) { /* no body */ }
  if (!r.ok) {
    const e = new Error((answer && answer.message) || `${r.status}`);
    e.status = r.status;
    throw e;
  }
  return answer;
}

function keyForm(scope = 'read') {
  const input = h('input', { id: 'key', type: 'password', autocomplete: 'off', required: true });
  return h('form', {
    class: 'panel',
    onsubmit: (e) => {
      e.preventDefault();
      sessionStorage.setItem('streamsight-key', input.value.trim());
      location.reload();
    },
  },
  h('h1', {}, 'A key is needed'),
  h('p', {}, `This collector asks for an API key with the ${scope} scope (streamsight keys create --scope ${scope}). It is kept for this tab only.`),
  h('label', { for: 'key' }, 'API key '), input, ' ', h('button', { type: 'submit' }, 'Use key'));
}

function showFreshness() {
  const age = live.lastOk ? (Date.now() - live.lastOk) / 1000 : null;
  const stale = live.error || age === null || age * 1000 > 2 * live.refreshMs + 2000;
  freshness.className = stale && live.lastOk ? 'stale' : '';
  if (!live.lastOk) freshness.textContent = live.error ? `Cannot load: ${live.error}` : 'Loading…';
  // A page read once (a record: each read is a Kafka client) is never live.
  else if (live.once) { freshness.className = ''; freshness.textContent = `Read once, ${duration(age)} ago: reload to read again`; }
  else if (stale) freshness.textContent = `Stale: last update ${duration(age)} ago${live.error ? ` (${live.error})` : ''}`;
  else freshness.textContent = `Live · updated ${duration(age)} ago`;
}
setInterval(showFreshness, 1000);

// ---------- pages ----------

const params = new URLSearchParams(location.search);

function overviewUrl(changes) {
  const p = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === '') p.delete(k); else p.set(k, v);
  }
  const s = p.toString();
  return s ? `/?${s}` : '/';
}

const overview = {
  title: () => 'Overview',
  url: () => {
    const p = new URLSearchParams();
    for (const k of ['status', 'q', 'sort', 'page']) if (params.get(k)) p.set(k, params.get(k));
    return `/api/v1/overview?${p}`;
  },
  render(d) {
    const inc = d.incidents;
    const items = [];
    if (inc.alerts_not_evaluated) {
      items.push(h('li', { id: 'alerts-not-evaluated' }, h('strong', {}, 'Alert rules not evaluated: '), h('a', { href: '/alerts' }, 'alerts'),
        ` shown are stale — ${inc.alerts_not_evaluated}`));
    }
    for (const a of inc.alerts || []) {
      items.push(h('li', { class: a.silenced ? 'warn' : null }, h('strong', {}, a.state === 'no_data' ? 'No data: ' : 'Alert: '),
        h('a', { href: '/alerts' }, a.rule), ` — ${a.summary}${a.silenced ? ' (silenced)' : ''}${a.stale ? ' (stale: not evaluated now)' : ''}`));
    }
    for (const p of inc.producers_failing) {
      const f = p.failures;
      const errs = Object.entries(f.by_error).sort((a, b) => b[1] - a[1]).map(([e, n]) => `${e} ${num(n)}`).join(', ');
      items.push(h('li', {}, h('strong', {}, 'Producers failing: '), h('a', { href: topicHref(p.cluster, p.topic) }, p.topic),
        ` (${p.cluster}): ${num(f.total)} failed sends since ${agoText(f.first_at_ms, d.now_ms)} — ${errs}. Lag on this topic may read low.`));
    }
    for (const l of inc.data_loss) {
      const m = l.totals.missing;
      const causes = Object.entries(m).filter(([, n]) => n > 0).map(([c, n]) => `${c.replaceAll('_', ' ')} ${num(n)}`).join(', ');
      const total = Object.values(m).reduce((a, b) => a + b, 0);
      items.push(h('li', {}, h('strong', {}, 'Messages missing: '), h('a', { href: groupHref(l.cluster, l.group) }, l.group), ' on ',
        h('a', { href: topicHref(l.cluster, l.topic) }, l.topic), `: ${num(total)} (${causes})`));
    }
    for (const q of inc.dlq) {
      items.push(h('li', { class: 'warn' }, h('strong', {}, 'Dead letters: '), h('a', { href: '/dlq' }, q.dlq_topic),
        ` ${q.velocity === null ? '' : `${q.velocity.toFixed(2)}/s, `}${plural(q.records, 'record')}`,
        q.top_reason ? `; most: ${q.top_reason.reason.error_class || '?'} at ${q.top_reason.reason.stage || '?'}` : ''));
    }
    for (const p of inc.probes_down) {
      items.push(h('li', {}, h('strong', {}, 'Probe failing: '), h('a', { href: '/probes' }, `${p.cluster} / ${p.topic}`),
        p.partitions.length ? ` partitions ${p.partitions.join(', ')}` : '', p.last_error ? ` — ${p.last_error}` : ''));
    }
    for (const c of inc.clusters_unreachable) {
      items.push(h('li', {}, h('strong', {}, 'Cluster unreachable: '), h('a', { href: '/clusters' }, c.cluster), ` — ${(c.errors || []).slice(0, 2).join('; ')}`));
    }
    const order = ['data_loss', 'stop', 'stall', 'rewind', 'warn', 'blocked', 'stale', 'ok'];
    const counts = order.filter((s) => d.counts[s]).map((s) =>
      h('li', {}, h('a', { href: overviewUrl({ status: s, page: null }), 'aria-label': `${d.counts[s]} groups ${s}` }, badge(s), ` ${num(d.counts[s])}`)));
    const g = d.groups;
    const search = h('input', { id: 'q', name: 'q', type: 'search', value: params.get('q') || '' });
    const statusSel = h('select', { id: 'status', name: 'status' }, h('option', { value: '' }, 'any'),
      order.map((s) => h('option', { value: s, selected: params.get('status') === s }, s)));
    const sortSel = h('select', { id: 'sort', name: 'sort' }, [['status', 'worst first'], ['lag_seconds', 'lag seconds'], ['lag', 'lag messages'], ['name', 'name']]
      .map(([v, l]) => h('option', { value: v, selected: (params.get('sort') || 'status') === v }, l)));
    return [
      h('h1', {}, 'Overview'),
      h('section', { 'aria-labelledby': 'inc' }, h('h2', { id: 'inc' }, `Incidents (${items.length})`),
        items.length ? h('ul', { class: 'incidents' }, items) : h('p', { class: 'banner ok' }, 'No producer failures, missing messages, dead letters, probe failures or unreachable clusters.')),
      h('section', { 'aria-labelledby': 'grp' },
        h('h2', { id: 'grp' }, `Consumer groups (${num(d.total_groups)}; ${num(d.counts.ok || 0)} healthy)`),
        h('ul', { class: 'chips', 'aria-label': 'Groups by status' }, h('li', {}, h('a', { href: overviewUrl({ status: null, page: null }) }, `all ${num(d.total_groups)}`)), counts),
        h('form', { class: 'filters', method: 'get', action: '/' },
          h('label', { for: 'q' }, 'Cluster or group contains', search),
          h('label', { for: 'status' }, 'Status', statusSel),
          h('label', { for: 'sort' }, 'Sort', sortSel),
          h('button', { type: 'submit' }, 'Apply')),
        table(`Groups ${g.total ? (g.page - 1) * g.per_page + 1 : 0}–${Math.min(g.page * g.per_page, g.total)} of ${num(g.total)}`,
          [['Status'], ['Group'], ['Cluster'], ['Why'], ['Lag (messages)', 'num'], ['Lag (time)', 'num'], ['Partitions', 'num']],
          g.rows.map((r) => [
            badge(r.status),
            h('a', { href: groupHref(r.cluster, r.group) }, r.group),
            r.cluster,
            h('span', { class: 'reason' }, r.reason, r.worst_topic ? h('span', { class: 'muted' }, ` (${r.worst_topic}[${r.worst_partition}])`) : ''),
            // Unknown lag is never 0: a lower bound where some is known, else unknown.
            r.complete ? num(r.total_lag) : r.known_lag > 0 ? h('span', {}, '≥ ', num(r.known_lag), ' ', unknown()) : unknown(),
            lagSeconds(r.max_lag_seconds, r.lag_seconds_lower_bound),
            num(r.partitions),
          ]), 'No group matches.'),
        h('nav', { class: 'pager', 'aria-label': 'Pages of groups' },
          g.page > 1 ? h('a', { href: overviewUrl({ page: g.page - 1 }), rel: 'prev' }, '← Previous') : null,
          h('span', {}, `Page ${g.page} of ${g.pages}`),
          g.page < g.pages ? h('a', { href: overviewUrl({ page: g.page + 1 }), rel: 'next' }, 'Next →') : null)),
    ];
  },
};

const RANGES = [['15m', 900], ['1h', 3600], ['6h', 21600], ['24h', 86400]];

// Axis ticks: short, and precise enough that two ticks never read the same.
function compact(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toFixed(1)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toFixed(1)}k`;
  return `${+v.toFixed(2)}`;
}

// Time ticks in UTC, as every time here is said: "HH:MM" (":SS" when ticks
// are under a minute apart, ".mmm" under a second: two ticks never read the
// same), the date above the first tick and each new day.
// uPlot's own first label carries the date and ran into the next one.
function timeTicks(ticks, incr) {
  let day = null;
  return ticks.map((t) => {
    const iso = new Date(t * 1000).toISOString();
    const clock = incr < 1 ? iso.slice(11, 23) : incr < 60 ? iso.slice(11, 19) : iso.slice(11, 16);
    const d = iso.slice(5, 10);
    const label = d !== day ? `${d}\n${clock}` : clock;
    day = d;
    return label;
  });
}

function chart(title, history, value, label, failing, unit, shadeLabel = 'producers failing', stepped = false) {
  const axisLabel = (v, incr) => {
    if (unit === 's' && v >= 120 && incr >= 60) return duration(v);
    return `${compact(v)}${unit === 's' ? ' s' : ''}`;
  };
  const fig = h('figure', {}, h('figcaption', {}, title));
  const last = history.length ? value(history[history.length - 1]) : null;
  fig.append(h('p', { class: 'legend-note' }, `Latest: ${last === null ? 'unknown' : label(last)}. `,
    failing.some(Boolean) ? [h('span', { class: 'shade-key', 'aria-hidden': 'true' }), ` ${shadeLabel}. `] : 'Gaps are unknown, not zero. ', 'Times in UTC.'));
  const box = h('div', { role: 'img', 'aria-label': `${title}, ${history.length} samples, latest ${last === null ? 'unknown' : label(last)}` });
  fig.append(box);
  if (!window.uPlot || history.length === 0) {
    box.append(h('p', { class: 'muted' }, history.length ? '' : 'No samples in this range yet.'));
    return fig;
  }
  const xs = history.map((s) => s.at_ms / 1000);
  const ys = history.map((s) => { const v = value(s); return v === null || v === undefined ? null : v; });
  const shade = (u) => {
    const ctx = u.ctx;
    ctx.save();
    ctx.fillStyle = 'rgba(168, 7, 26, 0.18)';
    for (let i = 0; i < xs.length; i++) {
      if (!failing[i]) continue;
      const x0 = u.valToPos(i > 0 ? xs[i - 1] : xs[i], 'x', true);
      const x1 = u.valToPos(xs[i], 'x', true);
      ctx.fillRect(Math.min(x0, x1), u.bbox.top, Math.max(2, Math.abs(x1 - x0)), u.bbox.height);
    }
    ctx.restore();
  };
  requestAnimationFrame(() => {
    const width = Math.max(320, box.clientWidth || 500);
    const u = new window.uPlot({
      width, height: 220,
      series: [{}, { label, stroke: '#0b57d0', width: 2, spanGaps: false, value: (_, v) => (v === null ? 'unknown' : label(v)),
        // A count that holds until the next poll (members) is drawn as steps.
        paths: stepped && window.uPlot.paths ? window.uPlot.paths.stepped({ align: 1 }) : undefined }],
      axes: [{ space: 70, size: 50, values: (_, ticks, __, ___, incr) => timeTicks(ticks, incr) },
        { size: 80, values: (_, ticks, __, ___, incr) => ticks.map((v) => axisLabel(v, incr)) }],
      hooks: { drawClear: [shade] },
      legend: { show: false },
    }, [xs, ys], box);
    live.charts.push(u);
  });
  return fig;
}

// The read model's derived signals, the values the alert rules compare:
// unknown until the collector derived them (never shown as 0 or as fine).
function groupSignals(s, parts) {
  const unread = parts.some((p) => p.lag.lag_messages !== 0);
  const margin = s && s.retention_margin_seconds !== null ? duration(s.retention_margin_seconds)
    : [unknown(), h('span', { class: 'muted' }, unread ? ' (the log start was not seen moving over the last minute)' : ' (nothing unread)')];
  const catchUp = !s || s.catch_up_seconds === null ? unknown()
    : s.catch_up_seconds >= 1e12 ? h('span', { class: 'bad' }, 'never: falling behind') : duration(s.catch_up_seconds);
  return h('dl', { class: 'facts', id: 'signals', 'aria-label': 'Derived signals' },
    h('dt', {}, 'Retention deletes unread messages in'), h('dd', {}, margin),
    h('dt', {}, 'Catches up in'), h('dd', {}, catchUp),
    h('dt', {}, 'Partitions not committing'), h('dd', {}, s ? num(s.partitions_not_committing) : unknown()));
}

// Membership from the polls of the group's cluster: rebalances in the last
// hour, time not Stable, the likely cause, members over time with the
// rebalancing stretches shaded, each change of state, epoch or members, and
// the members that left. Unknown where this node does not poll the cluster.
function membership(r) {
  const title = h('h2', {}, 'Membership');
  if (!r) {
    return h('section', { id: 'membership', 'aria-label': 'Membership' }, title,
      h('p', { class: 'muted' }, 'Unknown here: membership comes from this collector polling the group\'s cluster ([[serve.clusters]]).'));
  }
  const settled = (state) => state === 'Stable' || state === 'Empty' || state === 'Dead';
  const changes = r.timeline.filter((p, i, all) => i === 0 || p.state !== all[i - 1].state || p.epoch !== all[i - 1].epoch || p.members !== all[i - 1].members);
  const when = (ms) => new Date(ms).toISOString().replace('T', ' ').slice(0, 19);
  const latest = r.timeline.length ? r.timeline[r.timeline.length - 1] : null;
  return h('section', { id: 'membership', 'aria-label': 'Membership' }, title,
    r.storm ? h('div', { class: 'banner bad', role: 'alert', id: 'rebalance-storm' }, h('strong', {}, 'Rebalance storm: '), `${r.last_hour} rebalances in the last hour. ${r.cause || ''}`) : null,
    h('dl', { class: 'facts' },
      h('dt', {}, 'Rebalances in the last hour'), h('dd', {}, num(r.last_hour)),
      h('dt', {}, 'Not Stable in the last hour'), h('dd', {}, duration(r.not_stable_ms / 1000)),
      h('dt', {}, 'Likely cause'), h('dd', {}, r.cause || h('span', { class: 'muted' }, 'no rebalance seen'))),
    latest && latest.members === null
      ? h('div', { class: 'banner warn', role: 'status', id: 'membership-unknown' }, h('strong', {}, 'Membership unknown: '),
        `the broker did not describe this group at the last poll (${latest.unknown_because || 'no reason given'}). Nothing here counts it as empty, and nothing acts on it.`)
      : null,
    // A poll that could not describe the group is a gap, never a rebalance.
    chart('Members (each poll)', r.timeline, (p) => p.members, (v) => `${num(v)} members`, r.timeline.map((p) => p.members !== null && !settled(p.state)), '', 'rebalancing', true),
    table(`State changes (${changes.length})`, [['When'], ['State'], ['Epoch', 'num'], ['Members', 'num']],
      changes.slice().reverse().map((p) => [when(p.at_ms), p.state ? badge(p.state.toLowerCase()) : unknown(), p.epoch === null ? unknown() : num(p.epoch), p.members === null ? unknown() : num(p.members)]),
      'Not polled yet.'),
    table(`Members that left in the last hour (${r.departures.length})`, [['When'], ['Client'], ['Host']],
      r.departures.slice().reverse().map((m) => [when(m.at_ms), m.client_id || unknown(), m.host || unknown()]), 'None left.'));
}

// A share group (KIP-932) has no consumer lag: many members read a partition
// at once, out of order, and commit nothing. Its lag is share-group lag: the
// broker's own KIP-1226 figure (records past the start offset not yet
// acknowledged) where it gives one, else start offset to end, an upper bound.
function shareGroup(d) {
  const parts = d.share_partitions || [];
  const total = parts.some((p) => p.lag === null) ? null : parts.reduce((a, p) => a + p.lag, 0);
  const bounded = parts.some((p) => p.upper_bound);
  const shareLag = (p) => (p.lag === null ? unknown() : p.upper_bound ? `\u2264 ${num(p.lag)}` : num(p.lag));
  return [
    h('p', { class: 'muted' }, h('a', { href: '/' }, 'Overview'), ` › ${d.cluster}`),
    h('h1', {}, d.group, ' ', badge('share_group')),
    h('p', { class: 'reason', id: 'why' }, h('strong', {}, 'Share group: '),
      'its members read each partition together and out of order, and commit no offsets, so it has no consumer lag. ',
      'Share-group lag counts the records past each share-partition\u2019s start offset not yet acknowledged (KIP-1226), as the broker counts them. ',
      bounded ? 'Where the broker cannot say (it has no DescribeShareGroupOffsets v1), the records from the start offset to the end are shown, marked \u2264: records acknowledged past the start are counted too, so the true figure is at most that.' : ''),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Share-group lag (all partitions)'), h('dd', { id: 'share-lag-total' }, total === null ? unknown() : `${bounded ? 'at most ' : ''}${num(total)} messages`)),
    table(`Share-partitions (${parts.length})`,
      [['Topic'], ['Partition', 'num'], ['Start offset', 'num'], ['End offset', 'num'], ['Share-group lag (messages)', 'num']],
      parts.map((p) => [
        h('a', { href: topicHref(d.cluster, p.topic) }, p.topic),
        p.partition,
        p.start_offset === null ? h('span', { class: 'muted' }, 'not read yet') : num(p.start_offset),
        p.end_offset === null ? unknown() : num(p.end_offset),
        shareLag(p),
      ]), 'No share-partition described yet.'),
    membership(d.rebalances),
  ];
}

// A streams group (KIP-1071): a Kafka Streams application whose assignment
// the broker computes. Its topology says what each topic is to it; each
// member (a stream thread) holds tasks, a task reading one partition of each
// input of its sub-topology. Changelogs are written, never lag.
function streamsApp(d) {
  const s = d.streams;
  if (!s) return null;
  const list = (xs) => (xs.length ? xs.join(', ') : h('span', { class: 'muted' }, 'none'));
  const tasks = (ts) => (ts && ts.length ? ts.map(([sub, ps]) => `${sub}:[${ps.join(',')}]`).join('; ') : h('span', { class: 'muted' }, 'none'));
  return h('section', { id: 'streams', 'aria-label': 'Streams application' },
    h('h2', {}, 'Streams application'),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Topology epoch'), h('dd', {}, s.topology_epoch === null ? h('span', { class: 'muted' }, 'not initialised') : num(s.topology_epoch)),
      h('dt', {}, 'Target assignment epoch'), h('dd', {}, num(s.assignment_epoch))),
    table(`Sub-topologies (${s.subtopologies.length})`, [['Id'], ['Reads (source)'], ['Reads (repartition)'], ['Writes (repartition)'], ['State changelogs']],
      s.subtopologies.map((t) => [t.id, list(t.source_topics), list(t.repartition_source_topics), list(t.repartition_sink_topics), list(t.changelog_topics)]),
      'No topology initialised yet.'),
    table(`Members (${s.members.length})`, [['Member'], ['Client'], ['Process'], ['Epoch', 'num'], ['Active tasks'], ['Standby tasks'], ['Warm-up tasks']],
      s.members.map((m) => [h('code', {}, m.member_id), `${m.client_id}${m.host ? ` @ ${m.host}` : ''}`, m.tasks ? h('code', {}, m.tasks.process_id) : unknown(),
        m.tasks ? num(m.tasks.member_epoch) : unknown(), m.tasks ? tasks(m.tasks.active) : unknown(), m.tasks ? tasks(m.tasks.standby) : unknown(), m.tasks ? tasks(m.tasks.warmup) : unknown()]),
      'No member.'));
}

const group = {
  title: ([c, g]) => `Group ${g}`,
  url: ([c, g]) => {
    const range = RANGES.find((r) => r[0] === params.get('range')) || RANGES[1];
    return `/api/v1/groups/${enc(c)}/${enc(g)}?from_ms=${Date.now() - range[1] * 1000}`;
  },
  render(d) {
    if (d.group_type === 'share') return shareGroup(d);
    const parts = d.partitions;
    const rank = ['ok', 'stale', 'blocked', 'warn', 'rewind', 'stall', 'stop', 'data_loss'];
    const worst = parts.reduce((w, p) => (!w || rank.indexOf(p.lag.status) > rank.indexOf(w.lag.status) ? p : w), null);
    const failing = [...new Set(parts.filter((p) => p.lag.producer_failing).map((p) => p.topic))];
    const current = params.get('range') || '1h';
    const hist = d.history;
    const failingAt = hist.map((s) => s.producer_failing);
    return [
      h('p', { class: 'muted' }, h('a', { href: '/' }, 'Overview'), ` › ${d.cluster}`),
      h('h1', {}, d.group, ' ', badge(d.status), d.group_type && d.group_type !== 'classic' ? [' ', h('span', { class: 'muted', id: 'group-type' }, `${d.group_type} group`)] : null),
      h('p', {}, h('button', { type: 'button', id: 'reset-open', class: 'secondary', onclick: () => resetDialog(d.cluster, d.group) }, 'Reset offsets…')),
      worst ? h('p', { class: 'reason', id: 'why' }, h('strong', {}, 'Why: '), `${worst.topic}[${worst.partition}]: ${worst.reason}`)
        : h('p', { class: 'reason', id: 'why' }, h('strong', {}, 'Lag unknown: '), d.lag_unknown_because || 'no partitions known',
          d.polled ? ` (the last poll: ${d.polled.state || 'state unknown'}, ${d.polled.members == null ? 'members unknown' : `${d.polled.members} member(s)`})` : ''),
      failing.length ? h('div', { class: 'banner bad', role: 'alert', id: 'producer-failing' },
        h('strong', {}, 'Producers are failing'), ` on ${failing.join(', ')}: failed sends do not move the end offset, so lag reads lower than the truth until they recover. `,
        failing.map((t) => h('a', { href: topicHref(d.cluster, t) }, `Failures on ${t}`))) : null,
      groupSignals(d.signals, parts),
      h('ul', { class: 'ranges', 'aria-label': 'Time range' }, RANGES.map(([r]) =>
        h('li', {}, h('a', { href: `?range=${r}`, 'aria-current': r === current ? 'true' : null }, r === current ? h('strong', {}, r) : r)))),
      h('div', { class: 'charts' },
        chart('Lag in messages (sum over partitions)', hist, (s) => (s.complete ? s.total_lag : null), (v) => `${num(Math.round(v))} msgs`, failingAt, ''),
        chart('Lag in time (oldest unread)', hist, (s) => s.max_lag_seconds, (v) => duration(v), failingAt, 's')),
      table(`Partitions (${parts.length})`,
        [['Topic'], ['Partition', 'num'], ['Status'], ['Why'], ['Committed', 'num'], ['End offset', 'num'], ['Lag (messages)', 'num'], ['Lag (time)', 'num'], ['Owner'], ['Last commit']],
        parts.map((p) => [
          [h('a', { href: topicHref(d.cluster, p.topic) }, p.topic), p.topic_role && p.topic_role !== 'source' ? h('span', { class: 'muted' }, ` (${p.topic_role})`) : ''],
          p.partition,
          badge(p.lag.status),
          p.reason,
          p.lag.committed_offset === null ? unknown() : num(p.lag.committed_offset),
          p.lag.end_offset === null ? unknown() : num(p.lag.end_offset),
          lagMessages(p.lag.lag_messages),
          lagSeconds(p.lag.lag_seconds, p.lag.lag_seconds_lower_bound),
          p.consumer ? [p.consumer.client_id || p.consumer.member_id || '', p.consumer.host ? ` @ ${p.consumer.host}` : '', p.consumer.group_type && p.consumer.group_type !== 'classic' ? h('span', { class: 'muted' }, ` (${p.consumer.group_type} group)`) : ''] : h('span', { class: 'muted' }, 'not described'),
          ago(p.lag.last_commit_at_ms, d.now_ms),
        ])),
      streamsApp(d),
      membership(d.rebalances),
    ];
  },
};

function ranges(list) {
  return (list || []).map(([a, b]) => (a === b ? `${a}` : `${a}–${b}`)).join(', ');
}

const topic = {
  title: ([c, t]) => `Topic ${t}`,
  url: ([c, t]) => `/api/v1/topics/${enc(c)}/${enc(t)}`,
  render(d) {
    const f = d.failures;
    const causes = ['never_reached_kafka', 'expired_by_retention', 'skipped', 'failed_in_processing', 'dead_lettered', 'unexplained'];
    const anyFailing = d.partitions.some((p) => p.report.producer_failing);
    return [
      h('p', { class: 'muted' }, h('a', { href: '/' }, 'Overview'), ` › ${d.cluster}`),
      h('h1', {}, d.topic, ' ', anyFailing ? badge('producer_failing') : null),
      f ? h('section', { 'aria-labelledby': 'fail' }, h('h2', { id: 'fail' }, `Failed sends (${num(f.total)})`),
        h('p', {}, `First ${agoText(f.first_at_ms, d.now_ms)}, last ${agoText(f.last_at_ms, d.now_ms)}`, f.partitions.length ? `, partitions ${f.partitions.join(', ')}` : ''),
        table('Failed sends by error', [['Error'], ['Sends', 'num']], Object.entries(f.by_error).sort((a, b) => b[1] - a[1]).map(([e, n]) => [h('code', {}, e), num(n)])),
        f.trace_ids.length ? h('p', {}, 'Traces of failed records: ', f.trace_ids.map((t) => [h('a', { href: `/journeys/${enc(t)}` }, t), ' '])) : null)
        // Failing, with no counts: a tracer said so (its failed-send
        // placeholder or an error span), which carries no count by error.
        : anyFailing ? h('p', { class: 'banner bad', id: 'failing-uncounted' }, h('strong', {}, 'Sends are failing: '),
          'a tracer reported failed sends to this topic (a failed-send placeholder, or a produce span with an error). Counts by error come from streamsight\u2019s SDK, which reports none here.')
        : h('p', { class: 'banner ok' }, 'No failed sends reported for this topic.'),
      table('Partitions', [['Partition', 'num'], ['End offset', 'num'], ['Last acked', 'num'], ['Log start', 'num'], ['Produce rate', 'num'], ['Producers'], ['End confirmed']],
        d.partitions.map((p) => [
          p.partition,
          p.report.end_offset === null ? unknown() : num(p.report.end_offset),
          p.report.produce_offset === null ? unknown() : num(p.report.produce_offset),
          p.report.log_start_offset === null ? unknown() : num(p.report.log_start_offset),
          p.produce_rate_per_second === null ? unknown() : `${p.produce_rate_per_second.toFixed(1)}/s`,
          p.report.producer_failing ? badge('producer_failing') : 'ok',
          ago(p.report.end_offset_at_ms, d.now_ms),
        ]), 'No partition of this topic is known to the engine.'),
      table('Groups reading it', [['Group'], ['Status'], ['Lag (messages)', 'num']],
        d.groups.map((g) => [h('a', { href: groupHref(d.cluster, g.group) }, g.group), badge(g.status), num(g.lag)]), 'No group reads it.'),
      h('h2', {}, 'Drop accounting'),
      table('Messages sent, delivered and missing, by group and cause', [['Group'], ['Sent', 'num'], ['Delivered', 'num'], ...causes.map((c) => [c.replaceAll('_', ' '), 'num']), ['Duplicates', 'num']],
        d.drops.map((x) => [x.group, num(x.totals.sent), num(x.totals.delivered), ...causes.map((c) => num(x.totals.missing[c])), num(x.totals.duplicates)]), 'No drop accounting yet (the SDK counts sends and receipts per window).'),
      table('Recent windows with missing or duplicate messages', [['Window'], ['Group'], ['Partition', 'num'], ['Missing'], ['Offsets'], ['Traces']],
        d.drop_windows.map((w) => [
          new Date(w.window_start_ms).toISOString().slice(11, 19),
          w.group, w.partition ?? 'any',
          causes.filter((c) => w.missing[c]).map((c) => `${c.replaceAll('_', ' ')} ${w.missing[c]}`).join(', ') || (w.duplicates ? `${w.duplicates} duplicates` : ''),
          [w.skipped_ranges.length ? `skipped ${ranges(w.skipped_ranges)} ` : '', w.expired_ranges.length ? `expired ${ranges(w.expired_ranges)}` : '',
            w.first_offset !== null ? ` (window ${w.first_offset}–${w.last_offset})` : ''],
          w.trace_ids.map((t) => [h('a', { href: `/journeys/${enc(t)}` }, t), ' ']),
        ]), 'No window is missing messages.'),
      h('h2', {}, 'Dead-letter queue'),
      d.dlq.length ? d.dlq.map((q) => h('p', {}, h('a', { href: '/dlq' }, q.dlq_topic), `: ${plural(q.records, 'record')}, ${q.velocity === null ? 'velocity unknown' : `${q.velocity.toFixed(2)}/s`}`))
        : h('p', { class: 'muted' }, 'No monitored DLQ names this topic as its source.'),
    ];
  },
};

// Services and topics left to right: each node's column is its longest path
// from a source; within a column nodes follow the mean row of their inputs.
function layout(nodes, edges) {
  const rank = new Map(nodes.map((n) => [n.id, 0]));
  for (let pass = 0; pass < nodes.length; pass++) {
    let moved = false;
    for (const e of edges) {
      if (!rank.has(e.from) || !rank.has(e.to)) continue;
      if (rank.get(e.to) < rank.get(e.from) + 1 && rank.get(e.from) + 1 < nodes.length) { rank.set(e.to, rank.get(e.from) + 1); moved = true; }
    }
    if (!moved) break;
  }
  const cols = [];
  for (const n of nodes) (cols[rank.get(n.id)] ||= []).push(n);
  const row = new Map();
  cols.forEach((col, c) => {
    const key = (n) => {
      const ins = edges.filter((e) => e.to === n.id && row.has(e.from)).map((e) => row.get(e.from));
      return ins.length ? ins.reduce((a, b) => a + b, 0) / ins.length : 0;
    };
    col.sort((a, b) => key(a) - key(b) || a.name.localeCompare(b.name));
    col.forEach((n, i) => row.set(n.id, i));
    if (c < 0) row.clear();
  });
  const W = 190, GAP = 120, H = 34, VGAP = 36;
  const pos = new Map();
  cols.forEach((col, c) => col.forEach((n, i) => pos.set(n.id, { x: 20 + c * (W + GAP), y: 20 + i * (H + VGAP), w: W, h: H })));
  const rows = Math.max(1, ...cols.map((c) => c.length));
  return { pos, width: 40 + cols.length * (W + GAP) - GAP, height: 40 + rows * (H + VGAP) - VGAP };
}

const STROKE = { ok: '#1e6b34', warn: '#9a6200', blocked: '#9a6200', stale: '#5f6b7a', producer_failing: '#a8071a', stall: '#a8071a', stop: '#a8071a', rewind: '#a8071a', data_loss: '#a8071a' };

function edgeText(e) {
  const q = e.edge_latency_seconds;
  const lat = q.p50 === null ? 'latency unknown' : `p50 ${q.p50.toFixed(3)} s, p99 ${q.p99.toFixed(3)} s`;
  return `${e.throughput_per_second.toFixed(1)}/s, ${lat}`;
}

const pathways = {
  title: () => 'Pathways',
  url: () => `/api/v1/pathways?window_seconds=${Number(params.get('window')) || 600}`,
  render(d) {
    const edgeKey = (e) => `${e.from}>${e.to}>${e.group || ''}`;
    const names = new Map(d.nodes.map((n) => [n.id, n.name]));
    const nameOf = (id) => names.get(id) || id;
    const selected = params.get('edge');
    const { pos, width, height } = layout(d.nodes, d.edges);
    const svg = h('svg:svg', { width, height, viewBox: `0 0 ${width} ${height}`, role: 'group', 'aria-label': 'Pathway map' });
    d.edges.forEach((e) => {
      const a = pos.get(e.from), b = pos.get(e.to);
      if (!a || !b) return;
      const x0 = a.x + a.w, y0 = a.y + a.h / 2, x1 = b.x, y1 = b.y + b.h / 2;
      const mid = (x0 + x1) / 2;
      const color = STROKE[e.status] || '#5f6b7a';
      const href = `/pathways?${new URLSearchParams({ ...Object.fromEntries(params), edge: edgeKey(e) })}`;
      svg.append(h('svg:a', { href, class: `edge${edgeKey(e) === selected ? ' selected' : ''}`, 'aria-label': `${nameOf(e.from)} to ${nameOf(e.to)}${e.group ? ` (group ${e.group})` : ''}: ${edgeText(e)}, ${e.status || 'health unknown'}` },
        h('svg:path', { d: `M${x0},${y0} C${mid},${y0} ${mid},${y1} ${x1},${y1}`, stroke: color, 'stroke-width': Math.min(8, 2 + Math.log10(1 + e.throughput_per_second)), 'stroke-dasharray': e.status ? null : '5 4' }),
        h('svg:text', { x: mid, y: (y0 + y1) / 2 - 5, 'text-anchor': 'middle', class: 'edge-label' }, `${e.throughput_per_second.toFixed(1)}/s`)));
    });
    for (const n of d.nodes) {
      const p = pos.get(n.id);
      const label = n.name.length > 26 ? `${n.name.slice(0, 25)}…` : n.name;
      svg.append(h('svg:g', { class: `node ${n.kind}` },
        h('svg:title', {}, `${n.kind} ${n.name}`),
        h('svg:rect', { x: p.x, y: p.y, width: p.w, height: p.h, rx: n.kind === 'topic' ? 3 : 14 }),
        h('svg:text', { x: p.x + 10, y: p.y + 21 }, `${n.kind === 'topic' ? '▤ ' : '● '}${label}`)));
    }
    const sel = d.edges.find((e) => edgeKey(e) === selected);
    const win = Number(params.get('window')) || 600;
    return [
      h('h1', {}, 'Pathways'),
      h('p', {}, `Services and topics over the last ${duration(win)}; edges carry throughput and latency, coloured by the consuming group's health or the producer's failures. Select an edge for details.`),
      h('ul', { class: 'ranges', 'aria-label': 'Window' }, [[300, '5m'], [600, '10m'], [3600, '1h']].map(([s, l]) =>
        h('li', {}, h('a', { href: `/pathways?window=${s}`, 'aria-current': s === win ? 'true' : null }, s === win ? h('strong', {}, l) : l)))),
      d.nodes.length ? h('div', { class: 'map' }, svg) : h('p', { class: 'muted' }, 'No pathway statistics in this window.'),
      sel ? h('section', { class: 'panel', id: 'edge', 'aria-labelledby': 'edge-h' },
        h('h2', { id: 'edge-h' }, `${nameOf(sel.from)} → ${nameOf(sel.to)}`),
        h('dl', { class: 'facts' },
          h('dt', {}, 'Health'), h('dd', {}, badge(sel.status)),
          h('dt', {}, 'Group'), h('dd', {}, sel.group || '—'),
          h('dt', {}, 'Throughput'), h('dd', {}, `${sel.throughput_per_second.toFixed(2)} messages/s (${num(Math.round(sel.count))} in the window)`),
          h('dt', {}, 'Edge latency'), h('dd', {}, edgeText(sel)),
          h('dt', {}, 'Pathway latency'), h('dd', {}, sel.pathway_latency_seconds.p50 === null ? unknown() : `p50 ${sel.pathway_latency_seconds.p50.toFixed(3)} s, p99 ${sel.pathway_latency_seconds.p99.toFixed(3)} s`),
          h('dt', {}, 'Payload'), h('dd', {}, sel.payload_size_bytes_avg === null ? unknown() : `${Math.round(sel.payload_size_bytes_avg)} bytes on average`))) : null,
      table('Edges', [['From'], ['To'], ['Group'], ['Health'], ['Throughput', 'num'], ['Latency p50', 'num'], ['Latency p99', 'num']],
        d.edges.map((e) => [nameOf(e.from), nameOf(e.to), e.group || '', badge(e.status), `${e.throughput_per_second.toFixed(1)}/s`,
          e.edge_latency_seconds.p50 === null ? unknown() : `${e.edge_latency_seconds.p50.toFixed(3)} s`,
          e.edge_latency_seconds.p99 === null ? unknown() : `${e.edge_latency_seconds.p99.toFixed(3)} s`])),
    ];
  },
};

const dlq = {
  title: () => 'Dead letters',
  url: () => '/api/v1/dlq',
  render(d) {
    const out = [h('h1', {}, 'Dead-letter queues')];
    if (!d.clusters.length) out.push(h('p', { class: 'muted' }, 'No DLQ is monitored (configure [[serve.dlq]]).'));
    for (const c of d.clusters) {
      for (const t of c.topics) {
        out.push(h('section', { 'aria-label': t.dlq_topic },
          h('h2', {}, `${t.dlq_topic} `, h('span', { class: 'muted' }, `(${c.cluster}${t.source_topic ? `, from ${t.source_topic}` : ''})`)),
          h('p', {}, `${plural(t.records, 'record', 'unknown')}, ${t.velocity === null ? 'velocity unknown' : `${t.velocity.toFixed(2)} per second`}, ${num(t.read)} read by the monitor.`),
          table('Reasons', [['Source topic'], ['Error'], ['Stage'], ['Convention'], ['Records', 'num']],
            t.reasons.map(([r, n]) => [r.source_topic, h('code', {}, r.error_class), r.stage, r.convention, num(n)]), 'No reasons read yet.'),
          h('p', {}, h('button', { type: 'button', class: 'secondary', 'data-redrive': t.dlq_topic, onclick: () => redriveDialog(c.cluster, t.dlq_topic) }, `Redrive ${t.dlq_topic}…`)),
          table('Recent records', [['Select'], ['Partition', 'num'], ['Offset', 'num'], ['When'], ['Provenance'], ['Redriven'], ['Preview']],
            t.recent.slice().reverse().map((r) => {
              const p = r.provenance || {};
              const id = [c.cluster, t.dlq_topic, r.partition, r.offset].join('\u0000');
              const pick = h('input', { type: 'checkbox', 'aria-label': `Select the dead letter at offset ${r.offset}`, onchange: (e) => { if (e.target.checked) dlqSelected.add(id); else dlqSelected.delete(id); } });
              pick.checked = dlqSelected.has(id);
              const redriven = r.redriven ? `to ${r.redriven.to.topic}[${r.redriven.to.partition}]@${r.redriven.to.offset}` : h('span', { class: 'muted' }, 'no');
              return [pick, r.partition, h('a', { href: recordHref(c.cluster, t.dlq_topic, r.partition, r.offset), 'aria-label': `Read the record at offset ${r.offset}` }, num(r.offset)), r.timestamp_ms ? new Date(r.timestamp_ms).toISOString().replace('T', ' ').slice(0, 19) : unknown(),
                r.provenance ? [`${p.source_topic ?? '?'}[${p.source_partition ?? '?'}]@${p.source_offset ?? '?'}`, p.consumer_group ? ` by ${p.consumer_group}` : '',
                  p.error_class ? [' — ', h('code', {}, p.error_class)] : '', p.stage ? ` at ${p.stage}` : '', p.error_message ? `: ${p.error_message}` : '',
                  p.trace_id ? [' trace ', r.journey_url ? h('a', { href: r.journey_url }, p.trace_id) : h('code', {}, p.trace_id), r.trace_url ? [' (', h('a', { href: r.trace_url }, 'trace'), ')'] : ''] : ''] : h('span', { class: 'muted' }, 'no provenance headers'),
                redriven, h('code', { class: 'preview' }, r.preview)];
            }), 'No record read yet.')));
      }
    }
    return out;
  },
};

const probes = {
  title: () => 'Probes',
  url: () => '/api/v1/probes',
  render(d) {
    const q = (s, f) => (s ? `${s[f].toFixed(3)} s` : unknown());
    return [h('h1', {}, 'End-to-end probes'),
      d.probes.length ? d.probes.map((p) => h('section', { 'aria-label': `${p.cluster} ${p.topic}` },
        h('h2', {}, `${p.cluster} / ${p.topic}`),
        h('p', {}, `SLA ${duration(p.sla_ms / 1000)}.`, p.last_error ? h('span', { class: 'banner bad' }, ` Last error: ${p.last_error}`) : ''),
        table('Partitions', [['Partition', 'num'], ['Status'], ['Sent', 'num'], ['Received', 'num'], ['Lost', 'num'], ['Duplicated', 'num'], ['Produce errors', 'num'], ['Round trip p50', 'num'], ['Round trip p99', 'num']],
          p.report.partitions.map((r) => [r.partition, badge(r.status), num(r.sent), num(r.received), num(r.lost), num(r.duplicated), num(r.produce_errors), q(r.roundtrip_latency, 'p50_seconds'), q(r.roundtrip_latency, 'p99_seconds')]))))
        : h('p', { class: 'muted' }, 'No probe is configured ([[serve.probes]]).')];
  },
};

const clusters = {
  title: () => 'Clusters',
  url: () => '/api/v1/clusters',
  render(d) {
    const names = Object.keys(d.clusters);
    return [h('h1', {}, 'Polled clusters'),
      names.length ? names.map((name) => {
        const { poller, last_poll: s } = d.clusters[name];
        const ok = s && s.metadata_ok;
        return h('section', { 'aria-label': name },
          h('h2', {}, `${name} `, badge(!s ? 'unknown' : ok ? 'ok' : 'down')),
          h('dl', { class: 'facts' },
            h('dt', {}, 'Bootstrap'), h('dd', {}, h('code', {}, poller.bootstrap.join(', '))),
            h('dt', {}, 'Polls'), h('dd', {}, `${num(poller.polls)} (${num(poller.failed_polls)} failed), every ${poller.poll_interval_ms < 1000 ? `${num(poller.poll_interval_ms)} ms` : duration(poller.poll_interval_ms / 1000)}`),
            h('dt', {}, 'Requests'), h('dd', {}, num(poller.requests)),
            h('dt', {}, 'Last poll took'), h('dd', {}, poller.last_poll_ms === null ? unknown() : `${poller.last_poll_ms.toFixed(0)} ms`),
            s ? [h('dt', {}, 'Topics / partitions'), h('dd', {}, `${num(s.topics)} / ${num(s.partitions)}`)] : null),
          s && s.errors.length ? h('div', { class: 'banner bad' }, h('strong', {}, 'Errors in the last poll: '), s.errors.join('; ')) : null,
          s ? table('Brokers', [['Id', 'num'], ['Address'], ['Reachable']], s.brokers.map((b) => [b.id, h('code', {}, b.addr), b.reachable ? 'yes' : badge('down')])) : null,
          s ? table('Groups as the brokers describe them', [['Group'], ['Type'], ['State'], ['Members', 'num'], ['Committed partitions', 'num'], ['Share-group lag', 'num'], ['Error']],
            s.groups.map((g) => [h('a', { href: groupHref(name, g.group) }, g.group), g.group_type || h('span', { class: 'muted' }, 'not said'), g.state || '', g.members === null ? h('span', { class: 'muted', title: g.error || '' }, 'unknown') : num(g.members.length), num(g.committed_partitions),
              g.group_type !== 'share' ? h('span', { class: 'muted' }, 'not a share group') : g.share_lag === null ? unknown() : `${g.share_lag_upper_bound ? '\u2264 ' : ''}${num(g.share_lag)}`,
              g.error || '']), 'No group listed.') : h('p', { class: 'muted' }, 'Not polled yet.'));
      }) : h('p', { class: 'muted' }, 'No cluster is polled (configure [[serve.clusters]] or --cluster).')];
  },
};

// The silence dialog lives outside <main>, so that a refresh never wipes what
// is being typed. Matchers are `label=glob` lines (`alertname` is the rule).
const silenceDialog = (() => {
  let dialog = null;
  let fields = null;
  function build() {
    const matchers = h('textarea', { id: 'silence-matchers', rows: 4, cols: 40, required: true, spellcheck: 'false' });
    const duration = h('select', { id: 'silence-duration' }, ['1h', '2h', '4h', '1d', '7d'].map((d) => h('option', { value: d }, d)));
    const comment = h('input', { id: 'silence-comment', type: 'text', maxlength: 1000, size: 40 });
    const key = h('input', { id: 'silence-key', type: 'password', autocomplete: 'off' });
    const message = h('p', { id: 'silence-message', role: 'status' });
    const cancel = h('button', { type: 'button', class: 'secondary', onclick: () => dialog.close() }, 'Cancel');
    const form = h('form', { method: 'dialog', onsubmit: submit },
      h('h2', { id: 'silence-title' }, 'New silence'),
      h('p', { class: 'muted' }, 'Matching alerts are not notified until the silence ends. One label=glob per line; alertname is the rule.'),
      h('p', {}, h('label', { for: 'silence-matchers' }, 'Matchers'), h('br', {}), matchers),
      h('p', {}, h('label', { for: 'silence-duration' }, 'For '), duration),
      h('p', {}, h('label', { for: 'silence-comment' }, 'Comment '), comment),
      h('p', {}, h('label', { for: 'silence-key' }, 'Admin key (only if this tab\'s key cannot change silences) '), key),
      message,
      h('p', {}, h('button', { type: 'submit' }, 'Silence'), ' ', cancel));
    fields = { matchers, duration, comment, key, message };
    dialog = h('dialog', { id: 'silence-dialog', 'aria-labelledby': 'silence-title' }, form);
    document.body.append(dialog);
  }
  async function submit(e) {
    e.preventDefault();
    const matchers = {};
    for (const line of fields.matchers.value.split('\n')) {
      const at = line.indexOf('=');
      if (at > 0) matchers[line.slice(0, at).trim()] = line.slice(at + 1).trim();
    }
    try {
      await send('POST', '/api/v1/silences', { matchers, duration: fields.duration.value, comment: fields.comment.value }, fields.key.value.trim());
      dialog.close();
      start();
    } catch (err) {
      fields.message.className = 'banner bad';
      fields.message.textContent = err.status === 401 || err.status === 403
        ? 'Silences need an admin key (streamsight keys create --scope admin).'
        : `Not silenced: ${err.message}`;
    }
  }
  return (labels) => {
    if (!dialog) build();
    fields.matchers.value = Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).join('\n');
    fields.message.textContent = '';
    fields.message.className = '';
    dialog.showModal();
    fields.matchers.focus();
  };
})();

// Reset offsets: a dry run first, shown in the dialog; the reset only after
// it, with the same choices (an admin key, the tab's or one given here).
const resetDialog = (() => {
  let dialog = null;
  let f = null;
  let planned = null;
  let target = null;
  const body = () => {
    const kind = f.to.value;
    const v = f.value.value.trim();
    const to = kind === 'offset' ? { offset: Number(v) } : kind === 'shift_by' ? { shift_by: Number(v) }
      : kind === 'time' ? { time: Date.parse(v) } : kind;
    const topics = f.topics.value.split(/[\s]+/).filter(Boolean).map((t) => {
      const [topic, list] = t.split(':');
      return { topic, partitions: list ? list.split(',').map(Number) : [] };
    });
    return { to, topics };
  };
  function build() {
    const to = h('select', { id: 'reset-to', onchange: () => { planned = null; f.confirm.disabled = true; } },
      [['latest', 'the latest offset (skip everything unread)'], ['earliest', 'the earliest offset (read everything again)'],
        ['offset', 'an offset'], ['shift_by', 'shifted by N (negative: read again)'], ['time', 'a time (first record at or after)']]
        .map(([v, t]) => h('option', { value: v }, t)));
    const value = h('input', { id: 'reset-value', type: 'text', size: 24, oninput: () => { planned = null; f.confirm.disabled = true; } });
    const topics = h('input', { id: 'reset-topics', type: 'text', size: 30, spellcheck: 'false', oninput: () => { planned = null; f.confirm.disabled = true; } });
    const key = h('input', { id: 'reset-key', type: 'password', autocomplete: 'off' });
    const message = h('div', { id: 'reset-message', role: 'status' });
    const plan = h('div', { id: 'reset-plan' });
    const dry = h('button', { type: 'button', id: 'reset-dry-run', onclick: dryRun }, 'Dry run');
    const confirm = h('button', { type: 'submit', id: 'reset-confirm', disabled: true }, 'Reset offsets');
    const cancel = h('button', { type: 'button', class: 'secondary', onclick: () => dialog.close() }, 'Close');
    const form = h('form', { method: 'dialog', onsubmit: execute },
      h('h2', { id: 'reset-title' }, 'Reset offsets'),
      h('p', { class: 'muted' }, 'A dry run shows per partition what the group would skip or read again; the reset is committed only after it. Kafka refuses a group with live members: stop its consumers first.'),
      h('p', {}, h('label', { for: 'reset-to' }, 'To '), to),
      h('p', {}, h('label', { for: 'reset-value' }, 'Offset, shift or time (RFC 3339) '), value),
      h('p', {}, h('label', { for: 'reset-topics' }, 'Only these topics (orders or orders:0,1; blank: every partition the group committed on) '), topics),
      h('p', {}, h('label', { for: 'reset-key' }, 'Admin key (only if this tab\'s key cannot reset) '), key),
      plan, message,
      h('p', {}, dry, ' ', confirm, ' ', cancel));
    f = { to, value, topics, key, message, plan, confirm };
    dialog = h('dialog', { id: 'reset-dialog', 'aria-labelledby': 'reset-title' }, form);
    document.body.append(dialog);
  }
  const path = () => `/api/v1/groups/${enc(target[0])}/${enc(target[1])}/reset`;
  function say(cls, text) {
    f.message.className = cls;
    f.message.textContent = text;
  }
  function showPlan(p, caption) {
    f.plan.replaceChildren(table(caption,
      [['Topic'], ['Partition', 'num'], ['Committed', 'num'], ['Target', 'num'], ['Skip', 'num'], ['Read again', 'num'], ['Records written']],
      p.partitions.map((x) => [x.topic, x.partition,
        x.committed === null ? h('span', { class: 'muted' }, 'none') : num(x.committed), num(x.target),
        x.committed === null ? h('span', { class: 'muted' }, 'n/a') : num(x.skip),
        x.committed === null ? h('span', { class: 'muted' }, 'n/a') : num(x.reread),
        x.first_time_ms ? `${new Date(x.first_time_ms).toISOString()} to ${new Date(x.last_time_ms).toISOString()}` : (x.note || '')]),
      'No partition to reset.'));
  }
  async function dryRun() {
    try {
      const b = body();
      const a = await send('POST', path(), { ...b, dry_run: true }, f.key.value.trim());
      showPlan(a.plan, `Dry run: ${num(a.plan.skip)} offsets skipped, ${num(a.plan.reread)} read again`);
      if (a.would_refuse) {
        say('banner bad', `The reset would be refused: ${a.would_refuse}`);
        planned = null;
      } else {
        say('banner ok', 'Nothing changed yet. Reset offsets commits this plan.');
        planned = JSON.stringify(b);
      }
      f.confirm.disabled = planned === null;
    } catch (err) {
      say('banner bad', err.status === 401 || err.status === 403 ? 'This key cannot read the plan.' : `No plan: ${err.message}`);
    }
  }
  async function execute(e) {
    e.preventDefault();
    const b = body();
    if (planned !== JSON.stringify(b)) {
      say('banner bad', 'The choices changed since the dry run: run it again first.');
      return;
    }
    try {
      const a = await send('POST', path(), { ...b, dry_run: false }, f.key.value.trim());
      showPlan(a.plan, `Reset: ${num(a.plan.skip)} offsets skipped, ${num(a.plan.reread)} read again`);
      say(a.recorded ? 'banner ok' : 'banner bad', a.recorded
        ? 'Committed, and recorded as the group\'s own reset (skipped offsets count as skipped, not lost).'
        : `Committed, but not recorded by the collector: ${a.record_error}`);
      planned = null;
      f.confirm.disabled = true;
    } catch (err) {
      say('banner bad', err.status === 401 || err.status === 403
        ? 'Resetting needs an admin key (streamsight keys create --scope admin).'
        : `Not reset: ${err.message}`);
    }
  }
  return (cluster, groupName) => {
    if (!dialog) build();
    target = [cluster, groupName];
    planned = null;
    f.confirm.disabled = true;
    f.plan.replaceChildren();
    say('', '');
    dialog.showModal();
    f.to.focus();
  };
})();

// Redrive dead letters: the selected ones of a DLQ topic (or all of it, or
// those of a reason), a dry run first, then a run whose progress is followed.
// Each dead letter is sent at most once: the collector's log says which went.
const dlqSelected = new Set();
const redriveDialog = (() => {
  let dialog = null;
  let f = null;
  let planned = null;
  let dlqTopic = null;
  let letters = [];
  let toSend = 0;
  const body = () => {
    const selection = {};
    if (letters.length) selection.letters = letters;
    const reason = f.reason.value.trim();
    if (reason) selection.reason = reason;
    const to = f.toTopic.value.trim();
    if (to) selection.to_topic = to;
    const rate = Number(f.rate.value);
    if (f.rate.value.trim() && rate > 0) selection.rate = rate;
    return selection;
  };
  const changed = () => { planned = null; f.confirm.disabled = true; };
  function build() {
    const cluster = h('input', { id: 'redrive-cluster', type: 'text', size: 20, spellcheck: 'false', oninput: changed });
    const reason = h('input', { id: 'redrive-reason', type: 'text', size: 24, spellcheck: 'false', oninput: changed });
    const toTopic = h('input', { id: 'redrive-to-topic', type: 'text', size: 24, spellcheck: 'false', oninput: changed });
    const rate = h('input', { id: 'redrive-rate', type: 'number', min: 1, max: 100000, value: 1000, oninput: changed });
    const key = h('input', { id: 'redrive-key', type: 'password', autocomplete: 'off' });
    const scope = h('p', { id: 'redrive-scope' });
    const message = h('div', { id: 'redrive-message', role: 'status' });
    const plan = h('div', { id: 'redrive-plan' });
    const dry = h('button', { type: 'button', id: 'redrive-dry-run', onclick: dryRun }, 'Dry run');
    const confirm = h('button', { type: 'submit', id: 'redrive-confirm', disabled: true }, 'Redrive');
    const cancel = h('button', { type: 'button', class: 'secondary', onclick: () => dialog.close() }, 'Close');
    const form = h('form', { method: 'dialog', onsubmit: execute },
      h('h2', { id: 'redrive-title' }, 'Redrive dead letters'),
      h('p', { class: 'muted' }, 'Each dead letter goes back to its source topic (or the topic named here) with its key, value and headers; its provenance headers are replaced by a streamsight-redrive header. A dry run shows what would go where; none is ever sent twice.'),
      scope,
      h('p', {}, h('label', { for: 'redrive-cluster' }, 'Cluster (as the collector polls it) '), cluster),
      h('p', {}, h('label', { for: 'redrive-reason' }, 'Only this error class or stage (blank: any) '), reason),
      h('p', {}, h('label', { for: 'redrive-to-topic' }, 'Send to (blank: each letter\'s source topic) '), toTopic),
      h('p', {}, h('label', { for: 'redrive-rate' }, 'Records per second '), rate),
      h('p', {}, h('label', { for: 'redrive-key' }, 'Admin key (only if this tab\'s key cannot redrive) '), key),
      plan, message,
      h('p', {}, dry, ' ', confirm, ' ', cancel));
    f = { cluster, reason, toTopic, rate, key, scope, message, plan, confirm };
    dialog = h('dialog', { id: 'redrive-dialog', 'aria-labelledby': 'redrive-title' }, form);
    document.body.append(dialog);
  }
  const path = () => `/api/v1/dlq/${enc(f.cluster.value.trim())}/${enc(dlqTopic)}/redrive`;
  function say(cls, text) {
    f.message.className = cls;
    f.message.textContent = text;
  }
  function showPlan(p) {
    const where = Object.entries(p.by_topic).map(([t, n]) => `${num(n)} to ${t}`).join(', ') || 'nothing';
    f.plan.replaceChildren(table(`Dry run: ${num(p.to_send)} to send (${where}), ${num(p.already_sent)} already sent, ${num(p.in_flight)} in flight, ${num(p.no_destination)} without a destination`,
      [['Partition', 'num'], ['Offset', 'num'], ['Error'], ['Stage'], ['Goes to'], ['Status']],
      p.letters.slice(0, 50).map((l) => [l.partition, num(l.offset), l.error_class ? h('code', {}, l.error_class) : unknown(), l.stage || '',
        l.to_topic ? `${l.to_topic}${l.to_partition === null ? ' (by key)' : `[${l.to_partition}]`}` : h('span', { class: 'muted' }, 'no destination'),
        l.sent_to ? `sent to ${l.sent_to.topic}[${l.sent_to.partition}]@${l.sent_to.offset}` : l.status.replace('_', ' ')]),
      'No dead letter is selected.'));
  }
  async function dryRun() {
    try {
      const b = body();
      const a = await send('POST', path(), { selection: b, dry_run: true }, f.key.value.trim());
      showPlan(a.plan);
      toSend = a.plan.to_send + a.plan.in_flight;
      if (a.plan.to_send === 0 && a.plan.in_flight === 0) {
        say('banner ok', 'Nothing to send: every selected dead letter was sent already, or has no destination.');
        planned = null;
      } else {
        say('banner ok', 'Nothing sent yet. Redrive sends these.');
        planned = JSON.stringify([f.cluster.value.trim(), b]);
      }
      f.confirm.disabled = planned === null;
    } catch (err) {
      say('banner bad', err.status === 401 || err.status === 403 ? 'This key cannot read the plan.' : `No plan: ${err.message}`);
    }
  }
  async function follow(run) {
    for (;;) {
      const s = await api(`/api/v1/redrives/${enc(run)}`);
      const l = s.live || {};
      const text = `Redrive ${run}: sent ${num(l.sent || 0)} of ${num(toSend)}`
        + `${l.already_sent ? `, ${num(l.already_sent)} sent before` : ''}${l.settled_sent ? `, ${num(l.settled_sent)} found sent by a run that stopped` : ''}`;
      if (l.done || s.interrupted) {
        say(l.error || s.interrupted ? 'banner bad' : 'banner ok', l.error ? `${text}. Stopped: ${l.error} (redrive again to resume: nothing is sent twice).` : `${text}. Done.`);
        return;
      }
      say('banner', `${text}…`);
      await new Promise((r) => { setTimeout(r, 500); });
    }
  }
  async function execute(e) {
    e.preventDefault();
    const b = body();
    if (planned !== JSON.stringify([f.cluster.value.trim(), b])) {
      say('banner bad', 'The choices changed since the dry run: run it again first.');
      return;
    }
    try {
      const a = await send('POST', path(), { selection: b, dry_run: false }, f.key.value.trim());
      planned = null;
      f.confirm.disabled = true;
      await follow(a.run);
    } catch (err) {
      say('banner bad', err.status === 401 || err.status === 403
        ? 'Redriving needs an admin key (streamsight keys create --scope admin).'
        : `Not redriven: ${err.message}`);
    }
  }
  return (cluster, topic) => {
    if (!dialog) build();
    dlqTopic = topic;
    letters = [...dlqSelected].map((k) => k.split('\u0000')).filter(([c, t]) => c === cluster && t === topic)
      .map(([, , p, o]) => ({ partition: Number(p), offset: Number(o) }));
    f.cluster.value = cluster;
    f.scope.textContent = letters.length ? `${letters.length} selected dead letter(s) of ${topic}.` : `Every dead letter of ${topic} (select some on the page to narrow).`;
    planned = null;
    f.confirm.disabled = true;
    f.plan.replaceChildren();
    say('', '');
    dialog.showModal();
    f.reason.focus();
  };
})();

async function endSilence(id) {
  try {
    await send('DELETE', `/api/v1/silences/${enc(id)}`);
    start();
  } catch (err) {
    live.error = err.status === 401 || err.status === 403 ? 'ending a silence needs an admin key' : err.message;
    showFreshness();
  }
}

const alertsPage = {
  title: () => 'Alerts',
  url: () => '/api/v1/alerts',
  render(d) {
    const labels = (l) => Object.entries(l).map(([k, v]) => `${k}=${v}`).join(', ');
    // An anomaly rule's threshold in its direction must be passed too (Rule::anomaly_passes_threshold).
    const floor = (r) => (r.anomaly === 'rise' && r.above ? ` and above ${r.above}`
      : r.anomaly === 'drop' && r.below !== null ? ` and below ${r.below}` : '');
    const condition = (r) => (r.anomaly ? `anomalous ${r.anomaly} (${r.sensitivity ?? 4} spreads)${floor(r)}`
      : r.below !== null ? `below ${r.below}` : `above ${r.above ?? 0}${r.statuses.length ? ` (${r.statuses.join(', ')})` : ''}`);
    return [
      h('h1', {}, 'Alerts'),
      d.evaluated === false ? h('div', { class: 'banner bad', role: 'status', id: 'not-evaluated' }, 'Rules are not being evaluated: ' + (d.not_evaluated_because || 'no reason given') + '. No alert here does not mean all is well; alerts below are stale, shown as last judged.') : null,
      h('p', {}, 'A series with no value for its rule\'s window is "no data", never ok; it resolves only when data says so.'),
      table(`Alerts (${d.alerts.length})`, [['State'], ['Rule'], ['Labels'], ['Summary'], ['Since'], ['Value', 'num'], ['']],
        d.alerts.map((a) => [a.stale ? [badge(a.state), h('span', { class: 'muted' }, ' (stale)')] : badge(a.state), a.rule, h('code', {}, labels(a.labels)), [a.summary, a.silenced ? h('span', { class: 'muted' }, ' (silenced)') : ''],
          ago(a.since_ms, d.now_ms), a.value === null ? unknown() : num(Math.round(a.value * 100) / 100),
          h('button', { type: 'button', class: 'secondary', 'aria-label': `Silence ${a.rule} ${labels(a.labels)}`, onclick: () => silenceDialog({ alertname: a.rule, ...a.labels }) }, 'Silence…')]),
        'No alert is pending, firing, without data or recently resolved.'),
      h('h2', {}, 'Silences'),
      h('p', {}, h('button', { type: 'button', id: 'new-silence', onclick: () => silenceDialog({}) }, 'New silence…')),
      table(`Active silences (${d.silences.length})`, [['Matchers'], ['Ends'], ['Comment'], ['']],
        d.silences.map((s) => [h('code', {}, labels(s.matchers)), `in ${duration((s.until_ms - d.now_ms) / 1000)}`, s.comment,
          h('button', { type: 'button', class: 'secondary', 'aria-label': `End the silence of ${labels(s.matchers)}`, onclick: () => endSilence(s.id) }, 'End')]),
        'No silence is active.'),
      table('Rules', [['Rule'], ['Signal'], ['Condition'], ['For'], ['No data after'], ['From'], ['Enabled']],
        d.rules.map((r) => [r.name, r.signal, condition(r), r.for, r.no_data_after, r.source, r.enabled ? 'yes' : h('span', { class: 'muted' }, 'off')])),
      h('p', { class: 'muted' }, 'Rules come from the defaults, [serve.alerts] in the configuration, or PUT /api/v1/rules/NAME (admin keys), which replaces a rule of the same name.'),
      table('Notifiers', [['Receiver'], ['Format'], ['Sent', 'num'], ['Failed', 'num'], ['Last error']],
        d.notifiers.map((n) => [h('code', {}, n.url), n.format, num(n.sent), num(n.failed), n.last_error || '']), 'No notifier is configured ([[serve.alerts.notifiers]]): alerts show here and in /metrics only.'),
    ];
  },
};

// A message's path: every span, log line and dead letter in time order, then
// where it stopped for each group that reads it.
const journeyPage = {
  title: ([id]) => `Journey ${id}`,
  url: ([id]) => `/api/v1/journeys/${enc(id)}`,
  render(d) {
    // Whole milliseconds, as the CLI counts them: the steps come in time order
    // and the column never goes back.
    const whenOf = (s) => (s.kind === 'span' ? Math.floor(s.start_ns / 1e6) : s.at_ms);
    const times = d.steps.map(whenOf).filter((t) => t !== null && t !== undefined);
    const first = times.length ? Math.min(...times) : 0;
    const at = (s) => { const t = whenOf(s); return t === null || t === undefined ? unknown() : `+${t - first} ms`; };
    const place = (m) => (m ? `${m.topic}[${m.partition ?? '?'}]${m.offset !== null && m.offset !== undefined ? ` @${m.offset}` : ''}${m.group ? ` · ${m.group}` : ''}` : '');
    const what = (s) => {
      if (s.kind === 'span') return [s.name, s.messaging ? [' ', h('code', {}, place(s.messaging))] : '', s.error ? [' ', badge('error'), ' ', s.error] : ''];
      if (s.kind === 'log') return [s.severity ? `${s.severity}: ` : '', s.body];
      if (s.kind === 'redriven') return [badge('redriven'), ` from ${s.dlq_topic}@${s.dlq_offset} to `, h('code', {}, place(s.to)), ` (redrive ${s.run}): what follows there is its second attempt`];
      return [badge('dead_lettered'), ` to ${s.dlq_topic}@${s.dlq_offset} at stage ${s.stage || '?'} (${s.error_class || '?'})`, s.error_message ? `: ${s.error_message}` : ''];
    };
    const m = d.message;
    const verdictText = (v) => {
      switch (v.verdict) {
        case 'processed': return 'processed';
        case 'failed_processing': return `failed while processing: ${v.error}`;
        case 'dead_lettered': return `dead-lettered at stage ${v.stage || '?'} to ${v.dlq_topic}`;
        case 'redriven': return `dead-lettered, then redriven to ${v.topic}[${v.partition}] @${num(v.offset)}: its second attempt is not seen processed yet`;
        case 'processed_on_redrive': return `processed on its second attempt, after a redrive to ${v.topic}[${v.partition}] @${num(v.offset)}`;
        case 'not_yet_consumed': return `not yet consumed: committed ${num(v.committed)}, ${num(v.behind)} behind it`;
        case 'skipped': return 'skipped: the group\'s offsets jumped over it';
        case 'expired': return 'expired: retention deleted it before the group read it';
        case 'consumed_no_processing_span': return 'consumed (committed past it), but no span says it was processed';
        default: return `unknown: ${v.why || ''}`;
      }
    };
    return [
      h('h1', {}, 'Journey ', h('code', {}, d.trace_id)),
      m ? h('p', {}, 'Message ', m.cluster ? h('a', { href: topicHref(m.cluster, m.topic) }, `${m.cluster}/${m.topic}`) : m.topic, ` partition ${m.partition}, offset ${num(m.offset)}`,
        m.cluster && m.offset !== null && m.offset !== undefined ? [' (', h('a', { href: recordHref(m.cluster, m.topic, m.partition, m.offset) }, 'read the record'), ')'] : '') : null,
      d.linked_traces.length ? h('p', { class: 'muted' }, 'Linked traces: ', d.linked_traces.map((t) => [h('a', { href: `/journeys/${t}` }, t), ' '])) : null,
      d.failed_send ? h('div', { class: 'banner bad', role: 'alert' }, h('strong', {}, 'The send failed: '), `${d.failed_send.topic}: `, d.failed_send.errors.map(([e, n]) => `${e} ×${num(n)}`).join(', ')) : null,
      table('Where it stopped, per group', [['Group'], ['Verdict']],
        d.verdicts.map((v) => [m && m.cluster ? h('a', { href: groupHref(m.cluster, v.group) }, v.group) : v.group, verdictText(v)]), 'No group is known to read it.'),
      d.notes.map((n) => h('p', { class: 'muted' }, n)),
      table(`Timeline (${d.steps.length})`, [['At', 'num'], ['Kind'], ['Service'], ['What']],
        d.steps.map((s) => [at(s), s.kind.replace('_', ' '), s.service || '', what(s)]), 'Nothing recorded.'),
    ];
  },
};

const recordHref = (c, t, p, o) => `/records/${enc(c)}/${enc(t)}/${p}/${o}`;

// One record, read from the cluster once (each read is a Kafka client of its own).
const recordPage = {
  title: ([c, t, p, o]) => `Record ${t}[${p}]@${o}`,
  url: ([c, t, p, o]) => `/api/v1/records/${enc(c)}/${enc(t)}/${enc(p)}/${enc(o)}`,
  keyScope: 'payloads',
  once: true,
  render(d) {
    const shown = (v) => {
      switch (v.encoding) {
        case 'null': return h('span', { class: 'muted' }, 'null');
        case 'json': return h('pre', { class: 'preview' }, JSON.stringify(v.json, null, 2));
        case 'text': return h('pre', { class: 'preview' }, v.text);
        case 'confluent': return [h('span', { class: 'muted' }, `schema id ${v.schema_id}${v.format ? `, ${v.format}` : ''} `), v.note ? h('p', { class: 'muted' }, v.note) : '', v.json ? h('pre', { class: 'preview' }, JSON.stringify(v.json, null, 2)) : h('code', { class: 'preview' }, v.hex_preview)];
        default: return [h('span', { class: 'muted' }, `${num(v.bytes)} bytes${v.hex ? ', hex' : ''}${v.truncated ? ', first bytes only' : ''} `), h('code', { class: 'preview' }, v.preview)];
      }
    };
    return [
      h('p', { class: 'muted' }, h('a', { href: '/' }, 'Overview'), ' › ', h('a', { href: topicHref(d.cluster, d.topic) }, `${d.cluster}/${d.topic}`)),
      h('h1', {}, `Record ${d.topic}[${d.partition}] @ ${num(d.offset)}`),
      d.note ? h('p', { class: 'banner warn' }, d.note) : null,
      h('dl', { class: 'facts' },
        h('dt', {}, 'Timestamp'), h('dd', {}, d.timestamp_ms === null ? unknown() : `${new Date(d.timestamp_ms).toISOString()} (${d.timestamp_type.replace('_', ' ')})`),
        h('dt', {}, 'Key'), h('dd', {}, shown(d.key))),
      table(`Headers (${d.headers.length}${d.headers_not_shown ? ` of ${d.headers.length + d.headers_not_shown}` : ''})`, [['Name'], ['Value']],
        d.headers.map(([k, v]) => [k, shown(v)]), 'No headers.'),
      h('h2', {}, 'Value'), shown(d.value),
    ];
  },
};

const ROUTES = [
  [/^\/records\/([^/]+)\/([^/]+)\/(\d+)\/(\d+)$/, recordPage],
  [/^\/journeys\/([^/]+)$/, journeyPage],
  [/^\/alerts$/, alertsPage],
  [/^\/$/, overview],
  [/^\/groups\/([^/]+)\/([^/]+)$/, group],
  [/^\/topics\/([^/]+)\/([^/]+)$/, topic],
  [/^\/pathways$/, pathways],
  [/^\/dlq$/, dlq],
  [/^\/probes$/, probes],
  [/^\/clusters$/, clusters],
];

// On a sharded log an answer names the shards nobody answered for: the page
// says it is partial rather than showing less as if it were all.
function partial(d) {
  const missing = d && d.shards && d.shards.missing;
  if (!missing || !missing.length) return null;
  return h('div', { class: 'banner bad', role: 'status', id: 'partial' },
    `Partial: ${missing.length} of ${d.shards.count} shards (${missing.join(', ')}) are held by no node that answered; what they hold is missing from this page until another node takes them over.`);
}

async function refresh(page, args) {
  clearTimeout(live.timer);
  live.once = !!page.once;
  try {
    const data = await api(page.url(args));
    if (data.refresh_ms) live.refreshMs = data.refresh_ms;
    // Keep the keyboard where it was across a refresh.
    const focused = document.activeElement && main.contains(document.activeElement) ? document.activeElement.getAttribute('href') || document.activeElement.id : null;
    const y = window.scrollY;
    for (const c of live.charts) c.destroy();
    live.charts = [];
    main.replaceChildren(...[partial(data), page.render(data)].flat(Infinity).filter(Boolean));
    window.scrollTo(0, y);
    if (focused) {
      const again = [...main.querySelectorAll('[href],[id]')].find((el) => el.getAttribute('href') === focused || el.id === focused);
      if (again) again.focus({ preventScroll: true });
    }
    // What the scale benchmark reads: navigation start to the first data on screen.
    if (!live.lastOk) performance.mark('streamsight-rendered');
    live.lastOk = Date.now();
    live.error = null;
    document.body.dataset.loaded = 'true';
  } catch (e) {
    if (e instanceof AuthNeeded) {
      main.replaceChildren(keyForm(page.keyScope));
      live.error = 'a key is needed';
      showFreshness();
      return;
    }
    live.error = e.message;
    if (!live.lastOk) main.replaceChildren(h('div', { class: 'banner bad', role: 'alert' }, `Cannot load this page: ${e.message}`));
    document.body.dataset.loaded = 'error';
  }
  showFreshness();
  if (!page.once) live.timer = setTimeout(() => refresh(page, args), live.refreshMs);
}

function start() {
  for (const a of document.querySelectorAll('header nav a')) {
    if (a.getAttribute('href') === location.pathname) a.setAttribute('aria-current', 'page');
  }
  for (const [re, page] of ROUTES) {
    const m = location.pathname.match(re);
    if (m) {
      const args = m.slice(1).map(decodeURIComponent);
      document.title = `${page.title(args)} · streamsight`;
      refresh(page, args);
      return;
    }
  }
  main.replaceChildren(h('h1', {}, 'Not found'), h('p', {}, h('a', { href: '/' }, 'Back to the overview')));
}

start();
