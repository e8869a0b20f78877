//! The exporters' HTTP client: cronbox's own (rustls, the system's roots)
//! driven on the exporter's runtime, whichever thread asks.

/// An `opentelemetry_http::HttpClient` over cronbox's reqwest client.
#[derive(Debug, Clone)]
pub(crate) struct OtlpHttp {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl OtlpHttp {
    pub(crate) fn new(runtime: tokio::runtime::Handle) -> Self {
        OtlpHttp {
            client: cronbox_tls::client(),
            runtime,
        }
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for OtlpHttp {
    async fn send_bytes(
        &self,
        request: opentelemetry_http::Request<bytes::Bytes>,
    ) -> Result<opentelemetry_http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let client = self.client.clone();
        let sending = async move {
            let (parts, body) = request.into_parts();
            let response = client
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .timeout(std::time::Duration::from_secs(10))
                .body(body)
                .send()
                .await?;
            let mut answer = opentelemetry_http::Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let body = response.bytes().await?;
            Ok::<_, opentelemetry_http::HttpError>(answer.body(body)?)
        };
        self.runtime.spawn(sending).await?
    }
}
