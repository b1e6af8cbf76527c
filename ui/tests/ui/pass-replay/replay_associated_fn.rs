//! `replay` on associated functions whose bodies name `Self` and the `impl`'s generic
//! parameters: the body the replay runs again is a closure of the function, not a nested item.
#![deny(warnings)]

use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

pub struct Orders;

impl Orders {
    fn total(items: &[u32]) -> u32 {
        items.iter().sum()
    }

    #[circuit_breaker(replay = "memory")]
    pub fn create(mut items: Vec<u32>) -> Result<u32, Error> {
        items.push(1);
        Ok(Self::total(&items))
    }

    #[circuit_breaker(replay = "disk", replay_key = id.to_string())]
    pub async fn create_async(id: u64, items: Vec<u32>) -> Result<u32, Error> {
        if id == 0 {
            return Err(Error);
        }
        Ok(Self::total(&items))
    }
}

pub struct Typed<T>(T);

impl<T: 'static> Typed<T> {
    #[circuit_breaker(replay = "memory")]
    pub fn size(n: u32) -> Result<u32, Error> {
        Ok(n * u32::try_from(size_of::<T>()).map_err(|_| Error)?)
    }
}

fn main() {
    assert_eq!(Orders::create(vec![2]).unwrap(), 3);
    assert_eq!(Typed::<u16>::size(2).unwrap(), 4);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    assert_eq!(runtime.block_on(Orders::create_async(1, vec![2])).unwrap(), 2);
}
