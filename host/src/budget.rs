//! Adaptive step budget (work in progress).
