//! The connection of one outbound request: resolve and check the address
//! against the executor's [`NetPolicy`], connect (TLS for https, with the
//! web's roots), hand the request to hyper, and wait for the response's
//! head within the request's timeouts.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use cronbox_net_policy::{Denied, NetPolicy, Scheme};
use tokio::net::TcpStream;
use wasmtime_wasi_http::Error;
use wasmtime_wasi_http::io::TokioIo;

use super::Metered;

/// Where a request goes and how long it may take to get there.
pub(super) struct Target {
    pub(super) scheme: Scheme,
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) connect_timeout: Duration,
    pub(super) first_byte_timeout: Duration,
}

pub(super) enum Failure {
    Denied(Denied),
    Error(Error),
    Stopped,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure::Error(error)
    }
}

pub(super) type Connection =
    hyper::client::conn::http1::Connection<TokioIo<Box<dyn Stream>>, Metered>;

pub(super) trait Stream:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Sync + Unpin + 'static
{
}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Sync + Unpin + 'static> Stream for T {}

/// Resolves, checks, connects (TLS for https) and sends; the response's
/// headers, and the connection to drive while its body is read.
pub(super) async fn send(
    request: http::Request<Metered>,
    target: &Target,
    nets: &NetPolicy,
) -> Result<(http::Response<hyper::body::Incoming>, Connection), Failure> {
    let connecting = async {
        let address = nets
            .resolve(&target.host, target.port)
            .await
            .map_err(Failure::Denied)?;
        let tcp = TcpStream::connect(address).await.map_err(Error::Connect)?;
        let stream: Box<dyn Stream> = match target.scheme {
            Scheme::Http => Box::new(tcp),
            Scheme::Https => {
                let name = server_name(&target.host)?;
                let tls = tokio_rustls::TlsConnector::from(tls_config())
                    .connect(name, tcp)
                    .await
                    .map_err(Error::Tls)?;
                Box::new(tls)
            }
        };
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(Error::from)?;
        Ok::<_, Failure>((sender, connection))
    };
    let (mut sender, mut connection) = tokio::time::timeout(target.connect_timeout, connecting)
        .await
        .map_err(|_| Error::ConnectionTimeout)??;
    let responding = async {
        let sending = sender.send_request(request);
        tokio::pin!(sending);
        tokio::select! {
            biased;
            response = &mut sending => response.map_err(Error::from),
            ended = &mut connection => match ended {
                Err(error) => Err(Error::from(error)),
                Ok(()) => sending.await.map_err(Error::from),
            },
        }
    };
    let response = tokio::time::timeout(target.first_byte_timeout, responding)
        .await
        .map_err(|_| Error::ConnectionReadTimeout)??;
    Ok((response, connection))
}

fn server_name(host: &str) -> Result<rustls::pki_types::ServerName<'static>, Error> {
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(address) = literal.parse::<std::net::IpAddr>() {
        return Ok(rustls::pki_types::ServerName::from(address));
    }
    rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(Error::InvalidDnsNameError)
}

/// TLS with the web's root certificates (webpki-roots), built once.
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            };
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map(|builder| builder.with_root_certificates(roots).with_no_client_auth());
            match config {
                Ok(config) => Arc::new(config),
                // ring supports the default versions; this is unreachable.
                Err(error) => panic!("TLS configuration: {error}"),
            }
        })
        .clone()
}
