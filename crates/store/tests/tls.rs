//! TLS to a PostgreSQL store, against a real server the test starts with `ssl = on` and a
//! certificate chain the test generates (a CA of its own signing the server's certificate,
//! which names only `localhost`). Skipped, with the reason, where PostgreSQL is absent.

mod common;
mod pgserver;

use common::*;
use pgserver::PgServer;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use virtperf_store::{Location, RunStatus, Store, StoreError};

/// A test CA's certificate (PEM), and a server certificate it signed for `localhost` with
/// the server's key (PEM).
struct Chain {
    ca_pem: String,
    server_pem: String,
    server_key_pem: String,
}

fn chain() -> Chain {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "virtperf test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut server = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    server
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let cert = server.signed_by(&key, &issuer).unwrap();
    Chain {
        ca_pem: ca_cert.pem(),
        server_pem: cert.pem(),
        server_key_pem: key.serialize_pem(),
    }
}

/// A server with TLS on (and, with `hostssl_only`, only TLS over TCP), database `db`
/// created before TLS was required, and the CA's file; `None` (printed) to skip.
fn tls_server(hostssl_only: bool) -> Option<(PgServer, std::path::PathBuf)> {
    let mut pg = PgServer::start_or_skip()?;
    pg.create_db("db");
    let c = chain();
    let ca = pg.scratch().join("ca.pem");
    std::fs::write(&ca, &c.ca_pem).unwrap();
    pg.enable_tls(&c.server_pem, &c.server_key_pem, hostssl_only)
        .unwrap();
    Some((pg, ca))
}

fn open(url: &str, dir: &TempDir) -> Result<Store, StoreError> {
    Store::open_at(&Location::Postgres {
        url: url.to_string(),
        side_file: dir.file("pg.unsaved.jsonl"),
    })
}

/// Stores a run with one trial and reads it back.
fn round_trip(s: &mut Store) {
    let id = s.begin_run(&new_run("over-tls")).unwrap();
    s.add_trial(id, &ok_trial(1)).unwrap();
    s.finish_run(id, RunStatus::Complete).unwrap();
    let row = s.run(id).unwrap();
    assert_eq!((row.trials_ok, row.status), (1, RunStatus::Complete));
    assert_eq!(s.trials(id).unwrap().len(), 1);
}

/// Whether every connection virtperf has open to `pg` is encrypted, as the server sees it
/// (`pg_stat_ssl`); asked over the server's UNIX socket, which hostssl lines do not close.
fn virtperf_connections_use_tls(pg: &PgServer) -> bool {
    let mut c = postgres::Config::new()
        .host_path(pg.socket_dir())
        .port(pg.port)
        .user("virtperf")
        .dbname("db")
        .application_name("tls-test-admin")
        .connect(postgres::NoTls)
        .unwrap();
    let row = c
        .query_one(
            "SELECT count(*), coalesce(bool_and(s.ssl), false)
             FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.application_name = 'virtperf'",
            &[],
        )
        .unwrap();
    let n: i64 = row.get(0);
    let all: bool = row.get(1);
    n > 0 && all
}

fn connect_error(url: &str, dir: &TempDir) -> String {
    let e = open(url, dir).unwrap_err();
    assert!(matches!(e, StoreError::Connect { .. }), "{e:?}");
    let msg = e.to_string();
    eprintln!("refused: {msg}");
    assert!(!msg.contains('\n'), "not one line: {msg}");
    assert!(!msg.contains(pgserver::PASSWORD), "{msg}");
    msg
}

#[test]
fn sslmode_require_stores_and_reads_a_run_over_tls() {
    let Some((pg, _)) = tls_server(false) else {
        return;
    };
    let dir = TempDir::new("tls-require");
    let mut s = open(&format!("{}?sslmode=require", pg.url("db")), &dir).unwrap();
    round_trip(&mut s);
    assert!(
        virtperf_connections_use_tls(&pg),
        "the server saw plain text"
    );
}

#[test]
fn verify_full_checks_the_ca_and_the_name() {
    let Some((pg, ca)) = tls_server(false) else {
        return;
    };
    let dir = TempDir::new("tls-verify");
    let ca = ca.display();
    let on = |host: &str, query: &str| {
        format!(
            "postgres://virtperf:{}@{host}:{}/db?{query}",
            pgserver::PASSWORD,
            pg.port
        )
    };
    // The test CA signed the certificate, which names localhost.
    let mut s = open(
        &on(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        &dir,
    )
    .unwrap();
    round_trip(&mut s);
    assert!(
        virtperf_connections_use_tls(&pg),
        "the server saw plain text"
    );
    drop(s);
    // Without the CA, the system's CAs do not know the test CA.
    let msg = connect_error(&on("localhost", "sslmode=verify-full"), &dir);
    assert!(
        msg.contains("not signed by a CA") && msg.contains("sslmode=verify-full"),
        "{msg}"
    );
    assert!(msg.contains("sslrootcert=PATH"), "{msg}");
    // By address, the certificate's name does not match: verify-full refuses, naming the
    // host; verify-ca checks only the CA and connects.
    let msg = connect_error(
        &on(
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        &dir,
    );
    assert!(
        msg.contains("does not name the host 127.0.0.1") && msg.contains("verify-ca"),
        "{msg}"
    );
    open(
        &on("127.0.0.1", &format!("sslmode=verify-ca&sslrootcert={ca}")),
        &dir,
    )
    .unwrap();
    // A CA file that holds no certificate is named, before any connection.
    let empty = dir.file("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let msg = connect_error(
        &on(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={}", empty.display()),
        ),
        &dir,
    );
    assert!(
        msg.contains(&format!("sslrootcert={}", empty.display())),
        "{msg}"
    );
}

#[test]
fn a_hostssl_only_server_refuses_sslmode_disable_with_one_clear_line() {
    let Some((pg, _)) = tls_server(true) else {
        return;
    };
    let dir = TempDir::new("tls-hostssl");
    let msg = connect_error(&format!("{}?sslmode=disable", pg.url("db")), &dir);
    assert!(
        msg.contains("only over TLS") && msg.contains("sslmode=disable") && msg.contains("hostssl"),
        "{msg}"
    );
    // prefer, the default, takes the TLS the server offers.
    let mut s = open(&pg.url("db"), &dir).unwrap();
    round_trip(&mut s);
    assert!(
        virtperf_connections_use_tls(&pg),
        "the server saw plain text"
    );
}

#[test]
fn sslmode_require_against_a_server_without_tls_says_so() {
    let Some(pg) = PgServer::start_or_skip() else {
        return;
    };
    let dir = TempDir::new("tls-none");
    let url = pg.create_db("db");
    let msg = connect_error(&format!("{url}?sslmode=require"), &dir);
    assert!(
        msg.contains("does not offer TLS") && msg.contains("sslmode=prefer"),
        "{msg}"
    );
    // prefer, the default, falls back to plain text.
    let mut s = open(&url, &dir).unwrap();
    round_trip(&mut s);
}
