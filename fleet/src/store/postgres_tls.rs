//! TLS to PostgreSQL (`sslmode=require`, features `postgres` and `tls`): rustls with ring over
//! tokio-rustls, as the Redis side's `rediss://`. The server's certificate is checked against
//! `FleetConfig::tls_ca` when given (that CA alone), else against the system's roots, and must
//! name the URL's host (a DNS name or an IP address): libpq's `verify-full`.
//!
//! Without the feature `tls`, the connector is tokio-postgres's `NoTls`, and a URL asking for
//! TLS is refused at start.

use tokio_postgres::config::SslMode;

use crate::error::FleetError;

/// What the fleet connects to PostgreSQL with.
#[cfg(feature = "tls")]
pub(crate) type Tls = rustls_tls::MakeRustls;
/// What the fleet connects to PostgreSQL with.
#[cfg(not(feature = "tls"))]
pub(crate) type Tls = tokio_postgres::NoTls;

/// The connector for `config`'s `sslmode`, which this sets to what is done:
///
/// - `require`: TLS or no connection, the certificate checked as the module says (libpq's
///   `verify-full`); without the feature `tls`, an error naming it.
/// - `prefer`, `disable` or none: plain TCP, even to a server offering TLS.
/// - `verify-ca`, `verify-full`: never here; tokio-postgres's URL parser refuses them.
///
/// `ca` is the PEM of `FleetConfig::tls_ca`, if set.
pub(crate) fn connector(
    config: &mut tokio_postgres::Config,
    ca: Option<&[u8]>,
) -> Result<Tls, String> {
    let require = config.get_ssl_mode() == SslMode::Require;
    if !require {
        // `prefer` stays plain: a server offering TLS is not taken up on it.
        config.ssl_mode(SslMode::Disable);
    }
    #[cfg(feature = "tls")]
    {
        rustls_tls::MakeRustls::new(require, ca)
    }
    #[cfg(not(feature = "tls"))]
    {
        let _ = ca;
        if require {
            return Err(
                "sslmode=require needs the feature `tls` (breakerbox's `redis-tls`), \
                        which connects to PostgreSQL over TLS"
                    .to_owned(),
            );
        }
        Ok(tokio_postgres::NoTls)
    }
}

/// The PEM of `path`, read at start.
pub(crate) fn read_ca(path: Option<&std::path::Path>) -> Result<Option<Vec<u8>>, FleetError> {
    path.map(|path| {
        std::fs::read(path).map_err(|source| FleetError::TlsCa {
            path: path.to_owned(),
            source,
        })
    })
    .transpose()
}

#[cfg(feature = "tls")]
mod rustls_tls {
    use core::future::Future;
    use core::pin::Pin;
    use core::task::{Context, Poll};
    use std::io;
    use std::sync::Arc;

    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use rustls::{CertificateError, ClientConfig, RootCertStore};
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

    /// Makes a TLS connector per host (tokio-postgres asks for one with each connection, even
    /// one without TLS: then `config` is `None` and it is never used).
    #[derive(Clone)]
    pub(crate) struct MakeRustls {
        config: Option<Arc<ClientConfig>>,
    }

    impl MakeRustls {
        /// For TLS if `tls`: trusting `ca`'s certificates (PEM) if given, else the system's
        /// roots.
        pub(crate) fn new(tls: bool, ca: Option<&[u8]>) -> Result<MakeRustls, String> {
            if !tls {
                return Ok(MakeRustls { config: None });
            }
            let mut roots = RootCertStore::empty();
            match ca {
                Some(pem) => {
                    for cert in CertificateDer::pem_slice_iter(pem) {
                        let cert =
                            cert.map_err(|e| format!("tls_ca: not a PEM certificate: {e}"))?;
                        roots
                            .add(cert)
                            .map_err(|e| format!("tls_ca: not a CA certificate: {e}"))?;
                    }
                    if roots.is_empty() {
                        return Err("tls_ca: no certificate in the file".to_owned());
                    }
                }
                None => {
                    // The system's roots that could be read and parsed.
                    let found = rustls_native_certs::load_native_certs();
                    roots.add_parsable_certificates(found.certs);
                }
            }
            // Ring as the provider, named here rather than installed for the process: another
            // crate of the build may bring aws-lc-rs too.
            let config = ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
            Ok(MakeRustls {
                config: Some(Arc::new(config)),
            })
        }
    }

    impl<S> MakeTlsConnect<S> for MakeRustls
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        type Stream = Stream<S>;
        type TlsConnect = Connect;
        type Error = io::Error;

        fn make_tls_connect(&mut self, domain: &str) -> io::Result<Connect> {
            Ok(Connect {
                config: self.config.clone(),
                domain: domain.to_owned(),
            })
        }
    }

    /// The TLS handshake with one host.
    pub(crate) struct Connect {
        config: Option<Arc<ClientConfig>>,
        domain: String,
    }

    impl<S> TlsConnect<S> for Connect
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        type Stream = Stream<S>;
        type Error = io::Error;
        type Future = Pin<Box<dyn Future<Output = io::Result<Stream<S>>> + Send>>;

        fn connect(self, stream: S) -> Self::Future {
            Box::pin(async move {
                let config = self.config.ok_or_else(|| {
                    io::Error::other("TLS asked for on a connection made without it")
                })?;
                let name = ServerName::try_from(self.domain.clone()).map_err(|_| {
                    io::Error::other(format!(
                        "`{}` is not a host name or IP address a certificate can name",
                        self.domain
                    ))
                })?;
                tokio_rustls::TlsConnector::from(config)
                    .connect(name, stream)
                    .await
                    .map(Stream)
                    .map_err(|e| explain(e, &self.domain))
            })
        }
    }

    /// A failed handshake's error, saying what a certificate's rejection means.
    fn explain(e: io::Error, host: &str) -> io::Error {
        let Some(tls) = e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) else {
            return e;
        };
        let why = match tls {
            rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer | CertificateError::BadSignature,
            ) => "the server's certificate is not trusted: no authority of `tls_ca` (or of \
                  the system's roots, without it) signed it"
                .to_owned(),
            rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            ) => format!("the server's certificate does not name `{host}`"),
            rustls::Error::InvalidCertificate(
                CertificateError::Expired | CertificateError::ExpiredContext { .. },
            ) => "the server's certificate has expired".to_owned(),
            _ => return e,
        };
        io::Error::new(e.kind(), format!("{why} ({tls})"))
    }

    /// A TLS connection to the server.
    pub(crate) struct Stream<S>(tokio_rustls::client::TlsStream<S>);

    impl<S> TlsStream for Stream<S>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        /// None: SCRAM authentication goes without channel binding (tokio-postgres's default,
        /// `channel_binding=prefer`, accepts that).
        fn channel_binding(&self) -> ChannelBinding {
            ChannelBinding::none()
        }
    }

    impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Stream<S> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_read(cx, buf)
        }
    }

    impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Stream<S> {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.0).poll_write(cx, buf)
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_shutdown(cx)
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
        }

        fn is_write_vectored(&self) -> bool {
            self.0.is_write_vectored()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> tokio_postgres::Config {
        url.parse().unwrap()
    }

    #[test]
    fn prefer_and_no_sslmode_connect_without_tls() {
        for url in [
            "postgres://u@127.0.0.1/db?sslmode=prefer",
            "postgres://u@127.0.0.1/db",
            "postgres://u@127.0.0.1/db?sslmode=disable",
        ] {
            let mut pg = config(url);
            connector(&mut pg, None).unwrap();
            assert_eq!(pg.get_ssl_mode(), SslMode::Disable, "{url}");
        }
    }

    #[test]
    fn verify_ca_and_verify_full_are_an_error_at_start_naming_sslmode() {
        for mode in ["verify-ca", "verify-full"] {
            let url = format!("postgres://u@127.0.0.1/db?sslmode={mode}");
            let Err(e) = crate::store::postgres::postgres_store(&crate::FleetConfig::new(&url))
            else {
                panic!("{mode} accepted");
            };
            assert!(matches!(e, FleetError::Url { .. }), "{e:?}");
            assert!(e.to_string().contains("sslmode"), "{e}");
        }
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn require_without_the_tls_feature_is_an_error_naming_it() {
        let mut pg = config("postgres://u@127.0.0.1/db?sslmode=require");
        let e = connector(&mut pg, None).unwrap_err();
        assert!(e.contains("feature `tls`"), "{e}");
    }

    #[cfg(feature = "tls")]
    #[test]
    fn require_keeps_tls() {
        let mut pg = config("postgres://u@127.0.0.1/db?sslmode=require");
        connector(&mut pg, None).unwrap();
        assert_eq!(pg.get_ssl_mode(), SslMode::Require);
    }

    #[cfg(feature = "tls")]
    #[test]
    fn a_ca_file_without_a_certificate_is_an_error() {
        let mut pg = config("postgres://u@127.0.0.1/db?sslmode=require");
        let Err(e) = connector(&mut pg, Some(b"not a certificate")) else {
            panic!("accepted");
        };
        assert!(e.contains("tls_ca"), "{e}");
    }
}
