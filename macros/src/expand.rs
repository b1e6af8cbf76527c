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

use crate::args::{Args, Errors, FallbackOn, Journal, Key, Name, Window};
use crate::{func, parse, valid};

/// `#[circuit_breaker(attr)] item`, without `proc_macro` types so it can be unit-tested.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    match try_expand(attr, &item) {
        Ok(function) => function,
        // The item is emitted unchanged beside the errors, so one mistake does not bury the
        // user under follow-on errors and rust-analyzer keeps working (tokio #4154/#4162).
        Err(errors) => with_errors(item, errors),
    }
}

/// The stages, in one direction: parse the attribute, check its keys against each other,
/// check the function against them, then write the code. Each stage reports into one
/// `Errors`, so a user sees every mistake of the attribute and the function in one compile.
fn try_expand(attr: TokenStream, item: &TokenStream) -> Result<TokenStream, Errors> {
    let mut errors = Errors::default();
    let args = parse::parse(attr, &mut errors);
    valid::check(&args, &mut errors);
    // With mistakes in the attribute, the function is checked against the defaults: its own
    // shape (`const`, `extern`, a returned future, …) is still reported, and the checks that
    // read keys wait for an attribute without mistakes.
    let args = if errors.is_empty() {
        args
    } else {
        Args::default()
    };
    let mut function = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(function) => function,
        Err(parse_error) => {
            errors.push(func::not_a_function(item, parse_error));
            return Err(errors);
        }
    };
    func::check(&function, &args, &mut errors);
    errors.finish()?;
    let body = body(&function, &args);
    function.block.stmts = vec![Stmt::Expr(Expr::Verbatim(body), None)];
    if args.replay.is_some() {
        // The body, with its `mut` arguments, moved to a closure of its own: the wrapper's
        // arguments are only passed on.
        for arg in &mut function.sig.inputs {
            if let syn::FnArg::Typed(typed) = arg
                && matches!(&*typed.pat, syn::Pat::Ident(ident) if ident.mutability.is_some())
            {
                typed.attrs.push(syn::parse_quote!(#[allow(unused_mut)]));
            }
        }
    }
    Ok(function.into_token_stream())
}

fn with_errors(item: TokenStream, errors: Errors) -> TokenStream {
    let errors = errors.finish().err().map(|error| error.to_compile_error());
    quote!(#errors #item)
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

/// `.method(value)` for a whole-number key the user set, the value a suffixed literal
/// (`3u32`, `50u8`) so the builder's parameter type is checked where it was parsed.
fn number<T: ToTokens>(method: &str, key: Option<&Key<T>>) -> Option<TokenStream> {
    key.map(|key| {
        let method = format_ident!("{method}");
        let value = &key.value;
        quote!(.#method(#value))
    })
}

/// The builder calls for every policy key the user set, in a fixed order.
fn configure(args: &Args, private: &TokenStream) -> TokenStream {
    let mut calls: Vec<TokenStream> = [
        number("failures", args.failures.as_ref()),
        number("min_calls", args.min_calls.as_ref()),
        number("half_open_calls", args.half_open_calls.as_ref()),
        number("successes", args.successes.as_ref()),
        number("max_concurrent", args.max_concurrent.as_ref()),
        number("max_keys", args.max_keys.as_ref()),
        number("failure_rate", args.failure_rate.as_ref()),
        number("slow_rate", args.slow_rate.as_ref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    for (method, value) in [
        ("failures_within", &args.failures_within),
        ("slow", &args.slow),
        ("open_for", &args.open_for),
        ("max_open_for", &args.max_open_for),
        ("probe_timeout", &args.probe_timeout),
        ("probe_every", &args.probe_every),
        ("idle_for", &args.idle_for),
        ("timeout", &args.timeout),
    ] {
        if let Some(value) = value {
            let method = format_ident!("{method}");
            let value = duration(private, value.value);
            calls.push(quote!(.#method(#value)));
        }
    }
    for (method, value) in [
        ("latency", &args.latency),
        ("health", &args.health),
        ("critical", &args.critical),
    ] {
        if let Some(value) = value {
            let method = format_ident!("{method}");
            let value = value.value;
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
    if let Some(probe) = &args.probe {
        // Located at the path: a function that cannot be a probe is reported at `probe = …`.
        let path = &probe.value;
        let method = locate(quote!(.probe), path);
        let call = locate(quote!((#path)), path);
        calls.push(quote!(#method #call));
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

/// The statements that replace the body, in the three parts the "Equivalent code" section of
/// the attribute's docs shows: get a permit, run the body, record its outcome.
fn body(function: &ItemFn, args: &Args) -> TokenStream {
    let cx = Ctx::new(function, args);
    let admission = cx.admission();
    let run = cx.run();
    let not_a_future = cx.not_a_future();
    let finish = cx.finish();
    quote! {
        #admission
        #run
        #not_a_future
        #finish
    }
}

/// What the three parts of the generated body share.
struct Ctx<'a> {
    function: &'a ItemFn,
    args: &'a Args,
    /// `::breakerbox::__private`, or the `crate = …` path's.
    private: TokenStream,
    /// Where an error about the function's return type points: the return type, or the
    /// function's name when it returns `()`.
    output: TokenStream,
    /// `.await` in an `async fn`.
    dot_await: Option<TokenStream>,
    // Generated locals resolve at the macro's definition site, so they can neither shadow
    // nor be shadowed by the user's names (cached #230); the `__breakerbox_` prefix keeps
    // them readable in expanded code.
    /// A static per function, or with `key` a local handle to the key's breaker.
    breaker: syn::Ident,
    registration: syn::Ident,
    permit: syn::Ident,
    rejected: syn::Ident,
    result: syn::Ident,
    outcome: syn::Ident,
    once: syn::Ident,
    config: syn::Ident,
    elapsed: syn::Ident,
    /// With `replay`: the body as a function of the arguments, and the started replay.
    body_fn: syn::Ident,
    replay: syn::Ident,
}

impl<'a> Ctx<'a> {
    fn new(function: &'a ItemFn, args: &'a Args) -> Self {
        // A `crate = …` path is the user's: located there, a path where breakerbox is not
        // is reported at it.
        let private = args.krate.as_ref().map_or_else(
            || quote!(::breakerbox::__private),
            |krate| {
                let path = &krate.value;
                locate(quote!(#path::__private), path)
            },
        );
        let mixed = |name: &str| syn::Ident::new(name, Span::mixed_site());
        Ctx {
            function,
            args,
            private,
            output: func::output_anchor(function),
            dot_await: function.sig.asyncness.is_some().then(|| quote!(.await)),
            breaker: if args.key.is_some() {
                mixed("__breakerbox_breaker")
            } else {
                mixed("__BREAKERBOX_BREAKER")
            },
            registration: mixed("__BREAKERBOX_REGISTRATION"),
            permit: mixed("__breakerbox_permit"),
            rejected: mixed("__breakerbox_rejected"),
            result: mixed("__breakerbox_result"),
            outcome: mixed("__breakerbox_outcome"),
            once: mixed("__breakerbox_once"),
            config: mixed("__breakerbox_config"),
            elapsed: mixed("__breakerbox_timeout"),
            body_fn: mixed("__breakerbox_body"),
            replay: mixed("__breakerbox_replay"),
        }
    }

    /// The fallback's answer, given why it answers (`fallback_with_reason`: a
    /// `FallbackReason` as its last argument). Located at the fallback path: a fallback whose
    /// arguments or return type do not match the function is reported at `fallback = …`.
    fn fallback_call(&self, reason: TokenStream) -> Option<TokenStream> {
        let dot_await = &self.dot_await;
        self.args.fallback.as_ref().map(|fallback| {
            let path = &fallback.value;
            let mut arguments = func::fallback_args(self.function, fallback.span);
            if self.args.fallback_with_reason {
                arguments.push(reason);
            }
            locate(quote!(#path(#(#arguments),*) #dot_await), path)
        })
    }

    /// The registration (the breaker's name, its config and this line, known to the registry
    /// before the first call), and the breaker: a static per function, or with `key` a local
    /// handle to the key's breaker.
    fn lookup(&self) -> TokenStream {
        let Ctx {
            function,
            args,
            private,
            breaker,
            registration,
            config,
            permit,
            ..
        } = self;
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
        let configure = configure(args, private);
        // A keyed function's registration says so: its name is a family's, not a breaker's.
        let keyed = args.key.is_some().then(|| quote!(.keyed()));
        // A function with `timeout` reads the breaker's at each call: a file may set it.
        let timed = args.timeout.is_some().then(|| quote!(.timed()));
        // `config = "<name>"`: a file's `[configs.<name>]` under the attribute's keys.
        let base = args.config.as_ref().map(|config| {
            let name = &config.value;
            quote!(.base(#name))
        });
        // Without policy keys, the shared identity rather than a closure of the function's own.
        let configure = if configure.is_empty() {
            quote!(#private::no_keys)
        } else {
            quote!(|#config| #config #configure)
        };
        let registration_static = quote! {
            static #registration: #private::Registration = #private::Registration::new(
                #name,
                #configure,
                ::core::file!(),
                ::core::line!(),
                ::core::column!(),
            ) #keyed #timed #base;
        };
        match &args.key {
            None => quote! {
                // Registered at link time, so the registry knows the breaker, its config and this
                // line before the first call.
                #private::register! { #registration_static }
                // Resolved once per function, not looked up per call: the handle is not generic, so
                // one static serves every instantiation of a generic function. A panic while
                // creating it fails this call only; the next call creates it.
                static #breaker: #private::Lazy<#private::Breaker> =
                    #private::Lazy::new(#private::breaker, &#registration);
            },
            Some(key) => {
                let family = syn::Ident::new("__BREAKERBOX_FAMILY", Span::mixed_site());
                let expr = &key.value;
                let key = syn::Ident::new("__breakerbox_key", Span::mixed_site());
                // Located at the expression: a key that is not `AsRef<str>` is reported there.
                let key_str = locate(quote!(#private::KeyStr::key_str(#key)), expr);
                quote! {
                    // Registered at link time as a keyed family's name (not a breaker's), so
                    // `check` knows its name and config before the first call; the family is in
                    // the registry's `families()` once the function is first called.
                    #private::register! { #registration_static }
                    // Made on first use, again after a panic (as the breaker above).
                    static #family: #private::Lazy<#private::BreakerMap<#private::String>> =
                        #private::Lazy::new(#private::family, &#registration);
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
        }
    }

    /// The breaker, then the permit: a rejected call returns the fallback's answer, or the
    /// rejection converted into the function's error type.
    fn admission(&self) -> TokenStream {
        let Ctx {
            args,
            private,
            breaker,
            permit,
            rejected,
            ..
        } = self;
        let lookup = self.lookup();
        let reject_reason = quote!(#private::FallbackReason::Rejected(#rejected));
        let (reject_pattern, mut on_reject) = match self.fallback_call(reject_reason) {
            Some(call) if args.fallback_with_reason => (quote!(#rejected), call),
            Some(call) => (quote!(_), call),
            None => (
                quote!(#rejected),
                // Located at the return type, whose error type lacks `From<Rejected>`.
                locate(quote!(#private::reject(#rejected)), &self.output),
            ),
        };
        let replay = self.replay_prelude();
        if replay.is_some() {
            let journal = self.journal(rejected);
            on_reject = quote!({
                #journal
                #on_reject
            });
        }
        // With `key`, the lookup has already asked for the permit.
        let acquire = match &args.key {
            None => quote!(#private::acquire(&#breaker)),
            Some(_) => quote!(#permit),
        };
        quote! {
            #lookup
            #replay
            let #permit = match #acquire {
                #private::Result::Ok(#permit) => #permit,
                #private::Result::Err(#reject_pattern) => {
                    return #on_reject;
                }
            };
        }
    }

    /// The body, run once with the permit held, into `result`: a closure called once for a
    /// plain `fn`, `async move { … }.await` for an `async fn`, inside the tokio timeout with
    /// `timeout`.
    fn run(&self) -> TokenStream {
        let Ctx {
            function,
            args,
            private,
            output,
            breaker,
            permit,
            result,
            once,
            elapsed,
            ..
        } = self;
        let stmts = &function.block.stmts;
        // Its result type is the function's return type (with `impl Trait` erased to `_`,
        // which a hint may use where a signature may not: tracing #1227, async-trait #281).
        // Giving it up front keeps the coercions the body relies on (`&String` to `&str`,
        // `Box<T>` to `Box<dyn Trait>`) and lets `?` pick its error type.
        let hint = func::type_hint(&function.sig.output);
        // With `fallback_on = "error"` the fallback may answer after the body ran, so the
        // body borrows the arguments it does not move (plain `||` and `async`, not `move`).
        let on_error = self.on_error();
        let capture = (!on_error).then(|| quote!(move));
        // With `replay` the body is a function of the arguments (see `replay_prelude`).
        let replay_call = args.replay.is_some().then(|| {
            let body_fn = &self.body_fn;
            let names = replay_names(function);
            quote!(#body_fn(#(#names),*))
        });
        if function.sig.asyncness.is_none() {
            if let Some(call) = &replay_call {
                return quote!(let #result = #call;);
            }
            let closure_output = hint.as_ref().map(|ty| quote!(-> #ty));
            // Forced to be `FnOnce` by moving a non-`Copy` marker into it, so a body that moves
            // its arguments or returns borrows of them compiles as it did unwrapped
            // (fn-error-context). The statements are spliced, not the block, so
            // `unused_braces` never blames the user (tracing repro_1831).
            return quote! {
                let #once = #private::ForceFnOnce;
                let #result = (#capture || #closure_output {
                    #private::ForceFnOnce::consume(#once);
                    #(#stmts)*
                })();
            };
        }
        let fake_return = fake_return(function);
        // The permit is held by `Guarded` across the `.await`: a panic out of the body is a
        // failure even when a catcher stops it first, and the future dropped unfinished is a
        // cancelled call even while a sibling's panic unwinds the task.
        let body = replay_call
            .clone()
            .unwrap_or_else(|| quote!(async #capture { #fake_return #(#stmts)* }));
        let Some(timeout) = &args.timeout else {
            return quote! {
                let (#result, #permit) = #private::Guarded::new(#permit, #body).await;
            };
        };
        // The breaker's timeout now: the attribute's is one layer of its config, which a file,
        // a variable or a reload may change.
        let after = duration(private, timeout.value);
        let after = quote!(#private::call_timeout(&#breaker, #after));
        let now = syn::Ident::new("__breakerbox_after", Span::mixed_site());
        let key = syn::Ident::new("timeout", timeout.key);
        let require = locate(quote!(#private::require_tokio!{}), &key);
        // With a fallback the arguments must still be there after a timeout, so the body
        // borrows what it does not move (plain `async`, not `async move`).
        let capture = args.fallback.is_none().then(|| quote!(move));
        let body =
            replay_call.unwrap_or_else(|| quote!(async #capture { #fake_return #(#stmts)* }));
        let timeout_reason = quote!(#private::FallbackReason::TimedOut(#elapsed));
        let on_timeout = self
            .fallback_call(timeout_reason)
            .unwrap_or_else(|| locate(quote!(#private::reject_timeout(#elapsed)), output));
        quote! {
            let (#result, #permit) = {
                #require
                let #now = #after;
                let (#result, #permit) = #private::timeout(#now, #body, #permit);
                match #private::Guarded::new(#permit, #result).await {
                    (#private::Option::Some(#result), #permit) => (#result, #permit),
                    (#private::Option::None, #permit) => {
                        let #elapsed = #private::Timeout::new(#private::Breaker::name(&#breaker), #now);
                        // A failure, counted among the timeouts, timed at least `#now`.
                        #private::Permit::timed_out(#permit, &#elapsed);
                        return #on_timeout;
                    }
                }
            };
        }
    }

    /// A plain `fn` whose result is a future is an error at its return type: the outcome
    /// would be recorded when the future is created. `func::check` sees `impl Future` and
    /// `Pin<Box<dyn Future>>` as written; this sees a future behind an alias (`BoxFuture`) or
    /// a named type, which would otherwise compile and record every call as it starts.
    fn not_a_future(&self) -> Option<TokenStream> {
        let Ctx {
            function,
            private,
            output,
            result,
            ..
        } = self;
        if function.sig.asyncness.is_some() {
            return None;
        }
        // Both the check and what it checks sit on the return type.
        let check = locate(quote!(#private::not_a_future), output);
        let returns = locate(
            quote!((&#private::ReturnOf(&#result)).__breakerbox_return()),
            output,
        );
        Some(quote! {
            {
                use #private::{FutureReturn as _, ValueReturn as _};
                #check(#returns);
            }
        })
    }

    /// Records the outcome, then evaluates to the result: by `classify = path`, by autoref
    /// classification with a fallback (any return type), or by `Ok`/`Err` through
    /// `__private::finish`.
    fn finish(&self) -> TokenStream {
        let Ctx {
            args,
            private,
            output,
            permit,
            result,
            ..
        } = self;
        match &args.classify {
            Some(classify) => {
                let path = &classify.value;
                // Both the call and the expected `Outcome` point at `classify = …`.
                let outcome_type = locate(quote!(#private::Outcome), path);
                let classify = locate(quote!(#path(&#result)), path);
                self.record_outcome(outcome_type, classify)
            }
            // With a fallback any return type works: a `Result` is judged by `Ok`/`Err`,
            // anything else succeeds unless it panics or times out (autoref specialization,
            // resolved where the type is concrete).
            None if args.fallback.is_some() => self.record_outcome(
                quote!(#private::Outcome),
                quote!({
                    use #private::{ClassifyAny as _, ClassifyResult as _};
                    (&#private::OutcomeOf(&#result)).__breakerbox_outcome()
                }),
            ),
            // The function returns a `Result` (else the error points at its return type):
            // record it by value, keeping the error's `Display` text, if it has one, as the
            // cause.
            None => {
                // The path and the result both sit on the return type: a function that does
                // not return a `Result` is told so there. The cause is a type picked here,
                // not a closure, so `finish` is shared by functions of one return type.
                let finish = locate(quote!(#private::finish), output);
                let located = locate(quote!(#result), output);
                quote! {
                    {
                        use #private::{ErrorCauseDisplay as _, ErrorCauseNone as _};
                        #finish(
                            (&#private::ErrorCause(&#result)).__breakerbox_error_cause(),
                            #located,
                            #permit,
                        )
                    }
                }
            }
        }
    }

    /// `fallback_on = "error"`: the fallback also answers calls that ran and failed.
    fn on_error(&self) -> bool {
        matches!(
            self.args.fallback_on,
            Some(Key {
                value: FallbackOn::Error,
                ..
            })
        )
    }

    /// Records `result` by its classified outcome, then evaluates to it. A success records
    /// without a cause, so nothing takes the result's address on the path every call takes.
    /// With `fallback_on = "error"`, a failure (or a trip) is answered by the fallback once
    /// recorded.
    fn record_outcome(&self, outcome_type: TokenStream, classify: TokenStream) -> TokenStream {
        let Ctx {
            args,
            private,
            breaker,
            permit,
            result,
            outcome,
            ..
        } = self;
        let classified = args.classify.is_some();
        let failed = quote!(#private::FallbackReason::Failed(#private::CallFailed::new(
            #private::Breaker::clone(&#breaker),
            #outcome,
            #classified,
        )));
        // `valid` makes sure `fallback_on` comes with a fallback.
        let answer = self
            .fallback_call(failed)
            .filter(|_| self.on_error())
            .map(|call| {
                quote! {
                    if #private::failed(#outcome) {
                        return #call;
                    }
                }
            });
        quote! {
            let #outcome: #outcome_type = #classify;
            if let #private::Outcome::Success = #outcome {
                #private::succeed(#permit);
            } else {
                use #private::{CauseDisplay as _, CauseNone as _};
                #private::Permit::record_with(
                    #permit,
                    #outcome,
                    (&#private::CauseOf(&#result)).__breakerbox_cause(),
                );
                #answer
            }
            #result
        }
    }
}

/// The names of the function's arguments, as `replay` passes them on (each `name: Type`,
/// checked by `func::check`).
fn replay_names(function: &ItemFn) -> Vec<syn::Ident> {
    function
        .sig
        .inputs
        .iter()
        .filter_map(|arg| match arg {
            syn::FnArg::Typed(typed) => match &*typed.pat {
                syn::Pat::Ident(ident) => Some(ident.ident.clone()),
                _ => None,
            },
            syn::FnArg::Receiver(_) => None,
        })
        .collect()
}

/// An async block has no return type annotation; a `return` of the function's return type
/// that never runs fixes its output type before the body is checked (tracing-attributes does
/// the same).
fn fake_return(function: &ItemFn) -> Option<TokenStream> {
    let ty = func::type_hint(&function.sig.output)?;
    let fake = syn::Ident::new("__breakerbox_fake_return", Span::mixed_site());
    Some(quote! {
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
    })
}

impl Ctx<'_> {
    /// With `replay`: each argument checked for what its journal needs (at the argument),
    /// the body as a function of the arguments, and the replay, started at the first call
    /// inside a tokio runtime.
    fn replay_prelude(&self) -> Option<TokenStream> {
        let Ctx {
            function,
            args,
            private,
            breaker,
            body_fn,
            replay,
            ..
        } = self;
        let journal = args.replay.as_ref()?;
        let (check, start) = match journal.value {
            Journal::Memory => (quote!(memory_arg), quote!(memory)),
            Journal::Disk => (quote!(disk_arg), quote!(disk)),
            Journal::Fleet => (quote!(fleet_arg), quote!(fleet)),
        };
        let key = syn::Ident::new("replay", journal.key);
        let mut require = locate(quote!(#private::require_replay!{}), &key);
        if journal.value == Journal::Fleet {
            require.extend(locate(quote!(#private::require_replay_fleet!{}), &key));
        }
        let names = replay_names(function);
        let types: Vec<&syn::Type> = function
            .sig
            .inputs
            .iter()
            .filter_map(|arg| match arg {
                syn::FnArg::Typed(typed) => Some(&*typed.ty),
                syn::FnArg::Receiver(_) => None,
            })
            .collect();
        let checks = function.sig.inputs.iter().filter_map(|arg| match arg {
            syn::FnArg::Typed(typed) => {
                let syn::Pat::Ident(ident) = &*typed.pat else {
                    return None;
                };
                let name = &ident.ident;
                Some(locate(quote!(#private::replay::#check(&#name);), typed))
            }
            syn::FnArg::Receiver(_) => None,
        });
        let params = function.sig.inputs.iter();
        let asyncness = &function.sig.asyncness;
        let stmts = &function.block.stmts;
        // The body as a closure that captures nothing (so it is `Copy`, `Send`, `Sync` and
        // `'static` for the replay), not as a nested `fn`: a nested item cannot name the `impl`'s
        // `Self` or generic parameters, which an associated function's body may use.
        let body_closure = if asyncness.is_some() {
            let fake_return = fake_return(function);
            quote!(|#(#params),*| async move { #fake_return #(#stmts)* })
        } else {
            let output = func::type_hint(&function.sig.output).map(|ty| quote!(-> #ty));
            quote!(|#(#params),*| #output { #(#stmts)* })
        };
        let mut config = quote!(#private::replay::ReplayConfig::new());
        if let Some(max) = &args.replay_max {
            let max = max.value as usize;
            config.extend(quote!(.max_entries(#max)));
        }
        if let Some(ttl) = &args.replay_ttl {
            let ttl = duration(private, ttl.value);
            config.extend(quote!(.ttl(#ttl)));
        }
        if let Some(rate) = &args.replay_rate {
            let rate = rate.value;
            config.extend(quote!(.rate(#rate)));
        }
        if let Some(attempts) = &args.replay_attempts {
            let attempts = attempts.value;
            config.extend(quote!(.attempts(#attempts)));
        }
        let dot_await = &self.dot_await;
        let call = quote!(#body_fn(#(#names),*) #dot_await);
        let result = syn::Ident::new("__breakerbox_result", Span::mixed_site());
        let classified = match &args.classify {
            Some(classify) => {
                let path = &classify.value;
                quote!(#path(&#result))
            }
            // A `Result` by `Ok`/`Err`. Any other type classifies too: a function that returns
            // one is told so once, at its return type, by `finish`.
            None => quote!({
                use #private::{ClassifyAny as _, ClassifyResult as _};
                (&#private::OutcomeOf(&#result)).__breakerbox_outcome()
            }),
        };
        let outcome = quote! {
            match #classified {
                #private::Outcome::Success | #private::Outcome::Ignored => #private::Result::Ok(()),
                _ => {
                    use #private::{CauseDisplay as _, CauseNone as _};
                    #private::Result::Err(#private::replay::failure_message(
                        (&#private::CauseOf(&#result)).__breakerbox_cause(),
                    ))
                }
            }
        };
        // A synchronous body runs when the replay is called, an async one when it is polled.
        let replay_fn = if asyncness.is_some() {
            quote!(move |(#(#names,)*): (#(#types,)*)| async move {
                let #result = #call;
                #outcome
            })
        } else {
            quote!(move |(#(#names,)*): (#(#types,)*)| {
                let #result = #call;
                let #result = #outcome;
                async move { #result }
            })
        };
        // `replay = "fleet"` also takes when a dead instance's entries are taken over.
        let claim_after =
            (journal.value == Journal::Fleet).then(|| match &args.replay_claim_after {
                Some(claim) => {
                    let claim = duration(private, claim.value);
                    quote!(#private::Option::Some(#claim),)
                }
                None => quote!(#private::Option::None,),
            });
        let slot = syn::Ident::new("__BREAKERBOX_REPLAY", Span::mixed_site());
        Some(quote! {
            #require
            #(#checks)*
            let #body_fn = #body_closure;
            static #slot: #private::replay::ReplaySlot<(#(#types,)*)> =
                #private::replay::ReplaySlot::new();
            // Started off the call path (a fleet journal's Redis may not answer); only a
            // rejected call waits for a start under way (see `journal`).
            #private::replay::ReplaySlot::start(&#slot, move || {
                #private::replay::#start(&*#breaker, #config, #claim_after #replay_fn)
            });
            let #replay = &#slot;
        })
    }

    /// Journals a rejected call's arguments (under its `replay_key`), marking the rejection
    /// journaled if they were.
    fn journal(&self, rejected: &syn::Ident) -> TokenStream {
        let Ctx {
            function,
            args,
            private,
            replay,
            ..
        } = self;
        let names = replay_names(function);
        let key = match &args.replay_key {
            Some(key) => {
                let expr = &key.value;
                let key_str = locate(quote!(#private::ReplayKeyStr::key_str(&(#expr))), expr);
                quote!(#private::Option::Some(#private::String::from(#key_str)))
            }
            None => quote!(#private::Option::None),
        };
        // An `async fn`'s call journals without holding its runtime's thread: one call into
        // `journal_async`, which waits for the start and the journal off the runtime's threads.
        if function.sig.asyncness.is_some() {
            return quote! {
                let #rejected = #private::replay::journal_async(#replay, #rejected, move || {
                    let __breakerbox_key = #key;
                    (__breakerbox_key, (#(#names,)*))
                })
                .await;
            };
        }
        quote! {
            let #rejected = match #private::replay::ReplaySlot::get(#replay) {
                #private::Option::Some(#replay) => {
                    let __breakerbox_key = #key;
                    #private::replay::Replay::journal_keyed(
                        #replay,
                        #rejected,
                        __breakerbox_key,
                        (#(#names,)*),
                    )
                }
                #private::Option::None => #rejected,
            };
        }
    }
}

#[cfg(test)]
mod tests;
