//! Anonymous floods of a real admin process: logins with invented names
//! from many source addresses hold a bounded number of password checks
//! (so a bounded amount of memory), and a real user's login still gets
//! through.

use super::*;

/// The admin's peak resident memory so far (`VmHWM`), in bytes.
fn peak_memory(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .expect("VmHWM in /proc/PID/status");
    kib * 1024
}

/// A client sending from the loopback address `127.0.<a>.<b>`.
fn client_from(a: u8, b: u8) -> reqwest::Client {
    cronbox_tls::client_builder(None)
        .unwrap()
        .local_address(std::net::IpAddr::from([127, 0, a, b]))
        .build()
        .unwrap()
}

async fn login(http: &reqwest::Client, admin: SocketAddr, user: &str, password: &str) -> u16 {
    http.post(format!("http://{admin}/api/v1/session"))
        .json(&json!({ "user": user, "password": password }))
        .send()
        .await
        .map_or(0, |response| response.status().as_u16())
}

/// 500 logins at once with names no user has, from 20 source addresses
/// (under the per-address allowance, so that only the global bound holds
/// them): every one is answered 401 (or 429/503, never anything else), a
/// real user's login from another address meanwhile succeeds, and the
/// admin's peak memory stays far below 500 password checks' worth (each
/// holds 19 MiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_flood_holds_bounded_memory_and_a_real_login_gets_through() {
    let _turn = TESTS.turn();
    let data = tempfile::tempdir().unwrap();
    let (process, admin) = spawn_admin(None, &data.path().join("admin"));
    let api = AdminClient::new(format!("http://{admin}"), API_TOKEN);
    api.add_user("ana", "default", "developer").await;
    let password = cronbox_tests::test_password("ana");
    let before = peak_memory(process.0.id());

    let mut flood = tokio::task::JoinSet::new();
    for i in 0..500u32 {
        let http = client_from(1, 2 + (i % 20) as u8);
        flood.spawn(async move {
            login(&http, admin, &format!("nobody-{i}"), "a-wrong-password").await
        });
    }
    let real = login(&client_from(2, 2), admin, "ana", &password).await;
    let mut answers = std::collections::BTreeMap::<u16, usize>::new();
    while let Some(status) = flood.join_next().await {
        *answers.entry(status.unwrap()).or_default() += 1;
    }
    assert_eq!(real, 200, "the real login beside the flood ({answers:?})");
    assert!(
        answers
            .keys()
            .all(|status| [401, 429, 503].contains(status)),
        "{answers:?}"
    );
    assert!(answers.get(&401).copied().unwrap_or(0) > 0, "{answers:?}");
    let peak = peak_memory(process.0.id());
    println!(
        "500 anonymous logins from 20 addresses: {answers:?}, the admin's peak memory {} MiB (from {} MiB)",
        peak >> 20,
        before >> 20
    );
    assert!(
        peak < 300 << 20,
        "the admin's peak memory reached {} MiB (from {} MiB) under the flood",
        peak >> 20,
        before >> 20
    );
}
