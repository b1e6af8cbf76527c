//! Tests that need a process of their own (a global count, the environment, a process-wide
//! origin): the test runs this binary again with only itself selected, and passes when that
//! run does. The facade's tests (`tests/attribute/support.rs`) and the integration config
//! tests include this file by path, so there is one copy.

use std::ffi::OsStr;
use std::process::Command;

/// Set, in the run of a single test, to that test's name.
const VAR: &str = "BREAKERBOX_TEST_ALONE";

/// Runs `body` as the only test of a process: in the run [`alone`] starts, `body` runs; in
/// every other run, the test starts that run and checks that exactly this test passed in it.
/// `test` is the test's path as `module_path!()` gives it, with the function's name.
#[track_caller]
pub fn alone(test: &str, body: impl FnOnce()) {
    alone_with_env::<&str>(test, &[], body);
}

/// [`alone`], with the variables `env` added to the environment of the process `body` runs
/// in: the process starts with them, so nothing sets a variable while another thread may
/// read the environment.
#[track_caller]
pub fn alone_with_env<V: AsRef<OsStr>>(test: &str, env: &[(&str, V)], body: impl FnOnce()) {
    // libtest names tests without the crate's name, which `module_path!()` starts with.
    let name = test.split_once("::").map_or(test, |(_, rest)| rest);
    if std::env::var_os(VAR).is_some_and(|v| v == name) {
        body();
        return;
    }
    let out = Command::new(std::env::current_exe().expect("the test binary"))
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(VAR, name)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name}, alone in its process: {}\n{stdout}\n{stderr}",
        out.status
    );
}
