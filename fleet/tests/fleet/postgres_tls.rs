//! PostgreSQL over TLS (`sslmode=require`, features `postgres` and `tls`): a server of the
//! test's own that accepts TLS connections only (`hostssl` in its `pg_hba.conf`), its
//! certificate signed by a CA made here. A fleet trusting that CA (`tls_ca`) shares a trip; one
//! trusting only the system's roots is refused, saying the certificate is not trusted, and so
//! is one naming a host the certificate does not; a plain connection is refused by the server.

use std::path::Path;
use std::time::Duration;

use breakerbox_fleet::{Fleet, FleetConfig, FleetError};
use breakerbox_runtime::State;

use crate::instances::{Instances, fail, runtime};
use crate::postgres::{Postgres, own, postgres_bin};
use crate::servers::{Certs, poll};
use crate::support::shared;

/// A server answering TLS only, and the directory of its certificates (kept alive with it).
struct TlsPostgres {
    server: Postgres,
    certs: Certs,
    _dir: tempfile::TempDir,
}

impl TlsPostgres {
    fn start(bin: &Path) -> TlsPostgres {
        let dir = tempfile::tempdir().unwrap();
        let certs = Certs::make(dir.path());
        let hba = dir.path().join("pg_hba.conf");
        std::fs::write(
            &hba,
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
        )
        .unwrap();
        // PostgreSQL refuses a key others may read.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&certs.key, std::fs::Permissions::from_mode(0o600)).unwrap();
        own(dir.path());
        let setting = |name: &str, path: &Path| format!("{name}={}", path.display());
        let cert = setting("ssl_cert_file", &certs.cert);
        let key = setting("ssl_key_file", &certs.key);
        let hba = setting("hba_file", &hba);
        // The server's readiness check (psql, `sslmode=prefer`) goes over TLS.
        let server =
            Postgres::start_with(bin, &["-c", "ssl=on", "-c", &cert, "-c", &key, "-c", &hba]);
        TlsPostgres {
            server,
            certs,
            _dir: dir,
        }
    }

    fn url(&self, sslmode: &str) -> String {
        format!("{}?sslmode={sslmode}", self.server.url())
    }
}

#[test]
fn a_fleet_over_tls_to_postgres_trusting_the_ca_shares_a_trip() {
    let _machine = shared();
    let Some(bin) = postgres_bin() else { return };
    let pg = TlsPostgres::start(&bin);
    let rt = runtime();
    let _guard = rt.enter();
    let url = pg.url("require");
    let ca = pg.certs.ca.clone();
    let fleet = Instances::connect(&rt, 2, &["pay"], |_| {
        FleetConfig::new(&url)
            .prefix("pgtls")
            .tls_ca(&ca)
            // No store error is allowed below: a TLS operation on a loaded machine may take
            // more than half a second.
            .timeout(Duration::from_secs(5))
    });
    fail(&fleet.breakers[0][0]);
    fleet.all(0, State::Open, Duration::from_secs(5));
    // `connected` says a pass of the fleet's task reached the store; a trip may arrive by the
    // feed before an instance's first pass (its schema check waiting on the other's) is done.
    for f in &fleet.fleets {
        poll("every fleet connected", Duration::from_secs(10), || {
            f.status().connected
        });
        let s = f.status();
        assert_eq!(s.store_errors, 0, "{s:?}");
    }
    // Every connection of the fleet's is a TLS one, as the server sees it.
    let plain = pg.server.sql(
        "select count(*) from pg_stat_activity a join pg_stat_ssl s using (pid) \
         where a.application_name = 'breakerbox-fleet' and not s.ssl",
    );
    let tls = pg.server.sql(
        "select count(*) from pg_stat_activity a join pg_stat_ssl s using (pid) \
         where a.application_name = 'breakerbox-fleet' and s.ssl",
    );
    assert_eq!(plain, "0");
    assert!(tls.parse::<u32>().unwrap() >= 2, "{tls} TLS connections");
}

#[test]
fn a_postgres_certificate_from_an_authority_not_trusted_is_refused_at_connect() {
    let _machine = shared();
    let Some(bin) = postgres_bin() else { return };
    let pg = TlsPostgres::start(&bin);
    let rt = runtime();
    // No `tls_ca`: the system's roots do not know the test's CA.
    let e = rt
        .block_on(Fleet::connect(
            FleetConfig::new(pg.url("require")).timeout(Duration::from_millis(500)),
        ))
        .unwrap_err();
    assert!(matches!(e, FleetError::Store { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("the server's certificate is not trusted"),
        "{e}"
    );
}

#[test]
fn a_postgres_certificate_that_does_not_name_the_host_is_refused_at_connect() {
    let _machine = shared();
    let Some(bin) = postgres_bin() else { return };
    let pg = TlsPostgres::start(&bin);
    let rt = runtime();
    // The server at 127.0.0.1 under a name its certificate (`localhost`, `127.0.0.1`) lacks.
    let url = format!(
        "postgres://postgres@elsewhere.test:{}/postgres?sslmode=require&hostaddr=127.0.0.1",
        pg.server.port
    );
    let e = rt
        .block_on(Fleet::connect(
            FleetConfig::new(url)
                .tls_ca(&pg.certs.ca)
                .timeout(Duration::from_millis(500)),
        ))
        .unwrap_err();
    assert!(matches!(e, FleetError::Store { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("the server's certificate does not name `elsewhere.test`"),
        "{e}"
    );
}

#[test]
fn a_plain_connection_to_a_postgres_server_that_wants_tls_is_refused_by_it() {
    let _machine = shared();
    let Some(bin) = postgres_bin() else { return };
    let pg = TlsPostgres::start(&bin);
    let rt = runtime();
    // `prefer` connects plain as `disable` does: the server's TLS is not taken up.
    for url in [pg.url("disable"), pg.url("prefer"), pg.server.url()] {
        let e = rt
            .block_on(Fleet::connect(
                FleetConfig::new(&url)
                    .tls_ca(&pg.certs.ca)
                    .timeout(Duration::from_millis(500)),
            ))
            .unwrap_err();
        assert!(matches!(e, FleetError::Store { .. }), "{url}: {e:?}");
        let text = e.to_string();
        assert!(
            text.contains("no pg_hba.conf entry") && text.contains("no encryption"),
            "{url}: {text}"
        );
    }
}

#[test]
fn a_missing_ca_file_for_postgres_is_an_error_at_start() {
    let _machine = shared();
    let rt = runtime();
    let _guard = rt.enter();
    let e = Fleet::start(
        FleetConfig::new("postgres://postgres@127.0.0.1:1/postgres?sslmode=require")
            .tls_ca("/nonexistent/ca.pem"),
    )
    .unwrap_err();
    assert!(matches!(e, FleetError::TlsCa { .. }), "{e:?}");
    assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
}
