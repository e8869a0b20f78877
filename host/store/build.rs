//! Rebuilds the admin when a migration changes: `sqlx::migrate!` embeds
//! the files of `migrations/`, but on stable Rust cargo does not know to
//! watch them.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
