//! End-to-end tests of cronbox live in `tests/tests/`; this library is
//! where helpers shared by them go (process and database harnesses arrive
//! with the executor, admin and cluster roles).
