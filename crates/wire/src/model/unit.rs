//! A workload's unit of work and the names its per-unit figures are stored under.

/// A workload's unit of work: what its rates, service demands and per-unit counts divide
/// by. Service demand is per transaction or per KB (1024 bytes received, netperf's µs/KB);
/// events and counters are per transaction or per MB (10^6 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Request/response transactions (rr, crr).
    Transactions,
    /// Bytes received (stream, bulk, http).
    Bytes,
}

impl Unit {
    /// The stored name of the unit a service demand is per (`CpuAccounting.unit`).
    pub fn demand_name(self) -> &'static str {
        match self {
            Unit::Transactions => Self::TRANSACTION,
            Unit::Bytes => Self::KB,
        }
    }

    /// The stored name of the unit events and counts are per (`Events.unit`,
    /// `TraceCounts.unit`).
    pub fn events_name(self) -> &'static str {
        match self {
            Unit::Transactions => Self::TRANSACTION,
            Unit::Bytes => Self::MB,
        }
    }

    /// `work` (transactions, or bytes) in the unit a service demand is per.
    pub fn in_demand_units(self, work: f64) -> f64 {
        match self {
            Unit::Transactions => work,
            Unit::Bytes => work / 1024.0,
        }
    }

    /// `work` (transactions, or bytes) in the unit events are counted per.
    pub fn in_events_units(self, work: f64) -> f64 {
        match self {
            Unit::Transactions => work,
            Unit::Bytes => work / 1e6,
        }
    }

    /// The unit a stored name says (`transaction`, `KB` or `MB`); `None` for another.
    pub fn of_name(name: &str) -> Option<Unit> {
        match name {
            Self::TRANSACTION => Some(Unit::Transactions),
            Self::KB | Self::MB => Some(Unit::Bytes),
            _ => None,
        }
    }

    /// Whether a stored unit name is per transaction.
    pub fn is_transactions(name: &str) -> bool {
        Unit::of_name(name) == Some(Unit::Transactions)
    }

    /// Whether a stored unit name is per MB (events).
    pub fn is_mb(name: &str) -> bool {
        name == Self::MB
    }

    const TRANSACTION: &'static str = "transaction";
    const KB: &'static str = "KB";
    const MB: &'static str = "MB";
}
