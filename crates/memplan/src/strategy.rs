//! The data-parallel strategies a memory plan covers: `train`'s (single, the DDP
//! strategies, sharded, zero1, zero2) and one that is a plan only (FSDP).

/// A data-parallel strategy: how parameters, gradients and optimizer state are laid out
/// over the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Single,
    Ddp,
    Sharded,
    Zero1,
    Zero2,
    Fsdp,
}

impl Strategy {
    pub const ALL: [Strategy; 6] = [
        Strategy::Single,
        Strategy::Ddp,
        Strategy::Sharded,
        Strategy::Zero1,
        Strategy::Zero2,
        Strategy::Fsdp,
    ];

    /// Whether `train` runs it (all do; FSDP since session 18).
    pub fn built(self) -> bool {
        true
    }

    pub fn name(self) -> &'static str {
        match self {
            Strategy::Single => "single",
            Strategy::Ddp => "ddp",
            Strategy::Sharded => "sharded",
            Strategy::Zero1 => "zero1",
            Strategy::Zero2 => "zero2",
            Strategy::Fsdp => "fsdp",
        }
    }

    /// The name with `train --strategy`'s spellings.
    pub fn label(self) -> &'static str {
        match self {
            Strategy::Ddp => "ddp (bucketed:MB, flat, overlap, naive)",
            s => s.name(),
        }
    }

    /// The plan of `train --strategy s`; `None` for a name train does not know.
    pub fn of_train(s: &str) -> Option<Self> {
        Some(match s {
            "single" => Strategy::Single,
            "sharded" => Strategy::Sharded,
            s if s == "zero1" || s.starts_with("zero1:") => Strategy::Zero1,
            s if s == "zero2" || s.starts_with("zero2:") => Strategy::Zero2,
            s if s == "fsdp" || s.starts_with("fsdp:") => Strategy::Fsdp,
            "naive" | "flat" | "overlap" => Strategy::Ddp,
            s if s.starts_with("bucketed:") => Strategy::Ddp,
            _ => return None,
        })
    }
}
