//! The fleet tests' redis-server: `scripts/test`'s (`$BREAKERBOX_TEST_REDIS_URL`), else one of
//! the test's own on a free loopback port, persistence off, killed when dropped (also when the
//! test fails).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Redis {
    pub url: String,
    own: Option<Child>,
}

impl Redis {
    /// `scripts/test`'s server, else a new one once it accepts connections; the error is why
    /// `redis-server` could not be started.
    pub fn start() -> std::io::Result<Redis> {
        if let Ok(url) = std::env::var("BREAKERBOX_TEST_REDIS_URL") {
            return Ok(Redis { url, own: None });
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()?;
        let redis = Redis {
            url: format!("redis://127.0.0.1:{port}/"),
            own: Some(child),
        };
        // A real process starting: polled until it listens, at most 10 s.
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(redis)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(child) = &mut self.own {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
