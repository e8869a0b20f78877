//! The TLS listener and clients against each other on loopback, with
//! certificates from a private CA made by `certs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cronbox_tls::certs::{self, PemPair};
use cronbox_tls::{ServerIdentity, TlsError, TlsServer, client_builder};
use tokio_util::sync::CancellationToken;

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        Files {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A CA written as `NAME.pem`, and a server certificate for 127.0.0.1
    /// it signed written as `server.pem`/`server-key.pem`.
    fn ca_and_server(&self, name: &str) -> PemPair {
        let ca = certs::new_ca(name).expect("a CA");
        std::fs::write(self.path(&format!("{name}.pem")), &ca.cert).expect("written");
        certs::issue(&ca, &["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("a certificate")
            .write(&self.path("server.pem"), &self.path("server-key.pem"))
            .expect("written");
        ca
    }

    fn identity(&self) -> ServerIdentity {
        ServerIdentity {
            cert: self.path("server.pem"),
            key: self.path("server-key.pem"),
        }
    }
}

/// Serves "hello" over TLS; answers its base URL.
async fn serve(server: &TlsServer) -> String {
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bound");
    let listener = server.listener(tcp).expect("a listener");
    let url = format!(
        "https://{}",
        axum::serve::Listener::local_addr(&listener).expect("address")
    );
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

async fn get(ca: Option<&Path>, url: &str) -> Result<String, reqwest::Error> {
    let client = client_builder(ca).expect("a client").build()?;
    client
        .get(url)
        .send()
        .await?
        .error_for_status()?
        .text()
        .await
}

#[tokio::test]
async fn a_client_trusting_the_private_ca_gets_through_and_one_that_does_not_is_refused() {
    let files = Files::new();
    files.ca_and_server("ours");
    let other = Files::new();
    other.ca_and_server("theirs");
    let server = TlsServer::load(files.identity()).expect("loaded");
    let url = serve(&server).await;

    assert_eq!(
        get(Some(&files.path("ours.pem")), &url)
            .await
            .expect("served"),
        "hello"
    );
    let wrong_ca = get(Some(&other.path("theirs.pem")), &url).await;
    assert!(
        wrong_ca.is_err(),
        "a certificate of another CA is refused: {wrong_ca:?}"
    );
    let system_roots_only = get(None, &url).await;
    assert!(
        system_roots_only.is_err(),
        "a private CA is not a system root"
    );
    let plain = get(None, &url.replace("https://", "http://")).await;
    assert!(
        plain.is_err(),
        "plain HTTP to a TLS listener gets no answer"
    );
}

#[tokio::test]
async fn a_changed_certificate_is_served_without_dropping_open_connections() {
    let files = Files::new();
    files.ca_and_server("first");
    let server = TlsServer::load(files.identity()).expect("loaded");
    let url = serve(&server).await;
    let stop = CancellationToken::new();
    tokio::spawn(server.clone().watch(stop.clone()));
    let old_client = client_builder(Some(&files.path("first.pem")))
        .expect("a client")
        .build()
        .expect("built");
    assert_eq!(
        old_client.get(&url).send().await.expect("served").status(),
        200
    );

    // A half-written pair (a key that is not the certificate's) is not
    // served; the first certificate stays.
    let second_ca = certs::new_ca("second").expect("a CA");
    std::fs::write(files.path("second.pem"), &second_ca.cert).expect("written");
    let second = certs::issue(&second_ca, &["127.0.0.1".to_owned()]).expect("issued");
    std::fs::write(files.path("server.pem"), &second.cert).expect("written");
    let mismatch = server.reload();
    assert!(
        matches!(mismatch, Err(TlsError::Identity { .. })),
        "a key that is not the certificate's is refused: {mismatch:?}"
    );
    assert_eq!(
        get(Some(&files.path("first.pem")), &url)
            .await
            .expect("still the first"),
        "hello"
    );

    std::fs::write(files.path("server-key.pem"), &second.key).expect("written");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while get(Some(&files.path("second.pem")), &url).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new certificate is never served"
        );
        tokio::task::yield_now().await;
    }
    assert!(
        get(Some(&files.path("first.pem")), &url).await.is_err(),
        "new connections get the new certificate"
    );
    // The connection opened before the change is still open and served.
    assert_eq!(
        old_client.get(&url).send().await.expect("kept").status(),
        200
    );
    stop.cancel();
}

#[test]
fn unusable_files_are_named_in_the_error() {
    let files = Files::new();
    std::fs::write(files.path("server.pem"), "not a certificate").expect("written");
    std::fs::write(files.path("server-key.pem"), "").expect("written");
    let error = TlsServer::load(files.identity())
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("server.pem") && error.contains("no certificate"),
        "{error}"
    );

    files.ca_and_server("ca");
    std::fs::write(files.path("server-key.pem"), "").expect("written");
    let error = TlsServer::load(files.identity())
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("server-key.pem") && error.contains("no private key"),
        "{error}"
    );

    let missing = client_builder(Some(&files.path("absent.pem"))).expect_err("refused");
    assert!(missing.to_string().contains("absent.pem"), "{missing}");
}
