//! Hierarchical focus (work in progress).
