//! Nothing here: the tests are under tests/ (see Cargo.toml).
