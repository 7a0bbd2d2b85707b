//! Loop detector against the labelled set in `tests/data/loops/` (being written).
