//! Logical-to-physical mesh mapping (being built; see issue 3).
