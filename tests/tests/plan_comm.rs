//! Where memplan restates a choice that comm makes (comm knows nothing of models, memplan
//! depends on nothing): the two agree.

/// The worlds whose ZeRO-1 reduce-scatters hold copy-engine slots in NCCL windows.
#[test]
fn memplan_agrees_with_comm() {
    assert_eq!(memplan::CE_REDUCE_WORLDS, comm::nccl::CE_REDUCE_WORLDS);
}
