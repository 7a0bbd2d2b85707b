//! Loop detection (work in progress).
