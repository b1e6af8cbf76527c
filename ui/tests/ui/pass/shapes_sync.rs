//! Every synchronous function shape users write compiles unchanged under the attribute.
use std::collections::HashMap;
use std::fmt::Display;
use std::str::FromStr;
use std::sync::Arc;

use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub enum Error {
    Parse,
    Missing,
    Rejected(Rejected),
}

impl From<Rejected> for Error {
    fn from(rejected: Rejected) -> Self {
        Error::Rejected(rejected)
    }
}

/// Docs and attributes stay on the function.
#[circuit_breaker]
#[inline]
pub fn free(id: u32) -> Result<u32, Error> {
    Ok(id)
}

#[circuit_breaker(name = "shapes-generic")]
fn parse<T>(text: &str) -> Result<T, Error>
where
    T: FromStr,
{
    text.parse().map_err(|_| Error::Parse)
}

fn parse_fallback<T: Default>(_text: &str) -> Result<T, Error> {
    Ok(T::default())
}

#[circuit_breaker(fallback = parse_fallback)]
fn parse_or_default<T: FromStr + Default>(text: &str) -> Result<T, Error> {
    text.parse().map_err(|_| Error::Parse)
}

#[circuit_breaker(fallback = parse_fallback::<T>)]
fn parse_turbofish<T: FromStr + Default>(text: &str) -> Result<T, Error> {
    text.parse().map_err(|_| Error::Parse)
}

/// A result that borrows from the arguments, with a named and an elided lifetime.
#[circuit_breaker]
fn first<'a>(items: &'a [String]) -> Result<&'a str, Error> {
    items.first().map(String::as_str).ok_or(Error::Missing)
}

#[circuit_breaker]
fn first_elided(items: &[String]) -> Result<&str, Error> {
    let first = items.first().ok_or(Error::Missing)?;
    Ok(first)
}

/// A body that moves its argument.
#[circuit_breaker]
fn consume(items: Vec<String>) -> Result<usize, Error> {
    let moved = items;
    Ok(moved.len())
}

/// A boxed error takes the rejection through std's `From<E: Error>`.
#[circuit_breaker]
fn boxed(text: &str) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
    Ok(text.parse()?)
}

/// Patterns and `mut` bindings in the arguments (without a fallback, any pattern works).
#[circuit_breaker]
fn patterns((a, b): (u32, u32), mut extra: Vec<u32>, _: bool) -> Result<u32, Error> {
    extra.push(a + b);
    Ok(extra.iter().sum())
}

fn mut_fallback(_extra: Vec<u32>) -> Result<usize, Error> {
    Ok(0)
}

#[circuit_breaker(fallback = mut_fallback)]
fn mut_argument(mut extra: Vec<u32>) -> Result<usize, Error> {
    extra.push(1);
    Ok(extra.len())
}

/// `impl Trait` in argument and return position.
#[circuit_breaker]
fn evens(limit: impl Into<u32>) -> Result<impl Iterator<Item = u32>, Error> {
    let limit = limit.into();
    Ok((0..limit).filter(|n| n % 2 == 0))
}

fn show_fallback(value: impl Display) -> Result<String, Error> {
    Ok(format!("cached {value}"))
}

#[circuit_breaker(fallback = show_fallback)]
fn show(value: impl Display) -> Result<String, Error> {
    Ok(value.to_string())
}

/// `unsafe fn`: the body keeps its meaning (and edition 2024's `unsafe` blocks).
#[circuit_breaker]
unsafe fn read(pointer: *const u32) -> Result<u32, Error> {
    // SAFETY: the caller passes a valid pointer.
    Ok(unsafe { *pointer })
}

/// Early `return` and `?` inside the body.
#[circuit_breaker]
fn early(flag: bool, text: &str) -> Result<u32, Error> {
    if flag {
        return Ok(0);
    }
    let n: u32 = text.parse().map_err(|_| Error::Parse)?;
    Ok(n)
}

/// A unit-returning function with `classify` and `fallback`.
fn always_success(_: &()) -> breakerbox::Outcome {
    breakerbox::Outcome::Success
}

fn nothing(_message: &str) {}

#[circuit_breaker(classify = always_success, fallback = nothing)]
fn log(message: &str) {
    let _ = message.len();
}

pub struct Store {
    values: HashMap<u32, String>,
    hits: u32,
}

impl Store {
    fn cached(&self, _id: u32) -> Result<&str, Error> {
        Ok("cached")
    }

    #[circuit_breaker(fallback = Self::cached)]
    fn get(&self, id: u32) -> Result<&str, Error> {
        self.values.get(&id).map(String::as_str).ok_or(Error::Missing)
    }

    #[circuit_breaker]
    fn hits_mut(&mut self) -> Result<&mut u32, Error> {
        self.hits += 1;
        Ok(&mut self.hits)
    }

    #[circuit_breaker]
    fn into_values(self) -> Result<HashMap<u32, String>, Error> {
        Ok(self.values)
    }

    fn shared_fallback(self: Arc<Self>) -> Result<u32, Error> {
        Ok(0)
    }

    #[circuit_breaker(fallback = Self::shared_fallback)]
    fn shared(self: Arc<Self>) -> Result<u32, Error> {
        Ok(self.hits)
    }

    #[circuit_breaker]
    fn associated() -> Result<Self, Error> {
        Ok(Store { values: HashMap::new(), hits: 0 })
    }
}

impl Store {
    fn drain_fallback(self) -> Result<usize, Error> {
        Ok(0)
    }

    /// `self` by value with a fallback: moved into the fallback or into the body.
    #[circuit_breaker(fallback = Self::drain_fallback)]
    fn drain(self) -> Result<usize, Error> {
        Ok(self.values.len())
    }
}

pub trait Lookup {
    /// A default method body can be wrapped.
    #[circuit_breaker]
    fn lookup(&self, id: u32) -> Result<u32, Error> {
        Ok(id)
    }

    fn fetch(&self, id: u32) -> Result<u32, Error>;
}

impl Lookup for Store {
    #[circuit_breaker]
    fn fetch(&self, id: u32) -> Result<u32, Error> {
        Ok(id + self.hits)
    }
}

fn main() {
    free(1).unwrap();
    let _: u32 = parse("5").unwrap();
    let _: u32 = parse_or_default("x").unwrap_or_default();
    let _: u32 = parse_turbofish("7").unwrap();
    let items = vec!["a".to_owned()];
    assert_eq!(first(&items).unwrap(), "a");
    assert_eq!(first_elided(&items).unwrap(), "a");
    assert_eq!(consume(items).unwrap(), 1);
    assert_eq!(evens(6u8).unwrap().count(), 3);
    assert_eq!(patterns((1, 2), vec![3], true).unwrap(), 6);
    assert_eq!(mut_argument(vec![]).unwrap(), 1);
    assert_eq!(show(5).unwrap(), "5");
    let value = 9;
    // SAFETY: a valid pointer.
    assert_eq!(unsafe { read(&value) }.unwrap(), 9);
    assert_eq!(early(true, "x").unwrap(), 0);
    assert_eq!(boxed("4").unwrap(), 4);
    log("hello");
    let mut store = Store::associated().unwrap();
    store.values.insert(1, "one".to_owned());
    assert_eq!(store.get(1).unwrap(), "one");
    *store.hits_mut().unwrap() += 1;
    assert_eq!(store.lookup(3).unwrap(), 3);
    assert_eq!(store.fetch(3).unwrap(), 5);
    let store = Arc::new(store);
    assert_eq!(store.clone().shared().unwrap(), 2);
    let store = Arc::try_unwrap(store).ok().unwrap();
    assert_eq!(Store::associated().unwrap().drain().unwrap(), 0);
    assert_eq!(store.into_values().unwrap().len(), 1);
}
