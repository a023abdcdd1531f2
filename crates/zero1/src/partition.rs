//! Which rank owns which parameter: balanced by element count (largest first, each to the
//! least-loaded rank; ties to the lowest rank), deterministic so every rank computes the
//! same assignment without communicating.

/// Assigns parameters of `sizes` elements to ranks whose current loads are `loads`
/// (updated in place); returns the owner of each parameter, in input order.
pub fn assign(sizes: &[usize], loads: &mut [usize]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    // Largest first; equal sizes keep declaration order.
    order.sort_by(|&a, &b| sizes[b].cmp(&sizes[a]).then(a.cmp(&b)));
    let mut owner = vec![0; sizes.len()];
    for i in order {
        let r = (0..loads.len())
            .min_by_key(|&r| (loads[r], r))
            .expect("at least one rank");
        owner[i] = r;
        loads[r] += sizes[i];
    }
    owner
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balances_by_elements_not_by_count() {
        let mut loads = vec![0; 2];
        let owner = assign(&[100, 1, 1, 1, 50, 50], &mut loads);
        assert_eq!(loads, vec![102, 101]);
        assert_eq!(owner[0], 0);
        assert_eq!((owner[4], owner[5]), (1, 1));
    }

    #[test]
    fn later_groups_fill_the_lighter_ranks() {
        let mut loads = vec![0; 3];
        assign(&[90, 60], &mut loads);
        assert_eq!(loads, vec![90, 60, 0]);
        let owner = assign(&[30, 30], &mut loads);
        assert_eq!(owner, vec![2, 2]);
        assert_eq!(loads, vec![90, 60, 60]);
    }

    #[test]
    fn every_rank_gets_work_when_there_is_enough() {
        let mut loads = vec![0; 4];
        let owner = assign(&[7; 8], &mut loads);
        assert_eq!(loads, vec![14; 4]);
        assert_eq!(owner, vec![0, 1, 2, 3, 0, 1, 2, 3]);
    }
}
