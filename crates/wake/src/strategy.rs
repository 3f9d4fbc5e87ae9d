//! How a waiting thread waits (the thing the benchmark varies).

use std::time::Duration;

use serde::Serialize;

/// How a waiting thread waits. Serialized as `{"kind": "block"|"spin"|"poll", "window_us": …}`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Strategy {
    /// Sleep in the kernel until woken.
    Block,
    /// Busy-poll without ever sleeping.
    Spin,
    /// Busy-poll for up to this long, then sleep.
    Poll(Duration),
}

impl Serialize for Strategy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Strategy", 2)?;
        let (kind, window) = match self {
            Strategy::Block => ("block", None),
            Strategy::Spin => ("spin", None),
            Strategy::Poll(d) => ("poll", Some(d.as_secs_f64() * 1e6)),
        };
        st.serialize_field("kind", kind)?;
        st.serialize_field("window_us", &window)?;
        st.end()
    }
}
