//! Weighted max-min fairness, the guarantee BFQ aims for on devices that serve many requests at once
//! (beyond the seeds: issue 12 item 3, docs/fast-devices.md "The guarantee"): each backlogged
//! application gets its weight's share of what the device delivers, except that one that cannot use
//! that much (its throughput alone) gets all it can use, and the rest is divided among the others by
//! weight. The suite's "beyond the papers" section and the fast-device tests judge runs by it. With
//! I/O classes the division goes class by class, as BFQ serves them (seed 003 sec. V; RT before BE
//! before IDLE): a class gets what the classes above it cannot use.

/// Weighted max-min fair shares of `total` among applications with weights and caps (their
/// throughput alone): water-filling (docs/fast-devices.md, "The guarantee").
pub fn max_min_shares(weights: &[f64], caps: &[f64], total: f64) -> Vec<f64> {
    let mut share = vec![0.0; weights.len()];
    let mut active: Vec<usize> = (0..weights.len()).collect();
    let mut remaining = total;
    while !active.is_empty() {
        let wsum: f64 = active.iter().map(|&i| weights[i]).sum();
        let capped: Vec<usize> =
            active.iter().copied().filter(|&i| caps[i] <= weights[i] / wsum * remaining).collect();
        if capped.is_empty() {
            for &i in &active {
                share[i] = weights[i] / wsum * remaining;
            }
            break;
        }
        for &i in &capped {
            share[i] = caps[i];
            remaining -= caps[i];
        }
        active.retain(|i| !capped.contains(i));
    }
    share
}

/// [`max_min_shares`] with I/O classes: `classes[i]` is application i's class index (RT 0, BE 1,
/// IDLE 2, [`crate::IoClass::index`]). The applications of the highest class share `total` by
/// weight with their caps; those of the next class share what is left, and so on. A class below
/// greedy ones gets nothing.
pub fn max_min_shares_by_class(weights: &[f64], caps: &[f64], classes: &[usize], total: f64) -> Vec<f64> {
    let mut share = vec![0.0; weights.len()];
    let mut remaining = total;
    let mut order: Vec<usize> = classes.to_vec();
    order.sort_unstable();
    order.dedup();
    for class in order {
        let members: Vec<usize> = (0..weights.len()).filter(|&i| classes[i] == class).collect();
        let w: Vec<f64> = members.iter().map(|&i| weights[i]).collect();
        let c: Vec<f64> = members.iter().map(|&i| caps[i]).collect();
        let part = max_min_shares(&w, &c, remaining.max(0.0));
        for (&i, s) in members.iter().zip(&part) {
            share[i] = *s;
        }
        remaining -= part.iter().sum::<f64>();
    }
    share
}

/// [`max_min_shares`] over a hierarchy of groups (seed 003 sec. V; `bfq::hierarchy`): `parents[g]`
/// is group g's parent (`None`: the root) and `group_weights[g]` its weight; application i is in
/// group `groups[i]` (`None`: the root). At each level the children (applications placed there,
/// and groups with an application below them) share what the level gets by weighted max-min, a
/// group's cap being the sum of the caps of the applications below it; a group's part is then
/// divided among its own children the same way. Groups must not form a cycle (a group found in its
/// own chain of parents is taken as a child of the root).
pub fn hierarchical_max_min_shares(
    parents: &[Option<usize>],
    group_weights: &[f64],
    groups: &[Option<usize>],
    weights: &[f64],
    caps: &[f64],
    total: f64,
) -> Vec<f64> {
    let n = parents.len();
    // Each group's parent with cycles and unknown parents cut at the root.
    let parent_of = |g: usize| parents.get(g).copied().flatten().filter(|&p| p < n && p != g);
    // Whether each group's chain of parents reaches the root, found once for all (asked along every
    // chain at every level, it took seconds for 1,000 nested groups): a walk stops at a group already
    // known, and what it finds holds for every group it passed.
    let mut reaches_root: Vec<Option<bool>> = vec![None; n];
    for start in 0..n {
        let mut path = Vec::new();
        let mut at = Some(start);
        let found = loop {
            let Some(x) = at else { break true };
            if let Some(known) = reaches_root[x] {
                break known;
            }
            if path.len() > n {
                break false;
            }
            path.push(x);
            at = parent_of(x);
        };
        for x in path {
            reaches_root[x] = Some(found);
        }
    }
    let parent: Vec<Option<usize>> =
        (0..n).map(|g| if reaches_root[g] == Some(true) { parent_of(g) } else { None }).collect();
    // The caps of the groups: the sum of the caps of the applications below them.
    let mut group_cap = vec![0.0; n];
    let mut used = vec![false; n];
    for (i, g) in groups.iter().enumerate() {
        let mut at = g.filter(|&g| g < n);
        while let Some(x) = at {
            group_cap[x] += caps[i];
            used[x] = true;
            at = parent[x];
        }
    }
    // Each level's applications and groups (index `n`: the root).
    let slot = |level: Option<usize>| level.unwrap_or(n);
    let mut apps_at: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
    for (i, g) in groups.iter().enumerate().take(weights.len()) {
        apps_at[slot(g.filter(|&g| g < n))].push(i);
    }
    let mut groups_at: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
    for g in (0..n).filter(|&g| used[g]) {
        groups_at[slot(parent[g])].push(g);
    }
    let mut share = vec![0.0; weights.len()];
    // Levels from the root down: (the level's group, what it has to divide).
    let mut levels: Vec<(Option<usize>, f64)> = vec![(None, total)];
    while let Some((level, amount)) = levels.pop() {
        let apps = &apps_at[slot(level)];
        let subgroups = &groups_at[slot(level)];
        let mut w: Vec<f64> = apps.iter().map(|&i| weights[i]).collect();
        let mut c: Vec<f64> = apps.iter().map(|&i| caps[i]).collect();
        w.extend(subgroups.iter().map(|&g| group_weights[g]));
        c.extend(subgroups.iter().map(|&g| group_cap[g]));
        let parts = max_min_shares(&w, &c, amount);
        for (k, &i) in apps.iter().enumerate() {
            share[i] = parts[k];
        }
        for (k, &g) in subgroups.iter().enumerate() {
            levels.push((Some(g), parts[apps.len() + k]));
        }
    }
    share
}

/// The share ceiling: the largest aggregate at which no application's weighted max-min share is
/// capped at its throughput alone, with the index of the application capped first above it (the
/// least `caps[i] / weights[i]`); None with no application or with several classes (the ceiling of
/// one class then depends on what the classes above it use).
///
/// Up to the ceiling every application is owed its weight's share. Above it, the application capped
/// first is owed all it gets alone, beside everyone else's I/O: a device that slows a latency-bound
/// reader with any greedy traffic beside it (both files of docs/fast-devices.md "The device's
/// frontier") cannot give that, so no scheduler keeps every share within a few percent at an
/// aggregate far above the ceiling. How far below FIFO's aggregate it lies says what holding the
/// weights costs a job on a device.
pub fn share_ceiling(weights: &[f64], caps: &[f64], classes: &[usize]) -> Option<(f64, usize)> {
    if classes.windows(2).any(|w| w[0] != w[1]) {
        return None;
    }
    let wsum: f64 = weights.iter().sum();
    (0..weights.len())
        .filter(|&i| weights[i] > 0.0)
        .map(|i| (caps[i] * wsum / weights[i], i))
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 003 sec. V with max-min: a group whose applications cannot use its share gives the rest
    /// to its siblings, and inside a group the same holds among its members.
    #[test]
    fn hierarchical_max_min_divides_level_by_level_and_passes_on_what_a_group_cannot_use() {
        // Groups 0 (weight 100) and 1 (weight 300) at the root; group 2 (100) inside group 1.
        let parents = [None, None, Some(1)];
        let group_weights = [100.0, 300.0, 100.0];
        // App 0 in group 0; app 1 in group 1; apps 2 and 3 in group 2; no caps.
        let groups = [Some(0), Some(1), Some(2), Some(2)];
        let weights = [100.0; 4];
        let inf = [f64::INFINITY; 4];
        let s = hierarchical_max_min_shares(&parents, &group_weights, &groups, &weights, &inf, 400.0);
        let round = |v: &[f64]| v.iter().map(|x| (x * 1e6).round() / 1e6).collect::<Vec<_>>();
        assert_eq!(round(&s), vec![100.0, 150.0, 75.0, 75.0]);
        // App 1 can use only 30: group 2 gets the rest of group 1's 300.
        let caps = [f64::INFINITY, 30.0, f64::INFINITY, f64::INFINITY];
        let s = hierarchical_max_min_shares(&parents, &group_weights, &groups, &weights, &caps, 400.0);
        assert_eq!(round(&s), vec![100.0, 30.0, 135.0, 135.0]);
        // Group 1 as a whole can use only 60: group 0 gets the rest.
        let caps = [f64::INFINITY, 20.0, 20.0, 20.0];
        let s = hierarchical_max_min_shares(&parents, &group_weights, &groups, &weights, &caps, 400.0);
        assert_eq!(round(&s), vec![340.0, 20.0, 20.0, 20.0]);
        // Without groups it is max_min_shares.
        let s =
            hierarchical_max_min_shares(&[], &[], &[None, None], &[100.0, 300.0], &[f64::INFINITY; 2], 40.0);
        assert_eq!(round(&s), vec![10.0, 30.0]);
    }

    #[test]
    fn groups_in_a_cycle_count_as_children_of_the_root_and_a_deep_chain_passes_its_part_down() {
        // Groups 0 and 1 are each other's parents; group 2 hangs below the cycle; group 3 is a chain
        // of 2,000 groups below the root whose last one holds an application.
        let chain = 2_000;
        let mut parents = vec![Some(1), Some(0), Some(0)];
        parents.push(None);
        for g in 3..3 + chain - 1 {
            parents.push(Some(g));
        }
        let group_weights = vec![100.0; parents.len()];
        let groups = [Some(0), Some(1), Some(2), Some(3 + chain - 1), None];
        let weights = [100.0; 5];
        let s = hierarchical_max_min_shares(
            &parents,
            &group_weights,
            &groups,
            &weights,
            &[f64::INFINITY; 5],
            500.0,
        );
        let round = |v: &[f64]| v.iter().map(|x| (x * 1e6).round() / 1e6).collect::<Vec<_>>();
        // At the root: groups 0, 1 and 2 (their chains never end), the chain's top and the root's
        // application, 100 each.
        assert_eq!(round(&s), vec![100.0; 5]);
    }

    #[test]
    fn max_min_shares_give_capped_applications_their_cap_and_the_rest_by_weight() {
        // docs/fast-devices.md "The guarantee".
        let s = max_min_shares(&[400.0, 100.0, 100.0], &[50.0, 1e9, 1e9], 1050.0);
        assert_eq!(s, vec![50.0, 500.0, 500.0]);
        let s = max_min_shares(&[1.0, 3.0], &[1e9, 1e9], 400.0);
        assert_eq!(s, vec![100.0, 300.0]);
        // A cap that only binds once another cap has been taken out.
        let s = max_min_shares(&[1.0, 1.0, 2.0], &[10.0, 45.0, 1e9], 200.0);
        assert_eq!(s, vec![10.0, 45.0, 145.0]);
    }

    #[test]
    fn a_class_shares_what_the_classes_above_it_cannot_use() {
        // Seed 003 sec. V: RT before BE before IDLE. An RT application capped at 100 leaves 300 of
        // 400 to the BE ones (1:2 by weight), nothing to IDLE.
        let s = max_min_shares_by_class(
            &[100.0, 100.0, 200.0, 100.0],
            &[100.0, 1e9, 1e9, 1e9],
            &[0, 1, 1, 2],
            400.0,
        );
        assert_eq!(s, vec![100.0, 100.0, 200.0, 0.0]);
        // BE capped too: IDLE gets the rest.
        let s = max_min_shares_by_class(&[100.0, 100.0, 100.0], &[100.0, 50.0, 1e9], &[0, 1, 2], 400.0);
        assert_eq!(s, vec![100.0, 50.0, 250.0]);
        // One class: the classless shares.
        let (w, c) = ([1.0, 1.0, 2.0], [10.0, 45.0, 1e9]);
        assert_eq!(max_min_shares_by_class(&w, &c, &[1, 1, 1], 200.0), max_min_shares(&w, &c, 200.0));
    }

    #[test]
    fn the_share_ceiling_is_where_the_first_application_reaches_its_throughput_alone() {
        // docs/fast-devices.md "The guarantee" and "The share ceiling": two random readers of
        // weight 100 that read 85 MiB/s alone beside two sequential readers of weight 1000 that read
        // 1,500: each random reader's share, 100/2200 of the aggregate, reaches 85 at 1,870 MiB/s.
        let (w, c) = ([1000.0, 1000.0, 100.0, 100.0], [1500.0, 1500.0, 85.0, 85.0]);
        let (ceiling, first) = share_ceiling(&w, &c, &[1, 1, 1, 1]).unwrap();
        assert!((ceiling - 1870.0).abs() < 1e-9);
        assert_eq!(first, 2);
        // Below it nobody is capped: the shares are the weights' shares.
        let s = max_min_shares(&w, &c, ceiling - 1.0);
        assert!((s[2] - (ceiling - 1.0) / 22.0).abs() < 1e-9);
        // Above it the random readers are owed what they read alone.
        assert_eq!(max_min_shares(&w, &c, ceiling + 100.0)[2], 85.0);
        // The weights the other way round (fast-seq-rand-1-4's 400 against 100): 85 x 1200 / 400.
        let (w, c) =
            ([100.0, 100.0, 100.0, 100.0, 400.0, 400.0], [1500.0, 1500.0, 1500.0, 1500.0, 85.0, 85.0]);
        assert_eq!(share_ceiling(&w, &c, &[1; 6]).map(|x| x.0), Some(255.0));
        // Several classes, or nobody: no ceiling.
        assert_eq!(share_ceiling(&w, &c, &[0, 1, 1, 1, 1, 1]), None);
        assert_eq!(share_ceiling(&[], &[], &[]), None);
    }
}
