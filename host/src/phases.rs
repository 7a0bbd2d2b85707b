//! Phase machine (work in progress).
