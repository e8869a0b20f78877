//! Where a user's files go, as the XDG base directory specification says:
//! `$XDG_CACHE_HOME` or `~/.cache` for what can be made again (compiled
//! components, installed tools), `$XDG_CONFIG_HOME` or `~/.config` for
//! what the user chose (contexts). Only absolute paths count.

use std::path::PathBuf;

/// `cronbox` under the user's cache directory.
pub fn cache() -> Option<PathBuf> {
    base("XDG_CACHE_HOME", ".cache").map(|base| base.join("cronbox"))
}

/// `cronbox` under the user's configuration directory.
pub fn config() -> Option<PathBuf> {
    base("XDG_CONFIG_HOME", ".config").map(|base| base.join("cronbox"))
}

/// `$VARIABLE`, else `$HOME/under_home`; none without an absolute one.
fn base(variable: &str, under_home: &str) -> Option<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    absolute(variable).or_else(|| absolute("HOME").map(|home| home.join(under_home)))
}
