//! Rebalances, from successive polls of a cluster's groups: each group's state,
//! epoch and members at every poll, how often it rebalanced in the last hour, how
//! long it was not `Stable`, which members left and came back, and the likely
//! cause in words. Pure: time is the snapshot's, every list is bounded.

use crate::snapshot::{GroupSnapshot, Snapshot};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use streamsight_core::Millis;

/// What "recent" means for the counts: an hour, as rebalances per hour.
pub const WINDOW_MS: i64 = 3_600_000;
/// Rebalances an hour from which a group is in a storm (the default rule's threshold).
pub const STORM_PER_HOUR: usize = 6;
/// Entries kept per group: rebalances, departures, timeline points.
const KEPT: usize = 120;
/// Groups followed per cluster; past this, new ones are not.
const MAX_GROUPS: usize = 100_000;

/// One poll's view of a group, for the timeline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MembershipPoint {
    pub at_ms: i64,
    pub state: Option<String>,
    pub epoch: Option<i32>,
    /// `None` when no describe answered this poll: unknown, never 0.
    pub members: Option<usize>,
    /// Why the members are unknown this poll (the describe's error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_because: Option<String>,
}

/// A member that left the group, and whether the same client came back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Departure {
    pub at_ms: i64,
    pub client_id: String,
    pub host: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct GroupMembership {
    /// When each rebalance was first seen, newest last.
    rebalances: VecDeque<i64>,
    /// Members that left, newest last.
    departures: VecDeque<Departure>,
    /// Every poll's state and member count, newest last.
    timeline: VecDeque<MembershipPoint>,
    /// (when, how long) of each stretch between two polls not `Stable`.
    #[serde(skip)]
    unstable: VecDeque<(i64, i64)>,
    #[serde(skip)]
    members: BTreeMap<String, (String, String)>,
    /// The member ids of the last poll that saw any: a group that empties and
    /// fills again with others (one member leaving after `max.poll.interval.ms`
    /// and joining again with a new id) rebalanced, though no poll saw it
    /// rebalancing.
    #[serde(skip)]
    seated: BTreeSet<String>,
    #[serde(skip)]
    last: Option<MembershipPoint>,
}

/// What the API and the signals read of a group's rebalances at `now`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rebalances {
    pub last_hour: usize,
    /// Milliseconds of the last hour the group was seen not `Stable`.
    pub not_stable_ms: i64,
    /// Members that left in the last hour.
    pub departures: Vec<Departure>,
    pub storm: bool,
    /// The likely cause, in words, while rebalances were seen this hour.
    pub cause: Option<String>,
    pub timeline: Vec<MembershipPoint>,
}

/// Any state but settled ones is a rebalance under way: Kafka's
/// `PreparingRebalance`, `CompletingRebalance`, KIP-848's `Assigning`,
/// `Reconciling`, `NotReady`, and what other brokers answer (tansu: `Unknown`).
fn rebalancing(state: Option<&str>) -> bool {
    state.is_some_and(|s| !matches!(s, "Stable" | "Empty" | "Dead"))
}

fn push<T>(q: &mut VecDeque<T>, v: T) {
    if q.len() >= KEPT {
        q.pop_front();
    }
    q.push_back(v);
}

impl GroupMembership {
    fn observe(&mut self, g: &GroupSnapshot, at: Millis) {
        if !g.described {
            // Nobody said who is in the group: a point that says so, and
            // nothing counted from it (no rebalance, no time not Stable, no
            // member leaving); the next described poll compares with the
            // last described one.
            let why = g.error.clone().unwrap_or_else(|| "the group was not described".into());
            let point = MembershipPoint {
                at_ms: at.0,
                state: g.state.clone(),
                epoch: None,
                members: None,
                unknown_because: Some(why),
            };
            push(&mut self.timeline, point);
            return;
        }
        let point = MembershipPoint {
            at_ms: at.0,
            state: g.state.clone(),
            epoch: g.group_epoch,
            members: Some(g.members.len()),
            unknown_because: None,
        };
        // By identity: a static member restarting (KIP-345) gets a new member
        // id and no rebalance; it is the same member, not one gone and one new.
        let members: BTreeMap<String, (String, String)> = g
            .members
            .iter()
            .map(|m| (m.identity().to_owned(), (m.client_id.clone(), m.host.clone())))
            .collect();
        if let Some(last) = &self.last {
            let entered = rebalancing(point.state.as_deref()) && !rebalancing(last.state.as_deref());
            let epoch_moved = matches!((last.epoch, point.epoch), (Some(a), Some(b)) if b > a);
            // A rebalance quicker than a poll: both settled, other members
            // than the last seated ones (an empty group filling again too).
            let swapped = !rebalancing(point.state.as_deref())
                && !rebalancing(last.state.as_deref())
                && !members.is_empty()
                && self.seated.iter().ne(members.keys());
            if entered || epoch_moved || swapped {
                push(&mut self.rebalances, at.0);
            }
            if point.state.as_deref() != Some("Stable") {
                push(&mut self.unstable, (at.0, at.0.saturating_sub(last.at_ms)));
            }
            for (id, (client_id, host)) in &self.members {
                if !members.contains_key(id) {
                    push(
                        &mut self.departures,
                        Departure {
                            at_ms: at.0,
                            client_id: client_id.clone(),
                            host: host.clone(),
                        },
                    );
                }
            }
        }
        if !members.is_empty() {
            self.seated = members.keys().cloned().collect();
        }
        self.members = members;
        push(&mut self.timeline, point.clone());
        self.last = Some(point);
    }

    pub fn at(&self, now: Millis) -> Rebalances {
        let since = now.0.saturating_sub(WINDOW_MS);
        let last_hour = self.rebalances.iter().filter(|&&t| t > since).count();
        let departures: Vec<Departure> = self.departures.iter().filter(|d| d.at_ms > since).cloned().collect();
        let timeline: Vec<MembershipPoint> = self.timeline.iter().filter(|p| p.at_ms > since).cloned().collect();
        let most_members = timeline.iter().filter_map(|p| p.members).max().unwrap_or(0);
        let cause = (last_hour > 0).then(|| cause(&departures, last_hour, most_members));
        Rebalances {
            last_hour,
            not_stable_ms: self.unstable.iter().filter(|(t, _)| *t > since).map(|(_, d)| d).sum(),
            storm: last_hour >= STORM_PER_HOUR,
            cause,
            departures,
            timeline,
        }
    }
}

/// One member leaving again and again is that member (its poll loop exceeding
/// `max.poll.interval.ms`, or a crash loop); many members leaving together is
/// the group being restarted (a deploy). Where the broker names no client id
/// (tansu), departures cannot be told apart, unless the group never had more
/// than one member: then they are all that one.
fn cause(departures: &[Departure], rebalances: usize, most_members: usize) -> String {
    let cycling = " — its processing exceeding max.poll.interval.ms, or a crash loop";
    let unnamed = departures.iter().all(|d| d.client_id.is_empty());
    if unnamed && departures.len() >= 2 && most_members <= 1 {
        return format!(
            "one member cycling: the group's only member left {} times in the hour \
             (the broker names no client id or host){cycling}",
            departures.len()
        );
    }
    let mut by_client: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for d in departures.iter().filter(|d| !d.client_id.is_empty()) {
        *by_client.entry((&d.client_id, &d.host)).or_default() += 1;
    }
    let times: BTreeSet<i64> = departures.iter().map(|d| d.at_ms).collect();
    let most = by_client.iter().max_by_key(|(_, n)| **n);
    match most {
        Some((&(client, host), &n)) if n >= 2 && n * 2 > departures.len() => {
            format!("one member cycling: {client} at {host} left {n} times in the hour{cycling}")
        }
        _ if (by_client.len() >= 2 || unnamed) && times.len() < departures.len() => format!(
            "{} members left at the same polls: the group was restarted (a deploy), {rebalances} rebalance(s)",
            departures.len()
        ),
        _ if departures.is_empty() => {
            format!("{rebalances} rebalance(s) with no member leaving: members joining, or subscriptions changing")
        }
        _ => format!("{rebalances} rebalance(s); {} member departure(s)", departures.len()),
    }
}

/// The rebalances of one cluster's groups.
#[derive(Clone, Debug, Default)]
pub struct Membership {
    groups: BTreeMap<String, GroupMembership>,
}

impl Membership {
    /// Takes one poll in. Groups the brokers no longer list are dropped.
    pub fn observe(&mut self, snap: &Snapshot) {
        if snap.groups_listed {
            let present: BTreeSet<&str> = snap.groups.iter().map(|g| g.name.as_str()).collect();
            self.groups.retain(|name, _| present.contains(name.as_str()));
        }
        for g in &snap.groups {
            if !self.groups.contains_key(&g.name) && self.groups.len() >= MAX_GROUPS {
                continue;
            }
            self.groups.entry(g.name.clone()).or_default().observe(g, snap.at);
        }
    }

    pub fn group(&self, name: &str) -> Option<&GroupMembership> {
        self.groups.get(name)
    }

    pub fn groups(&self) -> impl Iterator<Item = (&str, &GroupMembership)> {
        self.groups.iter().map(|(k, v)| (k.as_str(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::MemberSnapshot;

    fn member(id: &str, client: &str) -> MemberSnapshot {
        MemberSnapshot {
            member_id: id.into(),
            client_id: client.into(),
            host: format!("/{client}"),
            assignment: Vec::new(),
            member_epoch: None,
            instance_id: None,
            tasks: None,
        }
    }

    fn poll(m: &mut Membership, at_s: i64, state: &str, members: Vec<MemberSnapshot>) {
        let mut s = Snapshot::new("c", Millis(at_s * 1000));
        s.groups_listed = true;
        let mut g = GroupSnapshot::new("g");
        g.listed = true;
        g.state = Some(state.into());
        g.described = true;
        g.members = members;
        s.groups.push(g);
        m.observe(&s);
    }

    #[test]
    fn a_poll_that_could_not_describe_the_group_counts_nothing_and_says_unknown() {
        let mut m = Membership::default();
        poll(&mut m, 0, "Stable", vec![member("a-1", "a")]);
        for t in [10, 20, 30] {
            // tansu's sqlite engine: ListGroups says "unknown", the describe fails.
            let mut s = Snapshot::new("c", Millis(t * 1000));
            s.groups_listed = true;
            let mut g = GroupSnapshot::new("g");
            g.listed = true;
            g.state = Some("unknown".into());
            g.error = Some("DescribeGroups failed: broker closed the connection".into());
            s.groups.push(g);
            m.observe(&s);
        }
        poll(&mut m, 40, "Stable", vec![member("a-1", "a")]);
        let r = m.group("g").unwrap().at(Millis(41_000));
        assert_eq!((r.last_hour, r.not_stable_ms), (0, 0), "{r:?}");
        assert!(r.departures.is_empty(), "{r:?}");
        let unknown: Vec<_> = r.timeline.iter().filter(|p| p.members.is_none()).collect();
        assert_eq!(unknown.len(), 3);
        assert!(
            unknown[0]
                .unknown_because
                .as_deref()
                .unwrap()
                .contains("DescribeGroups")
        );
        assert_eq!(r.timeline.last().unwrap().members, Some(1));
    }

    #[test]
    fn one_member_cycling_is_named_and_counted() {
        let mut m = Membership::default();
        poll(&mut m, 0, "Stable", vec![member("a-1", "a"), member("b-1", "b")]);
        for i in 0..4 {
            let t = 60 + i * 120;
            // b is kicked out (its poll loop was too slow), the group rebalances,
            // b comes back with a new member id.
            poll(&mut m, t, "PreparingRebalance", vec![member("a-1", "a")]);
            poll(
                &mut m,
                t + 10,
                "Stable",
                vec![member("a-1", "a"), member(&format!("b-{}", i + 2), "b")],
            );
        }
        let r = m.group("g").unwrap().at(Millis(600_000));
        assert_eq!(r.last_hour, 4);
        assert_eq!(r.departures.len(), 4);
        // Each interval ending at a poll not Stable: 60 s, then 110 s three times.
        assert_eq!(r.not_stable_ms, 390_000);
        assert!(!r.storm);
        let cause = r.cause.unwrap();
        assert!(cause.starts_with("one member cycling: b at /b left 4 times"), "{cause}");
        assert!(cause.contains("max.poll.interval.ms"), "{cause}");
        // An hour later, nothing is recent.
        let later = m.group("g").unwrap().at(Millis(600_000 + WINDOW_MS));
        assert_eq!((later.last_hour, later.cause), (0, None));
    }

    #[test]
    fn everyone_replaced_at_once_is_a_deploy_and_a_storm_is_six_an_hour() {
        let mut m = Membership::default();
        let generation = |n: i64| vec![member(&format!("a-{n}"), "a"), member(&format!("b-{n}"), "b")];
        poll(&mut m, 0, "Stable", generation(0));
        for n in 1..=6 {
            // Quicker than a poll: Stable both times, all new member ids.
            poll(&mut m, n * 60, "Stable", generation(n));
        }
        let r = m.group("g").unwrap().at(Millis(400_000));
        assert_eq!(r.last_hour, 6);
        assert!(r.storm);
        assert!(r.cause.unwrap().contains("restarted (a deploy)"));
        assert_eq!(r.not_stable_ms, 0);
        assert_eq!(r.timeline.len(), 7);
    }

    #[test]
    fn what_is_kept_is_bounded() {
        let mut m = Membership::default();
        for i in 0..1_000 {
            let state = if i % 2 == 0 { "Stable" } else { "PreparingRebalance" };
            poll(&mut m, i, state, vec![member(&format!("x-{i}"), "x")]);
        }
        let g = m.group("g").unwrap();
        assert!(g.rebalances.len() <= KEPT && g.departures.len() <= KEPT && g.timeline.len() <= KEPT);
    }

    #[test]
    fn a_static_member_restarting_is_the_same_member_and_no_rebalance() {
        // KIP-345: each restart within the session gives a new member id and
        // no rebalance; the instance id stays.
        let stat = |id: &str| MemberSnapshot {
            instance_id: Some("billing-0".into()),
            tasks: None,
            ..member(id, "billing")
        };
        let mut m = Membership::default();
        poll(&mut m, 0, "Stable", vec![stat("m-0"), member("d-0", "audit")]);
        for i in 1..=8 {
            poll(
                &mut m,
                i * 10,
                "Stable",
                vec![stat(&format!("m-{i}")), member("d-0", "audit")],
            );
        }
        let r = m.group("g").unwrap().at(Millis(90_000));
        assert_eq!((r.last_hour, r.departures.len(), r.storm), (0, 0, false), "{r:?}");
        // A dynamic member's new id is a rebalance and a departure.
        poll(&mut m, 100, "Stable", vec![stat("m-8"), member("d-1", "audit")]);
        let r = m.group("g").unwrap().at(Millis(100_000));
        assert_eq!((r.last_hour, r.departures.len()), (1, 1), "{r:?}");
    }

    #[test]
    fn a_lone_member_leaving_and_rejoining_unnamed_is_counted_and_named() {
        // As tansu answers: no client id or host; the group empties between.
        let unnamed = |id: &str| MemberSnapshot {
            client_id: String::new(),
            host: String::new(),
            ..member(id, "")
        };
        let mut m = Membership::default();
        poll(&mut m, 0, "Stable", vec![unnamed("m-0")]);
        for i in 1..=6 {
            poll(&mut m, i * 10 - 5, "Empty", vec![]);
            poll(&mut m, i * 10, "Stable", vec![unnamed(&format!("m-{i}"))]);
        }
        let r = m.group("g").unwrap().at(Millis(70_000));
        assert_eq!((r.last_hour, r.departures.len()), (6, 6));
        assert!(r.storm);
        let cause = r.cause.unwrap();
        assert!(
            cause.starts_with("one member cycling: the group's only member left 6 times") && cause.contains("max.poll"),
            "{cause}"
        );
        // Two unnamed members leaving at the same polls are a restart, not one cycling.
        let mut m = Membership::default();
        poll(&mut m, 0, "Stable", vec![unnamed("a-0"), unnamed("b-0")]);
        poll(&mut m, 10, "Empty", vec![]);
        poll(&mut m, 20, "Stable", vec![unnamed("a-1"), unnamed("b-1")]);
        let r = m.group("g").unwrap().at(Millis(30_000));
        assert_eq!(r.last_hour, 1);
        assert!(r.cause.unwrap().contains("restarted (a deploy)"));
    }
}
