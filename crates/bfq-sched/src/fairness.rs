//! Weighted max-min fairness, the guarantee BFQ aims for on devices that serve many requests at once
//! (beyond the seeds: issue 12 item 3, docs/fast-devices.md "The guarantee"): each backlogged
//! application gets its weight's share of what the device delivers, except that one that cannot use
//! that much (its throughput alone) gets all it can use, and the rest is divided among the others by
//! weight. The suite's "beyond the papers" section and the fast-device tests judge runs by it.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
