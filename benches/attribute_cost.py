#!/usr/bin/env python3
"""What `#[circuit_breaker]` costs to compile, against `#[tracing::instrument(skip_all)]`.

Writes a Cargo workspace of three binary crates under `<target>/attribute-cost/` with the same
200 functions and the same dependencies (breakerbox, tracing): `plain` (no attribute),
`breaker` (`#[circuit_breaker]`: a quarter each sync and async, with and without fallback) and
`instrument` (`#[tracing::instrument(skip_all)]`). Each `main` calls every function, so none is
left out of the binary. The dependencies are built once; then each crate alone is rebuilt from
scratch (its source touched, incremental compilation off), `--runs` times per profile, and the
lowest wall time is kept: on a shared machine the lowest is the one least slowed by the rest.

Prints, and writes as JSON to `<target>/attribute-cost/result.json`: per profile (debug,
release) each crate's build time and binary size, and per function the time and bytes added
over `plain`.

    benches/attribute_cost.py [--target DIR] [--runs N] [--functions N]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = ["plain", "breaker", "instrument"]

PRELUDE = """\
#![allow(dead_code, unused_imports, clippy::all)]
use std::fmt;

#[derive(Debug)]
pub struct Error(u64);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "failed on {}", self.0)
    }
}

impl From<breakerbox::Rejected> for Error {
    fn from(_: breakerbox::Rejected) -> Self {
        Error(0)
    }
}

fn fallback_sync(x: u64) -> Result<u64, Error> {
    Ok(x)
}

async fn fallback_async(x: u64) -> Result<u64, Error> {
    Ok(x)
}

/// Polls a future that never waits to its end.
fn run<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}
"""


# In every crate's `main`, so that the libraries' fixed code (the breaker, the registry,
# tracing's spans) is in all three binaries and the differences are the functions' own.
ANCHOR = """\
    let anchor = breakerbox::registry().get_or_create("anchor", breakerbox::Config::default);
    let _ = std::hint::black_box(anchor.call(|| Ok::<u64, Error>(1)));
    let _ = std::hint::black_box(breakerbox::registry().check());
    tracing::info_span!("anchor", n = 1).in_scope(|| tracing::info!("anchor"));
"""


def source(kind, count):
    """The crate's `main.rs`: `count` functions, each kind of function in turn."""
    lines = [PRELUDE]
    calls = []
    for i in range(count):
        is_async = i % 4 >= 2
        with_fallback = i % 2 == 1
        if kind == "breaker":
            fallback = "fallback_async" if is_async else "fallback_sync"
            attr = f"#[breakerbox::circuit_breaker(fallback = {fallback})]" if with_fallback \
                else "#[breakerbox::circuit_breaker]"
        elif kind == "instrument":
            attr = "#[tracing::instrument(skip_all)]"
        else:
            attr = ""
        asyncness = "async " if is_async else ""
        lines.append(f"""{attr}
pub {asyncness}fn f{i}(x: u64) -> Result<u64, Error> {{
    if x % {i + 7} == 0 {{
        return Err(Error(x));
    }}
    Ok(x.wrapping_mul({2 * i + 3}))
}}
""")
        call = f"run(f{i}(std::hint::black_box({i})))" if is_async else f"f{i}(std::hint::black_box({i}))"
        calls.append(f"    sum = sum.wrapping_add({call}.unwrap_or(1));")
    lines.append("fn main() {\n" + ANCHOR + "    let mut sum = 0u64;\n" + "\n".join(calls)
                 + "\n    println!(\"{sum}\");\n}\n")
    return "\n".join(lines)


def write_workspace(work, count):
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "Cargo.toml"), "w") as f:
        f.write(f"""[workspace]
members = {json.dumps(CRATES)}
resolver = "3"

[workspace.dependencies]
breakerbox = {{ path = {json.dumps(ROOT)} }}
tracing = {{ version = "0.1", features = ["attributes"] }}

[profile.dev]
debug = "line-tables-only"

[profile.dev.package."*"]
debug = false
""")
    # Resolved as the workspace is (the same versions), plus tracing's attribute crate.
    lock = os.path.join(work, "Cargo.lock")
    if not os.path.exists(lock):
        shutil.copy(os.path.join(ROOT, "Cargo.lock"), lock)
    for kind in CRATES:
        src = os.path.join(work, kind, "src")
        os.makedirs(src, exist_ok=True)
        with open(os.path.join(work, kind, "Cargo.toml"), "w") as f:
            f.write(f"""[package]
name = "{kind}"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
breakerbox.workspace = true
tracing.workspace = true
""")
        text = source(kind, count)
        path = os.path.join(src, "main.rs")
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, "w") as f:
                f.write(text)


def cargo(work, args, env):
    return subprocess.run(["cargo", *args], cwd=work, env=env, check=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default=os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--functions", type=int, default=200)
    a = p.parse_args()
    work = os.path.join(os.path.abspath(a.target), "attribute-cost")
    write_workspace(work, a.functions)
    env = dict(os.environ)
    env["CARGO_TARGET_DIR"] = os.path.join(work, "target")
    env["CARGO_INCREMENTAL"] = "0"
    env.pop("RUSTFLAGS", None)
    profiles = {"debug": [], "release": ["--release"]}
    load_before = open("/proc/loadavg").read().split()[:3]
    result = {"functions": a.functions, "runs": a.runs, "profiles": {}}
    for profile, flags in profiles.items():
        # Dependencies (and a first build of each crate), not timed.
        cargo(work, ["build", "--workspace", *flags], env)
        times = {kind: [] for kind in CRATES}
        for _ in range(a.runs):
            for kind in CRATES:
                os.utime(os.path.join(work, kind, "src", "main.rs"))
                start = time.monotonic()
                cargo(work, ["build", "-p", kind, *flags], env)
                times[kind].append(time.monotonic() - start)
        sizes = {kind: os.path.getsize(os.path.join(work, "target", profile, kind)) for kind in CRATES}
        best = {kind: min(t) for kind, t in times.items()}
        result["profiles"][profile] = {
            "seconds": times,
            "best_seconds": best,
            "bytes": sizes,
            "ms_per_fn": {k: (best[k] - best["plain"]) * 1000 / a.functions for k in CRATES[1:]},
            "bytes_per_fn": {k: (sizes[k] - sizes["plain"]) / a.functions for k in CRATES[1:]},
        }
    result["load"] = f"{' '.join(load_before)} before, {' '.join(open('/proc/loadavg').read().split()[:3])} after"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    result["commit"] = commit.stdout.strip() or "?"
    models = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")]
    result["machine"] = f"{models[0] if models else '?'}, {os.cpu_count()} cores"
    with open(os.path.join(work, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"{a.functions} functions; the lowest of {a.runs} clean builds of each crate; load {result['load']}")
    print("| profile | plain | `#[circuit_breaker]` | `#[tracing::instrument(skip_all)]` |")
    print("| --- | --- | --- | --- |")
    for profile, r in result["profiles"].items():
        b, s = r["best_seconds"], r["bytes"]
        print(f"| {profile}, build | {b['plain']:.2f} s | {b['breaker']:.2f} s (+{r['ms_per_fn']['breaker']:.1f} ms/fn)"
              f" | {b['instrument']:.2f} s (+{r['ms_per_fn']['instrument']:.1f} ms/fn) |")
        print(f"| {profile}, binary | {s['plain']:,} B | {s['breaker']:,} B (+{r['bytes_per_fn']['breaker']:.0f} B/fn)"
              f" | {s['instrument']:,} B (+{r['bytes_per_fn']['instrument']:.0f} B/fn) |")


if __name__ == "__main__":
    try:
        main()
    except subprocess.CalledProcessError as e:
        sys.stderr.write(e.stderr or "")
        sys.exit(e.returncode)
