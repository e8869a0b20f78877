//! Origins a job may call: `scheme://host[:port]`, where host may be
//! `*.example.com` (any name below example.com, at any depth, not
//! example.com itself) or `*` (any host). A pattern without a port means
//! the scheme's default port (443 for https, 80 for http), as a browser's
//! origin does.
//!
//! A job's grants must each lie within its tenant's ceiling
//! ([`OriginPattern::is_within`]); a request is allowed when its URL's
//! origin matches one of the job's grants ([`OriginPattern::matches`]).
//! Whatever the grants say, the address a name resolves to is then checked
//! by the [`NetPolicy`](crate::NetPolicy).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    /// The port a URL of this scheme means when it names none.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// The host part of a pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum HostPattern {
    /// Any host.
    Any,
    /// Names strictly below this domain (`*.example.com` holds
    /// `example.com`).
    Below(String),
    /// This name or address literal, lower-case, IPv6 without brackets.
    Exactly(String),
}

/// One allowed origin, or a family of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OriginPattern {
    scheme: Scheme,
    host: HostPattern,
    port: u16,
}

/// A pattern that does not parse, with what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{pattern:?} is not an origin: {reason} (write scheme://host[:port], such as https://api.example.com or https://*.example.com)"
)]
pub struct BadOrigin {
    pub pattern: String,
    pub reason: &'static str,
}

impl FromStr for OriginPattern {
    type Err = BadOrigin;

    fn from_str(text: &str) -> Result<OriginPattern, BadOrigin> {
        let bad = |reason| BadOrigin {
            pattern: text.to_owned(),
            reason,
        };
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| bad("it has no scheme"))?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            _ => return Err(bad("the scheme must be http or https")),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err(bad("an origin has no path, query or fragment"));
        }
        if rest.contains('@') {
            return Err(bad("an origin has no user or password"));
        }
        let (host, port) =
            split_host_port(rest).ok_or_else(|| bad("the port is not a number from 1 to 65535"))?;
        let port = port.unwrap_or(scheme.default_port());
        let host = host.to_ascii_lowercase();
        let host = match host.strip_suffix('.') {
            Some(name) if name != "*" => name.to_owned(),
            _ => host,
        };
        let host = if host == "*" {
            HostPattern::Any
        } else if let Some(domain) = host.strip_prefix("*.") {
            if !is_name(domain) {
                return Err(bad("after `*.` must come a domain name"));
            }
            HostPattern::Below(domain.to_owned())
        } else if host.parse::<IpAddr>().is_ok() || is_name(&host) {
            HostPattern::Exactly(host)
        } else {
            return Err(bad("the host is not a name, an address or a `*.` wildcard"));
        };
        Ok(OriginPattern { scheme, host, port })
    }
}

/// `host[:port]` with IPv6 in brackets; `None` when the port is bad.
fn split_host_port(text: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(inner) = text.strip_prefix('[') {
        let (host, after) = inner.split_once(']')?;
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':')?)),
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        None => None,
        Some(port) => Some(port.parse::<u16>().ok().filter(|port| *port != 0)?),
    };
    Some((host.to_owned(), port))
}

/// A DNS name: dot-separated labels of letters, digits and hyphens.
fn is_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
        })
}

impl OriginPattern {
    /// Whether a request to `scheme://host:port` is covered. `host` as in
    /// a URL (IPv6 with or without brackets, any case).
    pub fn matches(&self, scheme: Scheme, host: &str, port: u16) -> bool {
        if scheme != self.scheme || port != self.port {
            return false;
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        match &self.host {
            HostPattern::Any => true,
            HostPattern::Below(domain) => is_below(&host, domain),
            HostPattern::Exactly(exact) => host == *exact,
        }
    }

    /// Whether every origin this pattern matches, `ceiling` matches too.
    pub fn is_within(&self, ceiling: &OriginPattern) -> bool {
        if self.scheme != ceiling.scheme || self.port != ceiling.port {
            return false;
        }
        match (&self.host, &ceiling.host) {
            (_, HostPattern::Any) => true,
            (HostPattern::Any, _) => false,
            (HostPattern::Exactly(host), HostPattern::Exactly(top)) => host == top,
            (HostPattern::Exactly(host), HostPattern::Below(top)) => is_below(host, top),
            (HostPattern::Below(_), HostPattern::Exactly(_)) => false,
            (HostPattern::Below(domain), HostPattern::Below(top)) => {
                domain == top || is_below(domain, top)
            }
        }
    }
}

fn is_below(host: &str, domain: &str) -> bool {
    host.len() > domain.len() + 1
        && host.ends_with(domain)
        && host.as_bytes()[host.len() - domain.len() - 1] == b'.'
}

impl fmt::Display for OriginPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme.as_str())?;
        match &self.host {
            HostPattern::Any => f.write_str("*")?,
            HostPattern::Below(domain) => write!(f, "*.{domain}")?,
            HostPattern::Exactly(host) if host.contains(':') => write!(f, "[{host}]")?,
            HostPattern::Exactly(host) => f.write_str(host)?,
        }
        if self.port != self.scheme.default_port() {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

/// Parses a list of patterns.
pub fn parse_origins<S: AsRef<str>>(patterns: &[S]) -> Result<Vec<OriginPattern>, BadOrigin> {
    patterns
        .iter()
        .map(|pattern| pattern.as_ref().parse())
        .collect()
}

/// The first of `grants` that no pattern of `ceiling` holds.
pub fn first_outside<'a>(
    grants: &'a [OriginPattern],
    ceiling: &[OriginPattern],
) -> Option<&'a OriginPattern> {
    grants
        .iter()
        .find(|grant| !ceiling.iter().any(|top| grant.is_within(top)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> OriginPattern {
        text.parse().unwrap()
    }

    #[test]
    fn patterns_parse_and_print_back() {
        for text in [
            "https://api.example.com",
            "http://127.0.0.1:8080",
            "https://*.slack.com",
            "https://*",
            "http://[::1]:9000",
        ] {
            assert_eq!(pattern(text).to_string(), text);
        }
        assert_eq!(
            pattern("HTTPS://API.Example.com:443/").to_string(),
            "https://api.example.com"
        );
    }

    #[test]
    fn bad_patterns_say_what_is_wrong() {
        for (text, reason) in [
            ("api.example.com", "it has no scheme"),
            ("ftp://example.com", "the scheme must be http or https"),
            (
                "https://example.com/path",
                "an origin has no path, query or fragment",
            ),
            (
                "https://user@example.com",
                "an origin has no user or password",
            ),
            (
                "https://example.com:0",
                "the port is not a number from 1 to 65535",
            ),
            (
                "https://example.com:http",
                "the port is not a number from 1 to 65535",
            ),
            ("https://*.", "after `*.` must come a domain name"),
            (
                "https://a*b.com",
                "the host is not a name, an address or a `*.` wildcard",
            ),
            (
                "https://",
                "the host is not a name, an address or a `*.` wildcard",
            ),
        ] {
            let error = text.parse::<OriginPattern>().unwrap_err();
            assert_eq!(error.reason, reason, "{text}");
            assert!(error.to_string().contains(text), "{error}");
        }
    }

    #[test]
    fn matching_needs_scheme_port_and_host() {
        let api = pattern("https://api.example.com");
        assert!(api.matches(Scheme::Https, "API.example.com", 443));
        assert!(!api.matches(Scheme::Http, "api.example.com", 80));
        assert!(!api.matches(Scheme::Https, "api.example.com", 8443));
        assert!(!api.matches(Scheme::Https, "evil-api.example.com", 443));
        let slack = pattern("https://*.slack.com");
        assert!(slack.matches(Scheme::Https, "hooks.slack.com", 443));
        assert!(slack.matches(Scheme::Https, "a.b.slack.com", 443));
        assert!(!slack.matches(Scheme::Https, "slack.com", 443));
        assert!(!slack.matches(Scheme::Https, "evilslack.com", 443));
        assert!(!slack.matches(Scheme::Https, "slack.com.evil.net", 443));
        let v6 = pattern("http://[::1]:9000");
        assert!(v6.matches(Scheme::Http, "[::1]", 9000));
        assert!(pattern("https://*").matches(Scheme::Https, "anything.org", 443));
    }

    #[test]
    fn grants_must_lie_within_the_ceiling() {
        let ceiling = vec![
            pattern("https://*.example.com"),
            pattern("http://10.0.0.1:8080"),
        ];
        let inside = [
            "https://api.example.com",
            "https://*.eu.example.com",
            "https://*.example.com",
            "http://10.0.0.1:8080",
        ];
        for grant in inside {
            assert_eq!(first_outside(&[pattern(grant)], &ceiling), None, "{grant}");
        }
        let outside = [
            "https://example.com",
            "http://api.example.com",
            "https://api.example.com:8443",
            "https://*",
            "https://*.com",
            "http://10.0.0.1",
        ];
        for grant in outside {
            let grants = [pattern(grant)];
            assert_eq!(
                first_outside(&grants, &ceiling),
                Some(&grants[0]),
                "{grant}"
            );
        }
        assert!(pattern("https://*.a.com").is_within(&pattern("https://*")));
    }
}
