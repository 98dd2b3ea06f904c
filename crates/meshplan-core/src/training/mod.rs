//! Training analysis (being built; see issue 3).
