//! TLS to a PostgreSQL store as libpq users expect it: `sslmode` (`disable`, `prefer` (the
//! default), `require`, `verify-ca`, `verify-full`) and `sslrootcert=PATH` in the URL, else
//! in `PGSSLMODE` / `PGSSLROOTCERT`. The stack is rustls with the `ring` provider: pure Rust
//! but for ring's own assembly, so the static musl build needs no OpenSSL.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use percent_encoding::percent_decode_str;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`s. The `postgres` crate knows only the first three and never checks a
/// certificate, so virtperf parses the setting itself and brings its own verifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Plain text only.
    Disable,
    /// TLS when the server offers it, unchecked; plain text otherwise (libpq's default).
    Prefer,
    /// TLS or nothing; the certificate is checked against `sslrootcert` when one is given
    /// (as libpq does when a root file exists), else not at all.
    Require,
    /// TLS, the certificate signed by a trusted CA; its names are not compared.
    VerifyCa,
    /// TLS, the certificate signed by a trusted CA and naming the host connected to.
    VerifyFull,
}

impl SslMode {
    const ALL: [SslMode; 5] = [
        SslMode::Disable,
        SslMode::Prefer,
        SslMode::Require,
        SslMode::VerifyCa,
        SslMode::VerifyFull,
    ];

    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the trusted CA certificates come from in the checking modes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Roots {
    /// The machine's CA store (`/etc/ssl/certs`, `SSL_CERT_FILE`, …): no `sslrootcert`, or
    /// libpq's `sslrootcert=system`.
    System,
    /// A PEM file of CA certificates.
    File(PathBuf),
}

impl fmt::Display for Roots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Roots::System => f.write_str("the system's CA certificates"),
            Roots::File(p) => write!(f, "sslrootcert={}", p.display()),
        }
    }
}

/// A store URL's TLS settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    /// The `sslmode`.
    pub mode: SslMode,
    /// `sslrootcert`, when given.
    pub root_cert: Option<Roots>,
}

impl TlsSettings {
    /// The mode the `postgres` crate negotiates with: whether TLS is off, tried or required.
    pub fn negotiation(&self) -> postgres::config::SslMode {
        match self.mode {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                postgres::config::SslMode::Require
            }
        }
    }

    /// Whether the server's certificate is checked, and against which CAs.
    fn checked_against(&self) -> Option<Roots> {
        match self.mode {
            SslMode::Disable | SslMode::Prefer => None,
            SslMode::Require => self.root_cert.clone(),
            SslMode::VerifyCa | SslMode::VerifyFull => {
                Some(self.root_cert.clone().unwrap_or(Roots::System))
            }
        }
    }

    /// The rustls connector for these settings (unused by `disable`, which never starts TLS).
    /// Errors are one line: an `sslrootcert` that cannot be read, or no system CAs.
    pub fn connector(&self) -> Result<MakeRustlsConnect, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let inner = match self.checked_against() {
            None => None,
            Some(roots) => {
                let store = Arc::new(load_roots(&roots)?);
                let v = WebPkiServerVerifier::builder_with_provider(store, provider.clone())
                    .build()
                    .map_err(|e| format!("cannot use {roots}: {e}"))?;
                Some(v)
            }
        };
        let verifier = Verifier {
            inner,
            check_name: self.mode == SslMode::VerifyFull,
            provider: provider.clone(),
        };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(MakeRustlsConnect::new(config))
    }

    /// A one-line explanation, with the fix, of a TLS failure in `chain` (an error and its
    /// sources), or `None` when the failure is not about TLS. `host` is the host connected
    /// to.
    pub fn explain(
        &self,
        chain: &[&(dyn std::error::Error + 'static)],
        host: &str,
    ) -> Option<String> {
        let mode = self.mode;
        let cert = chain.iter().find_map(|e| {
            let direct = e.downcast_ref::<rustls::Error>();
            // tokio-rustls hands rustls' error on inside an io::Error, whose `source` skips it.
            let in_io = e
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|x| x.downcast_ref::<rustls::Error>());
            direct.or(in_io).cloned()
        });
        if let Some(err) = cert {
            let roots = self.checked_against().map_or_else(
                || "the system's CA certificates".to_string(),
                |r| r.to_string(),
            );
            let why = match &err {
                rustls::Error::InvalidCertificate(c) => match c {
                    CertificateError::UnknownIssuer => format!(
                        "the server's certificate is not signed by a CA in {roots} (sslmode={mode}): give the CA that signed it with sslrootcert=PATH, or use sslmode=require to encrypt without checking the certificate"
                    ),
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. } => format!(
                        "the server's certificate does not name the host {host} (sslmode={mode}): connect by a name the certificate holds, or use sslmode=verify-ca to check only who signed it"
                    ),
                    CertificateError::Expired
                    | CertificateError::ExpiredContext { .. }
                    | CertificateError::NotValidYet
                    | CertificateError::NotValidYetContext { .. } => format!(
                        "the server's certificate is outside its validity dates ({err}; sslmode={mode}): renew it on the server, or check this machine's clock"
                    ),
                    _ => format!(
                        "the server's certificate does not verify ({err}; sslmode={mode}, checked against {roots}): fix the certificate, or use sslmode=require to encrypt without checking it"
                    ),
                },
                _ => format!(
                    "the TLS handshake failed ({err}; sslmode={mode}): check the server's ssl settings, or use sslmode=disable on a trusted network"
                ),
            };
            return Some(why);
        }
        let text = chain
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join(": ");
        if text.contains("server does not support TLS") {
            return Some(format!(
                "the server does not offer TLS and the URL asks for it (sslmode={mode}): turn on ssl in the server's postgresql.conf, or use sslmode=prefer"
            ));
        }
        // The server's wording when pg_hba.conf admits this client only by `hostssl`.
        if text.contains("no encryption") && mode == SslMode::Disable {
            return Some(
                "the server takes connections from this host only over TLS (pg_hba.conf hostssl) and the URL says sslmode=disable: drop sslmode=disable (prefer, the default, uses TLS when offered) or use sslmode=require or verify-full"
                    .to_string(),
            );
        }
        None
    }
}

/// Takes `sslmode` and `sslrootcert` out of `url`'s query string (the `postgres` crate
/// rejects `verify-ca`, `verify-full` and `sslrootcert`), falling back to `PGSSLMODE` and
/// `PGSSLROOTCERT` as libpq does. Returns the URL without them and the settings.
pub(crate) fn take_tls_params(
    url: &str,
    var: impl Fn(&str) -> Option<OsString>,
) -> Result<(String, TlsSettings), String> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let decode = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
    let mut mode = None;
    let mut root = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match decode(k).as_str() {
            "sslmode" => mode = Some(decode(v)),
            "sslrootcert" => root = Some(decode(v)),
            _ => kept.push(pair),
        }
    }
    let env = |k: &str| {
        var(k)
            .and_then(|v| v.into_string().ok())
            .filter(|v| !v.is_empty())
    };
    let mode = match mode.or_else(|| env("PGSSLMODE")) {
        None => SslMode::Prefer,
        Some(m) => SslMode::ALL
            .into_iter()
            .find(|x| x.name() == m)
            .ok_or_else(|| {
                format!(
                    "sslmode={m} is not one of disable, prefer, require, verify-ca, verify-full"
                )
            })?,
    };
    let root_cert = root.or_else(|| env("PGSSLROOTCERT")).map(|r| {
        if r == "system" {
            Roots::System
        } else {
            Roots::File(PathBuf::from(r))
        }
    });
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, TlsSettings { mode, root_cert }))
}

/// The CA certificates of `roots`, or a one-line reason there are none.
fn load_roots(roots: &Roots) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::File(path) => {
            let certs = read_pem_certs(path).map_err(|e| {
                format!(
                    "cannot read sslrootcert={}: {e}: give a PEM file holding the CA that signed the server's certificate",
                    path.display()
                )
            })?;
            let (added, _) = store.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!(
                    "sslrootcert={} holds no usable CA certificate: give a PEM file holding the CA that signed the server's certificate",
                    path.display()
                ));
            }
        }
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found
                    .errors
                    .first()
                    .map_or_else(|| "none found".to_string(), |e| e.to_string());
                return Err(format!(
                    "no system CA certificates to check the server's against ({why}): install ca-certificates, or give the CA's PEM file with sslrootcert=PATH"
                ));
            }
        }
    }
    Ok(store)
}

fn read_pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    Ok(certs)
}

/// Checks a server's certificate as the sslmode says: not at all (`prefer`, `require`
/// without `sslrootcert`), its CA only (`verify-ca`, `require` with `sslrootcert`), or CA
/// and name (`verify-full`). Handshake signatures are always checked, so the connection is
/// bound to the key of the certificate presented. Hand-written because rustls offers only
/// the full check; this wraps it rather than re-implementing it.
#[derive(Debug)]
struct Verifier {
    inner: Option<Arc<WebPkiServerVerifier>>,
    check_name: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(inner) = &self.inner else {
            return Ok(ServerCertVerified::assertion());
        };
        match inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            // webpki compares the name only after the chain verified, so this error means
            // the CA check passed.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<OsString> {
        None
    }

    #[test]
    fn sslmode_and_sslrootcert_leave_the_url() {
        let (url, tls) = take_tls_params(
            "postgres://u@h/db?application_name=x&sslmode=verify-full&sslrootcert=%2Fca%20dir%2Fca.pem&connect_timeout=3",
            no_env,
        )
        .unwrap();
        assert_eq!(
            url,
            "postgres://u@h/db?application_name=x&connect_timeout=3"
        );
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert_eq!(tls.root_cert, Some(Roots::File("/ca dir/ca.pem".into())));
        let (url, tls) = take_tls_params("postgres://u@h/db", no_env).unwrap();
        assert_eq!(
            (url.as_str(), tls.mode),
            ("postgres://u@h/db", SslMode::Prefer)
        );
        assert_eq!(tls.root_cert, None);
        let (url, tls) = take_tls_params("postgres://u@h/db?sslrootcert=system", no_env).unwrap();
        assert_eq!(url, "postgres://u@h/db");
        assert_eq!(tls.root_cert, Some(Roots::System));
    }

    #[test]
    fn the_environment_fills_in_what_the_url_leaves_out() {
        let env = |k: &str| match k {
            "PGSSLMODE" => Some(OsString::from("verify-ca")),
            "PGSSLROOTCERT" => Some(OsString::from("/etc/ca.pem")),
            _ => None,
        };
        let (_, tls) = take_tls_params("postgres://u@h/db", env).unwrap();
        assert_eq!(tls.mode, SslMode::VerifyCa);
        assert_eq!(tls.root_cert, Some(Roots::File("/etc/ca.pem".into())));
        let (_, tls) = take_tls_params("postgres://u@h/db?sslmode=disable", env).unwrap();
        assert_eq!(tls.mode, SslMode::Disable);
    }

    #[test]
    fn an_unknown_sslmode_lists_the_known_ones() {
        let e = take_tls_params("postgres://u@h/db?sslmode=allow-ish", no_env).unwrap_err();
        assert!(
            e.contains("sslmode=allow-ish") && e.contains("verify-full"),
            "{e}"
        );
    }

    #[test]
    fn an_unreadable_sslrootcert_is_named() {
        let tls = TlsSettings {
            mode: SslMode::VerifyFull,
            root_cert: Some(Roots::File("/nonexistent/ca.pem".into())),
        };
        let e = tls.connector().err().unwrap_or_default();
        assert!(e.contains("sslrootcert=/nonexistent/ca.pem"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
