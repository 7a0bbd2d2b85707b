//! slugkit: URL slugs from titles.
