//! Code generation: the user's function, edited in place.
//!
//! Only the statements of the body are replaced; attributes, docs, visibility, generics,
//! `unsafe`, `async`, inner attributes and the user's own brace tokens stay as written
//! (tracing #3108: call-site braces switch off `dead_code` for the user's function). The
//! user's block is quoted exactly once.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote};
use syn::ext::IdentExt;
use syn::{Expr, ItemFn, Stmt};

use crate::args::{self, Args, Errors, Key, Name, Window};
use crate::func;

/// `#[circuit_breaker(attr)] item`, without `proc_macro` types so it can be unit-tested.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let args = args::parse(attr).unwrap_or_else(|error| {
        errors.push(error);
        Args::default()
    });
    let mut function = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(function) => function,
        Err(parse_error) => {
            errors.push(not_a_function(&item, parse_error));
            return with_errors(item, errors);
        }
    };
    func::check(&function, &args, &mut errors);
    if let Err(error) = errors.finish() {
        // The item is emitted unchanged beside the errors, so one mistake does not bury the
        // user under follow-on errors and rust-analyzer keeps working (tokio #4154/#4162).
        return with_errors(item, Errors::from(error));
    }
    let body = body(&function, &args);
    function.block.stmts = vec![Stmt::Expr(Expr::Verbatim(body), None)];
    function.into_token_stream()
}

fn with_errors(item: TokenStream, errors: Errors) -> TokenStream {
    let errors = errors.finish().err().map(|error| error.to_compile_error());
    quote!(#errors #item)
}

/// The error for an item that is not a function with a body.
fn not_a_function(item: &TokenStream, parse_error: syn::Error) -> syn::Error {
    if let Ok(method) = syn::parse2::<syn::TraitItemFn>(item.clone())
        && method.default.is_none()
    {
        return syn::Error::new(
            method.sig.ident.span(),
            "#[circuit_breaker] needs a function body to wrap: put it on the method in the \
             `impl` block, or give this trait method a default body",
        );
    }
    let Ok(parsed) = syn::parse2::<syn::Item>(item.clone()) else {
        // Not an item syn can read, such as a function with a syntax error in its body: the
        // parse error points at the problem, not at the attribute.
        return parse_error;
    };
    let span = first_keyword_span(&parsed).unwrap_or_else(|| {
        item.clone()
            .into_iter()
            .find(|token| !matches!(token, TokenTree::Punct(p) if p.as_char() == '#'))
            .map_or_else(Span::call_site, |token| token.span())
    });
    let message = if matches!(parsed, syn::Item::Impl(_) | syn::Item::Trait(_)) {
        "#[circuit_breaker] goes on a function, not on a whole `impl` block or trait: put it on \
         each method that calls the service"
    } else {
        "#[circuit_breaker] goes on a function (`fn` or `async fn`), free or in an `impl` block"
    };
    syn::Error::new(span, message)
}

/// The span of the keyword that says what the item is (`struct`, `impl`, `mod`, …).
fn first_keyword_span(item: &syn::Item) -> Option<Span> {
    use syn::spanned::Spanned;
    Some(match item {
        syn::Item::Struct(item) => item.struct_token.span(),
        syn::Item::Enum(item) => item.enum_token.span(),
        syn::Item::Impl(item) => item.impl_token.span(),
        syn::Item::Mod(item) => item.mod_token.span(),
        syn::Item::Trait(item) => item.trait_token.span(),
        syn::Item::Const(item) => item.const_token.span(),
        syn::Item::Static(item) => item.static_token.span(),
        syn::Item::Type(item) => item.type_token.span(),
        syn::Item::Union(item) => item.union_token.span(),
        syn::Item::Use(item) => item.use_token.span(),
        _ => return None,
    })
}

/// Moves generated `tokens` to where the user wrote `at`, keeping each token's hygiene, so
/// that a type error in them is reported at `at`: every token is located at `at`'s first
/// token except the last, which is located at its last token, so rustc's span for the whole
/// expression covers `at` (a multi-token span cannot be built directly on stable).
fn locate(tokens: TokenStream, at: &impl ToTokens) -> TokenStream {
    let anchor: Vec<TokenTree> = at.to_token_stream().into_iter().collect();
    let (Some(first), Some(last)) = (anchor.first(), anchor.last()) else {
        return tokens;
    };
    let (first, last) = (first.span(), last.span());
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let count = trees.len();
    trees
        .into_iter()
        .enumerate()
        .map(|(i, tree)| relocate(tree, if i + 1 == count { last } else { first }))
        .collect()
}

fn relocate(tree: TokenTree, at: Span) -> TokenTree {
    match tree {
        TokenTree::Group(group) => {
            let stream = group
                .stream()
                .into_iter()
                .map(|tree| relocate(tree, at))
                .collect();
            let mut relocated = Group::new(group.delimiter(), stream);
            relocated.set_span(group.span().located_at(at));
            TokenTree::Group(relocated)
        }
        mut tree => {
            tree.set_span(tree.span().located_at(at));
            tree
        }
    }
}

/// A `Duration` constant for a duration parsed at expansion time.
fn duration(private: &TokenStream, nanos: u64) -> TokenStream {
    quote!(#private::Duration::from_nanos(#nanos))
}

/// The builder calls for every policy key the user set, in a fixed order.
fn configure(args: &Args, private: &TokenStream) -> TokenStream {
    let mut calls = Vec::new();
    let mut count = |method: &str, value: Option<u32>| {
        if let Some(value) = value {
            let method = format_ident!("{method}");
            calls.push(quote!(.#method(#value)));
        }
    };
    count("failures", args.failures.as_ref().map(|k| k.value));
    count("min_calls", args.min_calls.as_ref().map(|k| k.value));
    count(
        "half_open_calls",
        args.half_open_calls.as_ref().map(|k| k.value),
    );
    count("successes", args.successes.as_ref().map(|k| k.value));
    count(
        "max_concurrent",
        args.max_concurrent.as_ref().map(|k| k.value),
    );
    count("max_keys", args.max_keys.as_ref().map(|k| k.value));
    let mut percent = |method: &str, value: Option<u8>| {
        if let Some(value) = value {
            let method = format_ident!("{method}");
            calls.push(quote!(.#method(#value)));
        }
    };
    percent("failure_rate", args.failure_rate.as_ref().map(|k| k.value));
    percent("slow_rate", args.slow_rate.as_ref().map(|k| k.value));
    for (method, value) in [
        ("failures_within", &args.failures_within),
        ("slow", &args.slow),
        ("open_for", &args.open_for),
        ("max_open_for", &args.max_open_for),
        ("probe_timeout", &args.probe_timeout),
        ("idle_for", &args.idle_for),
    ] {
        if let Some(value) = value {
            let method = format_ident!("{method}");
            let value = duration(private, value.value);
            calls.push(quote!(.#method(#value)));
        }
    }
    for (method, value) in [("backoff", &args.backoff), ("jitter", &args.jitter)] {
        if let Some(value) = value {
            let method = format_ident!("{method}");
            let value = proc_macro2::Literal::f64_suffixed(value.value);
            calls.push(quote!(.#method(#value)));
        }
    }
    if let Some(window) = &args.window {
        let window = match window.value {
            Window::Calls(calls) => quote!(#private::Window::Calls(#calls)),
            Window::Time(nanos) => {
                let nanos = duration(private, nanos);
                quote!(#private::Window::Time(#nanos))
            }
        };
        calls.push(quote!(.window(#window)));
    }
    quote!(#(#calls)*)
}

/// The statements that replace the body.
fn body(function: &ItemFn, args: &Args) -> TokenStream {
    let krate = args.krate.as_ref().map_or_else(
        || quote!(::breakerbox),
        |krate| krate.value.to_token_stream(),
    );
    let private = quote!(#krate::__private);

    // Generated locals resolve at the macro's definition site, so they can neither shadow
    // nor be shadowed by the user's names (cached #230); the `__breakerbox_` prefix keeps
    // them readable in expanded code.
    let mixed = Span::mixed_site();
    // A static per function, or with `key` a local handle to the key's breaker.
    let breaker = if args.key.is_some() {
        syn::Ident::new("__breakerbox_breaker", mixed)
    } else {
        syn::Ident::new("__BREAKERBOX_BREAKER", mixed)
    };
    let registration = syn::Ident::new("__BREAKERBOX_REGISTRATION", mixed);
    let permit = syn::Ident::new("__breakerbox_permit", mixed);
    let rejected = syn::Ident::new("__breakerbox_rejected", mixed);
    let result = syn::Ident::new("__breakerbox_result", mixed);
    let outcome = syn::Ident::new("__breakerbox_outcome", mixed);
    let once = syn::Ident::new("__breakerbox_once", mixed);
    let config = syn::Ident::new("__breakerbox_config", mixed);
    let elapsed = syn::Ident::new("__breakerbox_timeout", mixed);

    let is_async = function.sig.asyncness.is_some();
    let dot_await = is_async.then(|| quote!(.await));
    let stmts = &function.block.stmts;

    let name = match &args.name {
        Some(Key {
            value: Name::Literal(name),
            ..
        }) => name.to_token_stream(),
        Some(Key {
            value: Name::Expr(name),
            ..
        }) => quote!(#name),
        None => {
            // `r#type` is named `type`.
            let ident = function.sig.ident.unraw().to_string();
            quote!(::core::concat!(::core::module_path!(), "::", #ident))
        }
    };
    let configure = configure(args, &private);

    // What a rejected call returns: the fallback's answer, or the rejection converted into
    // the function's error type.
    let output = func::output_anchor(function);
    // The fallback's answer, given why it answers (`fallback_with_reason`: a
    // `FallbackReason` as its last argument). Located at the fallback path: a fallback whose
    // arguments or return type do not match the function is reported at `fallback = …`.
    let fallback_call = |reason: TokenStream| {
        args.fallback.as_ref().map(|fallback| {
            let path = &fallback.value;
            let mut arguments = func::fallback_args(function, fallback.span);
            if args.fallback_with_reason {
                arguments.push(reason);
            }
            locate(quote!(#path(#(#arguments),*) #dot_await), path)
        })
    };
    let reject_reason = quote!(#private::FallbackReason::Rejected(#rejected));
    let (reject_pattern, on_reject) = match fallback_call(reject_reason) {
        Some(call) if args.fallback_with_reason => (quote!(#rejected), call),
        Some(call) => (quote!(_), call),
        None => (
            quote!(#rejected),
            // Located at the return type, whose error type lacks `From<Rejected>`.
            locate(quote!(#private::reject(#rejected)), &output),
        ),
    };

    // The body, run once with the permit held. Its result type is the function's return type (with `impl Trait` erased to `_`,
    // which a hint may use where a signature may not: tracing #1227, async-trait #281). Giving
    // it up front keeps the coercions the body relies on (`&String` to `&str`, `Box<T>` to
    // `Box<dyn Trait>`) and lets `?` pick its error type.
    let hint = func::type_hint(&function.sig.output);
    let closure_output = hint.as_ref().map(|ty| quote!(-> #ty));
    // An async block has no return type annotation; a `return` of the right type that never
    // runs fixes its output type before the body is checked (tracing-attributes does the same).
    let fake_return = hint.as_ref().map(|ty| {
        let fake = syn::Ident::new("__breakerbox_fake_return", mixed);
        quote! {
            #[allow(
                unknown_lints,
                unreachable_code,
                clippy::diverging_sub_expression,
                clippy::empty_loop,
                clippy::let_with_type_underscore,
                clippy::needless_return,
            )]
            if false {
                let #fake: #ty = loop {};
                return #fake;
            }
        }
    });
    let run = if is_async {
        match &args.timeout {
            None => quote!(async move { #fake_return #(#stmts)* }.await),
            Some(timeout) => {
                let after = duration(&private, timeout.value);
                let key = syn::Ident::new("timeout", timeout.key);
                let require = locate(quote!(#private::require_tokio!{}), &key);
                // With a fallback the arguments must still be there after a timeout, so the
                // body borrows what it does not move (plain `async`, not `async move`).
                let capture = args.fallback.is_none().then(|| quote!(move));
                let timeout_reason = quote!(#private::FallbackReason::TimedOut(#elapsed));
                let on_timeout = fallback_call(timeout_reason)
                    .unwrap_or_else(|| locate(quote!(#private::reject_timeout(#elapsed)), &output));
                quote! {{
                    #require
                    match #private::timeout(#after, async #capture { #fake_return #(#stmts)* }).await {
                        #private::Option::Some(#result) => #result,
                        #private::Option::None => {
                            let #elapsed = #private::Timeout::new(#private::Breaker::name(&#breaker), #after);
                            #private::Permit::record_with(
                                #permit,
                                #private::Outcome::Failure,
                                #private::Option::Some(&#elapsed),
                            );
                            return #on_timeout;
                        }
                    }
                }}
            }
        }
    } else {
        // Forced to be `FnOnce` by moving a non-`Copy` marker into it, so a body that moves
        // its arguments or returns borrows of them compiles as it did unwrapped
        // (fn-error-context). The statements are spliced, not the block, so `unused_braces`
        // never blames the user (tracing repro_1831).
        quote! {
            (move || #closure_output {
                #private::ForceFnOnce::consume(#once);
                #(#stmts)*
            })()
        }
    };
    let once_marker = (!is_async).then(|| quote!(let #once = #private::ForceFnOnce;));

    let error = syn::Ident::new("__breakerbox_error", mixed);
    let finish = match &args.classify {
        Some(classify) => {
            let path = &classify.value;
            // Both the call and the expected `Outcome` point at `classify = …`.
            let outcome_type = locate(quote!(#private::Outcome), path);
            let classify = locate(quote!(#path(&#result)), path);
            record_outcome(&private, &permit, &result, &outcome, outcome_type, classify)
        }
        // With a fallback any return type works: a `Result` is judged by `Ok`/`Err`, anything
        // else succeeds unless it panics or times out (autoref specialization, resolved where
        // the type is concrete).
        None if args.fallback.is_some() => record_outcome(
            &private,
            &permit,
            &result,
            &outcome,
            quote!(#private::Outcome),
            quote!({
                use #private::{ClassifyAny as _, ClassifyResult as _};
                (&#private::Classify(&#result)).__breakerbox_outcome()
            }),
        ),
        // The function returns a `Result` (else the error points at its return type): record it
        // by value, keeping the error's `Display` text, if it has one, as the cause.
        None => {
            // The path and the result both sit on the return type: a function that does not
            // return a `Result` is told so there.
            let finish = locate(quote!(#private::finish), &output);
            let located = locate(quote!(#result), &output);
            quote! {
                #finish(#located, #permit, |#error| {
                    use #private::{ErrorCauseDisplay as _, ErrorCauseNone as _};
                    (&#private::ErrorCause(#error)).__breakerbox_error_cause()
                })
            }
        }
    };

    let registration_static = quote! {
        static #registration: #private::Registration = #private::Registration::new(
            #name,
            |#config| #config #configure,
            ::core::file!(),
            ::core::line!(),
            ::core::column!(),
        );
    };
    let keyed_registration_static = quote! {
        static #registration: #private::Registration = #private::Registration::new(
            #name,
            |#config| #config #configure,
            ::core::file!(),
            ::core::line!(),
            ::core::column!(),
        ).keyed();
    };
    let lookup = match &args.key {
        None => quote! {
            // Registered at link time, so the registry knows the breaker, its config and this
            // line before the first call.
            #private::register! { #registration_static }
            // Resolved once per function, not looked up per call: the handle is not generic, so
            // one static serves every instantiation of a generic function.
            static #breaker: #private::LazyLock<#private::Breaker> = #private::LazyLock::new(|| {
                #private::breaker(&#registration)
            });
        },
        Some(key) => {
            let family = syn::Ident::new("__BREAKERBOX_FAMILY", mixed);
            let expr = &key.value;
            let key = syn::Ident::new("__breakerbox_key", mixed);
            // Located at the expression: a key that is not `AsRef<str>` is reported there.
            let key_str = locate(quote!(#private::KeyStr::key_str(#key)), expr);
            quote! {
                // Registered at link time as a keyed family's (not a breaker's), so `check`
                // knows its name and config before the first call; the family is in the
                // registry's `families()` once the function is first called.
                #private::register! { #keyed_registration_static }
                static #family: #private::LazyLock<#private::BreakerMap<#private::String>> =
                    #private::LazyLock::new(|| #private::family(&#registration));
                // A handle to the key's breaker, and the permit, so the key's borrows of the
                // arguments end here, before the body runs. A rejection names the key.
                let #breaker;
                let #permit = {
                    let #key = &(#expr);
                    let #key: &str = #key_str;
                    #breaker = #private::keyed_breaker(&#family, #key);
                    #private::keyed_try_acquire(&#family, &#breaker, #key)
                };
            }
        }
    };
    let acquire = match &args.key {
        None => quote!(#private::Breaker::try_acquire(&#breaker)),
        Some(_) => quote!(#permit),
    };
    quote! {
        #lookup
        let #permit = match #acquire {
            #private::Result::Ok(#permit) => #permit,
            #private::Result::Err(#reject_pattern) => {
                return #on_reject;
            }
        };
        #once_marker
        let #result = #run;
        #finish
    }
}

/// Records `result` by its classified outcome, then evaluates to it. A success records
/// without a cause, so nothing takes the result's address on the path every call takes.
fn record_outcome(
    private: &TokenStream,
    permit: &syn::Ident,
    result: &syn::Ident,
    outcome: &syn::Ident,
    outcome_type: TokenStream,
    classify: TokenStream,
) -> TokenStream {
    quote! {
        let #outcome: #outcome_type = #classify;
        if let #private::Outcome::Success = #outcome {
            #private::Permit::success(#permit);
        } else {
            use #private::{CauseDisplay as _, CauseNone as _};
            #private::Permit::record_with(
                #permit,
                #outcome,
                (&#private::Cause(&#result)).__breakerbox_cause(),
            );
        }
        #result
    }
}

#[cfg(test)]
mod tests {
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
        assert!(out.contains("Ok (id) } . await"), "{out}");
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
        assert!(out.contains("my :: bb :: __private :: LazyLock"), "{out}");
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
}
