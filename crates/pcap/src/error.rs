//! Errors of the analyzer: every one names the byte offset in the capture where it happened, so a
//! broken file can be inspected with a hex dump at exactly that place.

use std::path::PathBuf;

/// A capture that cannot be read any further.
///
/// Problems confined to one packet (an undecodable IP header inside a well-formed record) are
/// not errors: they become warnings in [`crate::Summary`] and the packet is skipped.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// The capture file could not be opened.
    #[error("cannot open {}: {error}", path.display())]
    Open {
        /// The path as given.
        path: PathBuf,
        /// What the operating system said (in the message; not the error's source, which
        /// a printed chain would repeat).
        error: std::io::Error,
    },
    /// Reading from the underlying reader failed.
    #[error("read error at byte {offset}: {message}")]
    Io {
        /// Bytes of the capture consumed before the failing read.
        offset: u64,
        /// The I/O error's text.
        message: String,
    },
    /// The input ends in the middle of a header, record or block.
    #[error("truncated {what} at byte {offset}: {detail}")]
    Truncated {
        /// What was being read ("file header", "packet record", "pcapng block", …).
        what: &'static str,
        /// Where that structure starts.
        offset: u64,
        /// How much was expected and how much was there.
        detail: String,
    },
    /// The input is not a capture, or a header holds an impossible value (an absurd length).
    #[error("invalid {what} at byte {offset}: {detail}")]
    Invalid {
        /// What was being read.
        what: &'static str,
        /// Where that structure starts.
        offset: u64,
        /// Which value is wrong and why.
        detail: String,
    },
    /// The capture uses a link-layer type this analyzer cannot decode.
    #[error("unsupported link type {linktype} at byte {offset}{context}")]
    UnsupportedLinkType {
        /// The LINKTYPE_ number from the file.
        linktype: u32,
        /// Where the link type was declared, or where the first packet using it starts.
        offset: u64,
        /// Extra words for the message (which interface, where it was declared); may be empty.
        context: String,
    },
}

impl PcapError {
    /// The byte offset in the capture the error refers to, when it refers to one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            PcapError::Open { .. } => None,
            PcapError::Io { offset, .. }
            | PcapError::Truncated { offset, .. }
            | PcapError::Invalid { offset, .. }
            | PcapError::UnsupportedLinkType { offset, .. } => Some(*offset),
        }
    }
}

/// A capture filter expression that [`crate::Options::apply_filter`] does not understand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad filter {expr:?}: {reason}")]
pub struct FilterError {
    /// The expression as given.
    pub expr: String,
    /// What is wrong with it.
    pub reason: String,
}
