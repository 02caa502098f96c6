//! Key tables: the immutable sorted files of the index tree (`.sst`).
