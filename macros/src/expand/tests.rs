//! The generated code, read as text.

use super::expand;
use quote::quote;

fn expanded(attr: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> String {
    expand(attr, item).to_string()
}

#[test]
fn keeps_signature_and_attributes() {
    let out = expanded(
        quote!(),
        quote! {
            /// Docs.
            #[inline]
            pub(crate) unsafe fn get<'a, T: Clone>(x: &'a T) -> Result<&'a T, E> where T: Send {
                #![allow(unused)]
                Ok(x)
            }
        },
    );
    assert!(out.starts_with("# [doc = r\" Docs.\"] # [inline] pub (crate) unsafe fn get < 'a , T : Clone > (x : & 'a T) -> Result < & 'a T , E > where T : Send { # ! [allow (unused)]"), "{out}");
    assert_eq!(
        out.matches("Ok (x)").count(),
        1,
        "the body is quoted once: {out}"
    );
}

#[test]
fn default_name_is_module_path_and_fn() {
    let out = expanded(
        quote!(),
        quote!(
            fn get() -> Result<(), E> {
                Ok(())
            }
        ),
    );
    assert!(
        out.contains("concat ! (:: core :: module_path ! () , \"::\" , \"get\")"),
        "{out}"
    );
}

#[test]
fn emits_parsed_constants() {
    let out = expanded(
        quote!(
            name = "users",
            open_for = "2s",
            window = "1m",
            failure_rate = 50
        ),
        quote!(
            fn get() -> Result<(), E> {
                Ok(())
            }
        ),
    );
    assert!(
        out.contains(
            ". open_for (:: breakerbox :: __private :: Duration :: from_nanos (2000000000u64))"
        ),
        "{out}"
    );
    assert!(out.contains("Window :: Time"), "{out}");
    assert!(out.contains(". failure_rate (50u8)"), "{out}");
}

#[test]
fn async_body_is_awaited_in_place() {
    let out = expanded(
        quote!(fallback = cached),
        quote!(
            async fn get(&self, id: u32) -> Result<u32, E> {
                Ok(id)
            }
        ),
    );
    assert!(
        out.contains("Guarded :: new (__breakerbox_permit , async move {"),
        "{out}"
    );
    assert!(out.contains("Ok (id) }) . await"), "{out}");
    assert!(out.contains("cached (self , id) . await"), "{out}");
}

#[test]
fn fallback_with_reason_passes_the_reason_last() {
    let out = expanded(
        quote!(fallback_with_reason = cached, timeout = "1s"),
        quote!(
            async fn get(&self, id: u32) -> Result<u32, E> {
                Ok(id)
            }
        ),
    );
    let reason = ":: breakerbox :: __private :: FallbackReason ::";
    assert!(
        out.contains(&format!(
            "Err (__breakerbox_rejected) => {{ return cached (self , id , {reason} Rejected (__breakerbox_rejected)) . await ; }}"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "return cached (self , id , {reason} TimedOut (__breakerbox_timeout)) . await ;"
        )),
        "{out}"
    );
}

#[test]
fn raw_identifiers_are_named_without_r_hash() {
    let out = expanded(
        quote!(),
        quote!(
            fn r#type() -> Result<(), E> {
                Ok(())
            }
        ),
    );
    assert!(out.contains("\"::\" , \"type\")"), "{out}");
}

#[test]
fn renamed_crate() {
    let out = expanded(
        quote!(crate = "my::bb"),
        quote!(
            fn get() -> Result<(), E> {
                Ok(())
            }
        ),
    );
    assert!(out.contains("my :: bb :: __private :: Lazy"), "{out}");
    assert!(!out.contains(":: breakerbox ::"), "{out}");
}

#[test]
fn errors_keep_the_item() {
    let out = expanded(
        quote!(failures = 0),
        quote!(
            fn get() -> Result<(), E> {
                Ok(())
            }
        ),
    );
    assert!(out.contains("compile_error"), "{out}");
    assert!(
        out.contains("fn get () -> Result < () , E > { Ok (()) }"),
        "{out}"
    );
}

#[test]
fn rejects_non_functions() {
    let out = expanded(
        quote!(),
        quote!(
            struct S;
        ),
    );
    assert!(out.contains("goes on a function"), "{out}");
    let out = expanded(
        quote!(),
        quote!(
            fn get(&self) -> Result<(), E>;
        ),
    );
    assert!(out.contains("needs a function body"), "{out}");
    let out = expanded(
        quote!(),
        quote!(
            const fn get() -> Result<(), E> {
                Ok(())
            }
        ),
    );
    assert!(out.contains("const fn"), "{out}");
    let out = expanded(
        quote!(timeout = "1s"),
        quote!(
            fn get() -> Result<(), E> {
                Ok(())
            }
        ),
    );
    assert!(out.contains("needs an `async fn`"), "{out}");
}

/// Calls of a function without `replay` pay nothing for it: its expansion holds no token of
/// replay's (no slot, no journal, no body moved into a function of its own), for every shape
/// of function; with `replay` (where it is allowed), the same functions do.
#[test]
fn a_function_without_replay_expands_to_no_replay_code() {
    let cases = [
        (
            quote!(name = "a", failures = 3,),
            quote!(
                fn get(id: u32) -> Result<u32, E> {
                    Ok(id)
                }
            ),
            true,
        ),
        (
            quote!(),
            quote!(
                pub fn get(mut id: u32, s: String) -> Result<u32, E> {
                    id += 1;
                    Ok(id)
                }
            ),
            true,
        ),
        (
            quote!(name = "c", timeout = "1s",),
            quote!(
                async fn get(id: u32) -> Result<u32, E> {
                    Ok(id)
                }
            ),
            true,
        ),
        (
            quote!(name = "d", fallback = fb,),
            quote!(
                fn get(id: u32) -> Result<u32, E> {
                    Ok(id)
                }
            ),
            false,
        ),
        (
            quote!(
                name = "e",
                failure_rate = 50,
                window = "10s",
                min_calls = 20,
            ),
            quote!(
                async fn get(id: u32, s: String) -> Result<u32, E> {
                    Ok(id)
                }
            ),
            true,
        ),
        (
            quote!(name = "f",),
            quote!(
                async fn get(&self, id: u32) -> Result<u32, E> {
                    Ok(id)
                }
            ),
            false,
        ),
    ];
    for (attr, item, replay_allowed) in cases {
        let plain = expanded(attr.clone(), item.clone());
        assert!(!plain.contains("compile_error"), "{plain}");
        assert!(!plain.to_lowercase().contains("replay"), "{plain}");
        if replay_allowed {
            let with_replay = expanded(quote!(#attr replay = "memory"), item);
            assert!(with_replay.contains("__breakerbox_replay"), "{with_replay}");
        }
    }
}
