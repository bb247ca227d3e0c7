//! Server-side partition assignors for KIP-848 consumer groups (Kafka's `UniformAssignor` and
//! `RangeAssignor`, `group.consumer.assignors`). Both are sticky: a partition stays with its
//! current target owner unless balance requires moving it.

use std::collections::{BTreeMap, BTreeSet};

use kactor_protocol::Uuid;

/// Partitions per topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// What a member brings to an assignment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemberSpec {
    pub subscribed_topic_ids: BTreeSet<Uuid>,
    /// The member's current target assignment (stickiness).
    pub current: Assignment,
}

/// The group's input to an assignor.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupSpec {
    pub members: BTreeMap<String, MemberSpec>,
    /// Partition count of every topic some member subscribes to (and that exists).
    pub topic_partitions: BTreeMap<Uuid, i32>,
}

pub const UNIFORM: &str = "uniform";
pub const RANGE: &str = "range";

/// Runs the named assignor; None if the name is unknown.
pub fn assign(name: &str, spec: &GroupSpec) -> Option<BTreeMap<String, Assignment>> {
    match name {
        UNIFORM => Some(uniform(spec)),
        RANGE => Some(range(spec)),
        _ => None,
    }
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

/// Uniform: every member ends within one partition of every other member that could take
/// the same partitions; existing ownership is kept where balance allows.
pub fn uniform(spec: &GroupSpec) -> BTreeMap<String, Assignment> {
    let mut result: BTreeMap<String, Assignment> = spec
        .members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    let eligible = |member: &str, topic: &Uuid| {
        spec.members[member].subscribed_topic_ids.contains(topic)
            && spec.topic_partitions.contains_key(topic)
    };
    // 1. Keep valid current ownership (first claimant wins if two claim one partition).
    let mut owned: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    for (member, m) in &spec.members {
        for (topic, parts) in &m.current {
            if !eligible(member, topic) {
                continue;
            }
            let n = spec.topic_partitions[topic];
            for &p in parts {
                if p < n && owned.insert((*topic, p)) {
                    result
                        .get_mut(member)
                        .unwrap()
                        .entry(*topic)
                        .or_default()
                        .insert(p);
                }
            }
        }
    }
    // 2. Hand out the rest, most constrained partitions first, to the least loaded member.
    let mut unassigned: Vec<(usize, Uuid, i32)> = Vec::new();
    for (topic, &n) in &spec.topic_partitions {
        let candidates = spec.members.keys().filter(|m| eligible(m, topic)).count();
        if candidates == 0 {
            continue;
        }
        for p in 0..n {
            if !owned.contains(&(*topic, p)) {
                unassigned.push((candidates, *topic, p));
            }
        }
    }
    unassigned.sort();
    for (_, topic, p) in unassigned {
        let target = spec
            .members
            .keys()
            .filter(|m| eligible(m, &topic))
            .min_by_key(|m| (count(&result[*m]), (*m).clone()))
            .cloned();
        if let Some(member) = target {
            result
                .get_mut(&member)
                .unwrap()
                .entry(topic)
                .or_default()
                .insert(p);
        }
    }
    // 3. Balance: move partitions from the most to the least loaded eligible member until
    //    no move shrinks a gap of two or more.
    loop {
        let mut moved = false;
        let mut by_load: Vec<(usize, String)> =
            result.iter().map(|(m, a)| (count(a), m.clone())).collect();
        by_load.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        'heavy: for (heavy_load, heavy) in &by_load {
            let partitions: Vec<(Uuid, i32)> = result[heavy]
                .iter()
                .flat_map(|(t, ps)| ps.iter().rev().map(move |p| (*t, *p)))
                .collect();
            for (topic, p) in partitions {
                let light = spec
                    .members
                    .keys()
                    .filter(|m| *m != heavy && eligible(m, &topic))
                    .map(|m| (count(&result[m]), m.clone()))
                    .min();
                if let Some((light_load, light)) = light {
                    if light_load + 1 < *heavy_load {
                        let from = result.get_mut(heavy).unwrap();
                        let set = from.get_mut(&topic).unwrap();
                        set.remove(&p);
                        if set.is_empty() {
                            from.remove(&topic);
                        }
                        result
                            .get_mut(&light)
                            .unwrap()
                            .entry(topic)
                            .or_default()
                            .insert(p);
                        moved = true;
                        break 'heavy;
                    }
                }
            }
        }
        if !moved {
            break;
        }
    }
    result
}

/// Range: per topic, members subscribed to it (by member id) get contiguous shares, the
/// first `partitions % members` one more; a member keeps what it already had up to its share.
pub fn range(spec: &GroupSpec) -> BTreeMap<String, Assignment> {
    let mut result: BTreeMap<String, Assignment> = spec
        .members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (topic, &n) in &spec.topic_partitions {
        let members: Vec<&String> = spec
            .members
            .iter()
            .filter(|(_, m)| m.subscribed_topic_ids.contains(topic))
            .map(|(id, _)| id)
            .collect();
        if members.is_empty() || n <= 0 {
            continue;
        }
        let min_quota = n as usize / members.len();
        let mut extra = n as usize % members.len();
        let has_previous = members.iter().any(|m| {
            spec.members[*m]
                .current
                .get(topic)
                .is_some_and(|s| !s.is_empty())
        });
        if !has_previous {
            let mut next = 0;
            for (i, m) in members.iter().enumerate() {
                let share = min_quota + usize::from(i < extra);
                let parts: BTreeSet<i32> = (next..next + share as i32).collect();
                next += share as i32;
                if !parts.is_empty() {
                    result.get_mut(*m).unwrap().insert(*topic, parts);
                }
            }
            continue;
        }
        // Sticky pass: keep up to the minimum share; the extra slots go, in member order, to
        // members that already held more than the minimum.
        let mut taken: BTreeSet<i32> = BTreeSet::new();
        let mut quota: BTreeMap<&String, usize> = BTreeMap::new();
        for m in &members {
            let previous: Vec<i32> = spec.members[*m]
                .current
                .get(topic)
                .map(|s| s.iter().copied().filter(|p| *p < n).collect())
                .unwrap_or_default();
            let mut share = min_quota;
            if previous.len() > min_quota && extra > 0 {
                share += 1;
                extra -= 1;
            }
            let kept: BTreeSet<i32> = previous
                .into_iter()
                .filter(|p| !taken.contains(p))
                .take(share)
                .collect();
            taken.extend(kept.iter().copied());
            quota.insert(*m, share - kept.len());
            if !kept.is_empty() {
                result.get_mut(*m).unwrap().insert(*topic, kept);
            }
        }
        // Remaining extra slots go to the first members still at the minimum.
        for m in &members {
            if extra == 0 {
                break;
            }
            let held = result[*m].get(topic).map_or(0, BTreeSet::len) + quota[m];
            if held == min_quota {
                *quota.get_mut(m).unwrap() += 1;
                extra -= 1;
            }
        }
        let mut free = (0..n).filter(|p| !taken.contains(p));
        for m in &members {
            for _ in 0..quota[m] {
                if let Some(p) = free.next() {
                    result
                        .get_mut(*m)
                        .unwrap()
                        .entry(*topic)
                        .or_default()
                        .insert(p);
                }
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tid(n: u8) -> Uuid {
        Uuid([n; 16])
    }

    fn spec(members: &[(&str, &[u8])], topics: &[(u8, i32)]) -> GroupSpec {
        GroupSpec {
            members: members
                .iter()
                .map(|(m, subs)| {
                    (
                        m.to_string(),
                        MemberSpec {
                            subscribed_topic_ids: subs.iter().map(|t| tid(*t)).collect(),
                            current: Assignment::new(),
                        },
                    )
                })
                .collect(),
            topic_partitions: topics.iter().map(|(t, n)| (tid(*t), *n)).collect(),
        }
    }

    fn with_current(mut s: GroupSpec, current: &BTreeMap<String, Assignment>) -> GroupSpec {
        for (m, a) in current {
            if let Some(spec) = s.members.get_mut(m) {
                spec.current = a.clone();
            }
        }
        s
    }

    fn all_assigned_once(s: &GroupSpec, r: &BTreeMap<String, Assignment>) {
        let mut seen = BTreeSet::new();
        for a in r.values() {
            for (t, ps) in a {
                for p in ps {
                    assert!(seen.insert((*t, *p)), "partition {t:?}-{p} assigned twice");
                }
            }
        }
        let expected: usize = s
            .topic_partitions
            .iter()
            .filter(|(t, _)| {
                s.members
                    .values()
                    .any(|m| m.subscribed_topic_ids.contains(t))
            })
            .map(|(_, n)| *n as usize)
            .sum();
        assert_eq!(seen.len(), expected);
    }

    fn loads(r: &BTreeMap<String, Assignment>) -> Vec<usize> {
        r.values().map(count).collect()
    }

    #[test]
    fn uniform_balances_homogeneous() {
        let s = spec(
            &[("a", &[1, 2]), ("b", &[1, 2]), ("c", &[1, 2])],
            &[(1, 6), (2, 4)],
        );
        let r = uniform(&s);
        all_assigned_once(&s, &r);
        let l = loads(&r);
        assert!(
            l.iter().max().unwrap() - l.iter().min().unwrap() <= 1,
            "{l:?}"
        );
    }

    #[test]
    fn uniform_is_sticky_when_a_member_joins() {
        let s = spec(&[("a", &[1]), ("b", &[1])], &[(1, 6)]);
        let first = uniform(&s);
        assert_eq!(loads(&first), vec![3, 3]);
        let s2 = with_current(
            spec(&[("a", &[1]), ("b", &[1]), ("c", &[1])], &[(1, 6)]),
            &first,
        );
        let second = uniform(&s2);
        all_assigned_once(&s2, &second);
        assert_eq!(loads(&second), vec![2, 2, 2]);
        // a and b only lose partitions, never gain new ones.
        for m in ["a", "b"] {
            assert!(
                second[m][&tid(1)].is_subset(&first[m][&tid(1)]),
                "{m} moved"
            );
        }
        // Unchanged input gives the same output.
        assert_eq!(uniform(&with_current(s2.clone(), &second)), second);
    }

    #[test]
    fn uniform_heterogeneous_respects_subscriptions() {
        let s = spec(
            &[("a", &[1]), ("b", &[1, 2]), ("c", &[2])],
            &[(1, 3), (2, 3)],
        );
        let r = uniform(&s);
        all_assigned_once(&s, &r);
        assert!(!r["a"].contains_key(&tid(2)));
        assert!(!r["c"].contains_key(&tid(1)));
        assert_eq!(loads(&r), vec![2, 2, 2]);
    }

    #[test]
    fn uniform_drops_unsubscribed_and_missing() {
        let mut current = BTreeMap::new();
        current.insert(
            "a".to_string(),
            Assignment::from([(tid(9), BTreeSet::from([0]))]),
        );
        let s = with_current(spec(&[("a", &[1])], &[(1, 2)]), &current);
        let r = uniform(&s);
        assert_eq!(r["a"], Assignment::from([(tid(1), BTreeSet::from([0, 1]))]));
    }

    #[test]
    fn range_gives_contiguous_ranges_per_topic() {
        let s = spec(&[("a", &[1, 2]), ("b", &[1, 2])], &[(1, 3), (2, 4)]);
        let r = range(&s);
        assert_eq!(r["a"][&tid(1)], BTreeSet::from([0, 1]));
        assert_eq!(r["b"][&tid(1)], BTreeSet::from([2]));
        assert_eq!(r["a"][&tid(2)], BTreeSet::from([0, 1]));
        assert_eq!(r["b"][&tid(2)], BTreeSet::from([2, 3]));
    }

    #[test]
    fn range_only_counts_subscribers_of_each_topic() {
        let s = spec(&[("a", &[1]), ("b", &[1, 2])], &[(1, 2), (2, 2)]);
        let r = range(&s);
        assert_eq!(r["a"][&tid(1)], BTreeSet::from([0]));
        assert_eq!(r["b"][&tid(1)], BTreeSet::from([1]));
        assert_eq!(r["b"][&tid(2)], BTreeSet::from([0, 1]));
        assert!(!r["a"].contains_key(&tid(2)));
    }

    #[test]
    fn range_is_sticky() {
        let s = spec(&[("a", &[1]), ("b", &[1])], &[(1, 6)]);
        let first = range(&s);
        let s2 = with_current(
            spec(&[("a", &[1]), ("b", &[1]), ("c", &[1])], &[(1, 6)]),
            &first,
        );
        let second = range(&s2);
        all_assigned_once(&s2, &second);
        assert_eq!(loads(&second), vec![2, 2, 2]);
        for m in ["a", "b"] {
            assert!(
                second[m][&tid(1)].is_subset(&first[m][&tid(1)]),
                "{m} moved"
            );
        }
        assert_eq!(range(&with_current(s2.clone(), &second)), second);
    }

    #[test]
    fn unknown_assignor() {
        assert!(assign("sticky", &GroupSpec::default()).is_none());
        assert!(assign(UNIFORM, &GroupSpec::default()).is_some());
    }
}
