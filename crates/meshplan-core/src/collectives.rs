//! Collective cost model (being built; see issue 3).
