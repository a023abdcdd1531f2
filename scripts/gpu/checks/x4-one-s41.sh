#!/usr/bin/env bash
# Session 41, for the next 4-GPU call (W=2 on a 2-GPU kind), about 7 minutes. Copy this,
# phases.py and train-runs.sh into .gpu/ (with nccl/). Run `x4-next-s41.sh ring` first: it
# says in 2 minutes whether one copy at a time per GPU brings in more than three at once.
# COMM_CE_ONE_STREAM=1 (comm/nccl/ce_schedule.rs, built blind in session 41: no multi-GPU
# kind was lent) queues a rank's copy-engine copies on one stream, peers from rank + 1 on.
# Written before any run: if a GPU then takes in ~350 GB/s at world 4 (one peer's rate at
# world 2) where three copies at once gave 200-230, zero1 with its gathers on the copy
# engines (COMM_CE_GATHER=1, 39.9 ms in session 38) should keep up with the 8-row forward
# and come to ~35 ms (0.84x one GPU); zero1 and bucketed:25 as they are (copy-engine
# reduce-scatters) 0.5-1 ms shorter. If the copy engines' rate into a GPU is what it is,
# one stream only serializes: no gain, or a loss. Losses and norms must not change.
W=${W:-4}; CALL=one-s41; source "$(dirname "$0")/train-runs.sh"
O1="COMM_CE_ONE_STREAM=1"; G="COMM_CE_GATHER=1"
env $N $O1 COMM_CE_GATHER=1 timeout 60 bin/comm-launch --nproc-per-node $W -- bin/comm-selftest > $R/selftest.txt 2>&1
echo "selftest (one stream, copy-engine gathers) rc=$?: $(grep -h "rank 0" $R/selftest.txt | tail -1 | cut -c1-150)"
xl single1 1 single $N
xl z$W $W zero1 $N
xl z$W-1 $W zero1 $N $O1
xl z$W-g $W zero1 $N $G
xl z$W-g1 $W zero1 $N $G $O1
xl d$W $W bucketed:25 $N
xl d$W-1 $W bucketed:25 $N $O1
xl z${W}b $W zero1 $N
xl z$W-g1b $W zero1 $N $G $O1
same z$W z$W-1; same z$W z$W-g1; same d$W d$W-1
pack
